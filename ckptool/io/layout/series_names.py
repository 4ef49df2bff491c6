"""The names of a Keras ``ModelCheckpoint`` file series: its filepath template, parsed, and
which file names are members of it, matched exactly (``prune --series``).

Keras (3, and tf_keras) names each save ``filepath.format(epoch=epoch + 1, **logs)`` (with
``batch=batch + 1`` when saving every N batches; both 1-based, ``batch`` counting within the
epoch), so the template is Python's format string: literal text, ``{{``/``}}`` for braces, and
fields ``{name}``, ``{name:spec}``, ``{name!r:spec}``. The template is split by Python's own
parser (:class:`string.Formatter`); a file name is then matched against it part by part:
literal text compared as it is (never a glob or regex built from it), and a field's text
accepted only when a value formats back to exactly that text with the field's spec
(``{epoch:02d}`` takes ``03`` and ``123`` but not ``3``; ``{val_loss:.2f}`` takes ``0.41`` but
not ``0.410``). A name two ways (``{epoch}{batch}`` and ``123``) is ambiguous and no member.

What a member is, by the template's ending (:data:`KINDS`):

- ``.keras``: one zip file; ``.weights.h5``, ``.h5``/``.hdf5`` (tf_keras, legacy Keras): one
  HDF5 file; Keras writes each in place, under its final name;
- ``.weights.json``: the JSON file plus the parts Keras names ``<base>_<NNNNN>.weights.h5``
  beside it (``<base>`` the JSON file's stem without ``.weights``; the JSON is written last);
- anything else: a TF checkpoint prefix (tf_keras ``save_weights`` in the TF format): the
  prefix's own files (:func:`ckptool.io.layout.names.owns`).
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

from ckptool.errors import UsageError

KERAS, WEIGHTS_H5, SHARDED, H5, TF_PREFIX = "keras", "weights.h5", "weights.json", "h5", "tf"
#: The template's ending -> the kind of its members (longest ending first).
KINDS = ((".weights.json", SHARDED), (".weights.h5", WEIGHTS_H5), (".keras", KERAS), (".hdf5", H5), (".h5", H5))
#: The fields that order a series (Keras's counters), in order of precedence.
COUNTERS = ("epoch", "batch")
#: A sharded member's part: ``<base>_<index:05>.weights.h5`` (Keras's ShardedH5IOStore).
PART_SUFFIX = ".weights.h5"
_MAX_STEPS = 20000  # backtracking budget of one match: a name that needs more is called ambiguous

# Python's format-spec mini-language: [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC = re.compile(r"(?:(?P<fill>.)?(?P<align>[<>=^]))?(?P<sign>[-+ ])?(?P<z>z)?(?P<alt>#)?(?P<zero>0)?"
                   r"(?P<width>\d+)?(?P<grouping>[,_])?(?:\.(?P<precision>\d+))?(?P<type>[bdeEfFgGnoxX%])?",
                   re.DOTALL)
_INT_TYPES = {"d": 10, "n": 10, "x": 16, "X": 16, "o": 8, "b": 2}
_FLOAT_TYPES = frozenset("eEfFgG%")

Value = int | float


@dataclass(frozen=True)
class Field:
    """One ``{name!conversion:spec}`` of a template."""

    name: str
    spec: str
    conversion: str | None

    @property
    def text(self) -> str:
        conv = f"!{self.conversion}" if self.conversion else ""
        return "{" + self.name + conv + (":" + self.spec if self.spec else "") + "}"

    def formats(self, value: Value) -> str:
        """The text Keras writes for ``value``."""
        v: object = value
        if self.conversion == "r":
            v = repr(value)
        elif self.conversion in ("s", "a"):
            v = str(value)
        return format(v, self.spec)

    def values(self, text: str) -> list[Value]:
        """Every value this field formats as exactly ``text`` (at most one int and one float)."""
        if not text or "/" in text:
            return []
        m = _SPEC.fullmatch(self.spec) if self.conversion is None else None
        typ = m.group("type") if m else None
        out: list[Value] = []
        for s in _number_texts(text, m):
            for v in _parse(s, typ, self.name in COUNTERS):
                try:
                    if self.formats(v) == text and v not in out:
                        out.append(v)
                except (ValueError, TypeError, OverflowError):
                    continue
        return out


def _number_texts(text: str, m: re.Match[str] | None) -> list[str]:
    """The number ``text`` may spell once padding, grouping and a ``%`` are taken off."""
    cands = [text.strip()]
    if m is not None and m.group("align"):
        fill = m.group("fill") or " "
        cands += [text.strip(fill), text.lstrip(fill), text.rstrip(fill)]
    out = []
    for c in cands:
        if m is not None and m.group("grouping"):
            c = c.replace(m.group("grouping"), "")
        if c and c not in out:
            out.append(c)
    return out


def _parse(s: str, typ: str | None, counter: bool) -> list[Value]:
    out: list[Value] = []
    if typ in _INT_TYPES or typ is None:
        base = _INT_TYPES.get(typ or "d", 10)
        body = s[2:] if base != 10 and s.lower().startswith(("0x", "0o", "0b")) else s
        if body.lstrip("+-").isalnum() and "_" not in s:
            try:
                out.append(int(body, base))
            except ValueError:
                pass
    if not counter and (typ in _FLOAT_TYPES or typ is None or typ == "n"):
        t = s[:-1] if typ == "%" and s.endswith("%") else s
        if "_" not in t:
            try:
                f = float(t)
                out.append(f / 100.0 if typ == "%" and math.isfinite(f) else f)
            except ValueError:
                pass
    return out


Part = str | Field


@dataclass(frozen=True)
class Template:
    """A parsed ModelCheckpoint filepath template (its file-name part)."""

    text: str
    parts: tuple[Part, ...]
    kind: str
    directory: str = ""  # the directory part as given (``ckpt`` of ``ckpt/model-{epoch}.keras``)

    @property
    def fields(self) -> list[str]:
        seen: list[str] = []
        for p in self.parts:
            if isinstance(p, Field) and p.name not in seen:
                seen.append(p.name)
        return seen

    @property
    def counters(self) -> list[str]:
        """The ordering fields the template has (``epoch``, ``batch``), in that order."""
        return [c for c in COUNTERS if c in self.fields]

    def match(self, name: str) -> dict[str, Value] | None:
        """The field values of member name ``name`` (a file name for Keras files, the prefix for
        TF ones); None when it is no member or names one two ways (:meth:`readings`)."""
        found = self.readings(name)
        return found[0] if len(found) == 1 else None

    def readings(self, name: str) -> list[dict[str, Value]]:
        """The ways ``name`` reads as this template's (at most two): none, one, or two for an
        ambiguous name (also when the search is past its budget)."""
        found: list[dict[str, Value]] = []
        budget = [_MAX_STEPS]
        self._walk(name, 0, 0, {}, found, budget)
        if budget[0] <= 0 and len(found) == 1:
            found.append(found[0])
        return found

    def _walk(self, name: str, i: int, pos: int, values: dict[str, Value], found: list[dict[str, Value]],
              budget: list[int]) -> None:
        budget[0] -= 1
        if budget[0] <= 0 or len(found) > 1:
            return
        if i == len(self.parts):
            if pos == len(name) and values not in found:
                found.append(dict(values))
            return
        p = self.parts[i]
        if isinstance(p, str):
            if name.startswith(p, pos):
                self._walk(name, i + 1, pos + len(p), values, found, budget)
            return
        nxt = self.parts[i + 1] if i + 1 < len(self.parts) else None
        ends: list[int]
        if nxt is None:
            ends = [len(name)]
        elif isinstance(nxt, str):  # the field ends where the next literal text starts
            ends = []
            at = name.find(nxt, pos + 1)
            while at >= 0:
                ends.append(at)
                at = name.find(nxt, at + 1)
        else:
            ends = list(range(pos + 1, len(name)))
        for end in ends:
            for v in p.values(name[pos:end]):
                if p.name in values and values[p.name] != v:
                    continue
                had = p.name in values
                values[p.name] = v
                self._walk(name, i + 1, end, values, found, budget)
                if not had:
                    del values[p.name]
                if len(found) > 1:
                    return

    def format(self, **values: Value) -> str:
        """The member name Keras writes for these values (tests, messages)."""
        return "".join(p if isinstance(p, str) else p.formats(values[p.name]) for p in self.parts)


def parse_template(text: str) -> Template:
    """The template of ``--series`` / ``series = ...``; a directory part (no field in it) is
    kept apart in :attr:`Template.directory` (the caller checks it names DIR). UsageError
    naming what is wrong: a field Keras could not have filled (positional ``{}``, ``{a.b}``,
    ``{a[0]}``, a nested ``{x:{w}}``), a spec Python refuses, a field in a directory name."""
    if not isinstance(text, str) or not text or "\0" in text:
        raise UsageError(f"--series: not a template: {text!r}")
    directory, base = split_template(text)
    if "/" in base:
        raise UsageError(f"--series {text!r}: a field in a directory name; ckptool prunes the files "
                         f"of one directory")
    try:
        parsed = list(string.Formatter().parse(base))
    except ValueError as exc:
        raise UsageError(f"--series {text!r}: {exc}") from None
    parts: list[Part] = []
    for literal, name, spec, conv in parsed:
        if literal:
            if parts and isinstance(parts[-1], str):
                parts[-1] += literal
            else:
                parts.append(literal)
        if name is None:
            continue
        if not name.isidentifier():
            raise UsageError(f"--series {text!r}: field {{{name}}}: Keras fills fields by name "
                             f"(epoch, batch, a logged metric such as val_loss)")
        spec = spec or ""
        if "{" in spec or "}" in spec:
            raise UsageError(f"--series {text!r}: field {{{name}}} has a nested field in its spec")
        if conv is None and _SPEC.fullmatch(spec) is None:
            raise UsageError(f"--series {text!r}: field {{{name}:{spec}}}: not a number format")
        if conv is not None and conv not in "rsa":
            raise UsageError(f"--series {text!r}: field {{{name}!{conv}}}: unknown conversion")
        f = Field(name, spec, conv)
        try:
            f.formats(1 if name in COUNTERS else 0.5)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"--series {text!r}: field {f.text}: {exc}") from None
        parts.append(f)
    if not any(isinstance(p, Field) for p in parts):
        raise UsageError(f"--series {text!r}: no {{field}}: a series template names each save apart, "
                         f"e.g. model-{{epoch:02d}}.keras")
    last = parts[-1]
    kind = next((k for end, k in KINDS if isinstance(last, str) and last.endswith(end)), TF_PREFIX)
    return Template(text, tuple(parts), kind, directory)


def split_template(text: str) -> tuple[str, str]:
    """``(directory part, file-name part)`` of a template given with its directory
    (``ckpt/model-{epoch}.keras``); a field before the last ``/`` leaves it all in the name."""
    cut = text.rfind("/")
    first_field = text.find("{")
    if cut < 0 or (0 <= first_field < cut):
        return "", text
    return text[:cut] or "/", text[cut + 1:]


def sharded_base(json_name: str) -> str:
    """The base of a sharded member's parts: Keras's ``Path(json).stem.replace(".weights", "")``."""
    stem = json_name[: -len(".json")] if json_name.endswith(".json") else json_name.rsplit(".", 1)[0]
    return stem.replace(".weights", "")


def part_index(json_name: str, name: str) -> int | None:
    """The shard index of ``name`` when it is a part of sharded member ``json_name``
    (``<base>_<index:05>.weights.h5``, exactly as Keras names it), else None."""
    head = sharded_base(json_name) + "_"
    if not (name.startswith(head) and name.endswith(PART_SUFFIX)):
        return None
    digits = name[len(head): -len(PART_SUFFIX)]
    if not digits.isascii() or not digits.isdigit() or format(int(digits), "05") != digits:
        return None
    return int(digits)


def is_series_file(name: str) -> bool:
    """A file name a Keras ModelCheckpoint series could hold (by its ending alone)."""
    low = name.lower()
    return low.endswith((".keras", ".h5", ".hdf5", ".weights.json"))


__all__ = ["COUNTERS", "H5", "KERAS", "KINDS", "PART_SUFFIX", "SHARDED", "TF_PREFIX", "WEIGHTS_H5", "Field",
           "Template", "is_series_file", "parse_template", "part_index", "sharded_base", "split_template"]
