"""The policy file ``.ckptool.toml``: retention keys a directory (or a tree) carries,
read by every command that prunes it (``prune``, ``prune --recursive``, ``du``, ``save``).

A file that does not parse, or has an unknown key or a bad value, is a CorruptError:
the command stops before deleting anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.io.storage import LOCAL, Storage

POLICY_FILE = ".ckptool.toml"
POLICY_KEYS = frozenset({"max_to_keep", "keep_every_n_hours", "keep_steps_every", "min_age", "keep",
                         "keep_best", "metric", "mode", "metrics",  # these four: keep-best
                         "series"})  # a Keras ModelCheckpoint file series (ckptool.io.series_names)


def _toml() -> ModuleType | None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            return None
    return tomllib


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d`` (or plain seconds) -> seconds; ValueError otherwise."""
    t = text.strip().lower()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    mult = 1
    if t and t[-1] in units:
        mult = units[t[-1]]
        t = t[:-1]
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 12h, 7d)") from None
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 30m, 12h, 7d)")
    return value * mult


def parse_policy(raw: bytes, path: str) -> dict[str, Any]:
    """The keys of one policy file, checked."""
    tomllib = _toml()
    if tomllib is None:
        raise UnsupportedError(f"{path}: reading .ckptool.toml on Python < 3.11 needs the 'tomli' package")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise CorruptError(f"{path}: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays/tables recursively
        raise CorruptError(f"{path}: nested too deeply to be a policy file") from None
    bad = sorted(set(doc) - POLICY_KEYS)
    if bad:
        raise CorruptError(f"{path}: unknown key {bad[0]!r} (known: {', '.join(sorted(POLICY_KEYS))})")
    out = {}
    for key, value in doc.items():
        ok = True
        if key in ("max_to_keep", "keep_steps_every"):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= (0 if key == "max_to_keep" else 1)
        elif key == "keep_every_n_hours":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
        elif key == "min_age":
            if isinstance(value, str):
                try:
                    value = parse_duration(value)
                except ValueError:
                    ok = False
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")
        elif key == "keep":
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        elif key == "keep_best":
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        elif key == "mode":
            ok = value in ("min", "max")
        elif key in ("metric", "metrics"):
            ok = isinstance(value, str) and bool(value) and "\0" not in value
        elif key == "series":
            ok = _series_ok(value)
        if not ok:
            raise CorruptError(f"{path}: bad value for {key}: {value!r}")
        out[key] = value
    return out


def _series_ok(value: object) -> bool:
    """A file-name template Keras's ModelCheckpoint could use (no directory part: the series is
    the directory's own)."""
    from ckptool.errors import CkptError
    from ckptool.io.series_names import parse_template

    try:
        return isinstance(value, str) and not parse_template(value).directory
    except CkptError:
        return False


def read_policy(directory: str, storage: Storage = LOCAL) -> dict[str, Any] | None:
    """DIR's own ``.ckptool.toml``, or None when it has none."""
    path = storage.join(directory, POLICY_FILE) if directory else POLICY_FILE
    if not storage.isfile(path):
        if storage.exists(path):
            raise CorruptError(f"{path}: not a regular file")
        return None
    return parse_policy(storage.read_bytes(path), path)


#: Where a setting came from (``Effective.sources``): a flag, the default, or a policy file's path.
FLAG, DEFAULT = "flag", "default"


@dataclass
class Effective:
    """The policy of a run directory: ``policy`` (the keys, ``keep`` the pins of all sources),
    ``files`` the policy files read (ROOT down), ``sources`` each key's origin (:data:`FLAG`,
    :data:`DEFAULT` or a file's path)."""

    policy: dict[str, Any]
    files: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def resolve_policy(root: str, directory: str, values: dict[str, Any], storage: Storage = LOCAL,
                   explicit: Iterable[str] = ()) -> Effective:
    """The one precedence rule, as git and restic have it: a setting given explicitly (a key of
    ``explicit``: the flag was on the command line) beats every ``.ckptool.toml``; otherwise
    the nearest ``.ckptool.toml`` from ROOT down to the directory that sets it; otherwise the
    value in ``values`` (the default). The ``keep`` pins of every source add up."""
    explicit = set(explicit)
    policy = dict(values)
    sources = {k: (FLAG if k in explicit else DEFAULT) for k in values}
    pins = list(values.get("keep") or ())
    rel = storage.relpath(directory, root)
    parts = [] if rel in (".", "") else rel.replace(os.sep, "/").split("/")
    chain = [root] + [storage.join(root, *parts[: i + 1]) for i in range(len(parts))]
    used = []
    for d in chain:
        doc = read_policy(d, storage)
        if doc is not None:
            path = storage.join(d, POLICY_FILE) if d else POLICY_FILE
            new_pins = [p for p in doc.pop("keep", []) if p not in pins]
            if new_pins:
                pins += new_pins
                sources["keep"] = path if sources.get("keep", DEFAULT) == DEFAULT else sources["keep"] + ", " + path
            for k, v in doc.items():
                if k not in explicit:
                    policy[k] = v
                    sources[k] = path
            used.append(path)
    policy["keep"] = pins
    return Effective(policy, used, sources)


def effective_policy(root: str, directory: str, defaults: dict[str, Any], storage: Storage = LOCAL,
                     explicit: Iterable[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """:func:`resolve_policy`'s policy and the files it read."""
    r = resolve_policy(root, directory, defaults, storage, explicit)
    return r.policy, r.files


__all__ = ["DEFAULT", "FLAG", "POLICY_FILE", "POLICY_KEYS", "Effective", "effective_policy", "resolve_policy",
           "parse_duration", "parse_policy", "read_policy"]
