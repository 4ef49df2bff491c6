"""The policy file ``.ckptool.toml``: retention keys a directory (or a tree) carries,
read by every command that prunes it (``prune``, ``prune --recursive``, ``du``, ``save``).

A file that does not parse, or has an unknown key or a bad value, is a CorruptError:
the command stops before deleting anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.io.backends.local import LOCAL
from ckptool.io.base import Storage

POLICY_FILE = ".ckptool.toml"
POLICY_KEYS = frozenset({"max_to_keep", "keep_every_n_hours", "keep_steps_every", "min_age", "keep",
                         "keep_best", "metric", "mode", "metrics",  # these four: keep-best
                         "series",  # a Keras ModelCheckpoint file series (ckptool.io.layout.series_names)
                         "root"})  # true: no .ckptool.toml above this one is read (as .editorconfig's)


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
    """The keys of one policy file, checked: a bad value is one CorruptError saying what the key
    takes (``max_to_keep: '2' is a string; give an integer``)."""
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
        problem, value = check_value(key, value)
        if problem:
            raise CorruptError(f"{path}: {key}: {problem}")
        out[key] = value
    return out


def _kind(value: object) -> str:
    """What a TOML value is, in words."""
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
             (list, "a list"), (dict, "a table"))
    return next((k for t, k in kinds if isinstance(value, t)), "a date")


def _number(value: object, want: str, ok: Callable[[float], bool], ints: bool = True) -> str:
    """'' when ``value`` is a number of the kind (``ints``: an integer) that ``ok`` accepts."""
    if isinstance(value, bool) or not isinstance(value, (int, float) if not ints else int):
        return f"{value!r} is {_kind(value)}; give {want}"
    return "" if ok(value) else f"{value!r} is out of range; give {want}"


def check_value(key: str, value: Any) -> tuple[str, Any]:
    """``(problem, value)``: what is wrong with ``value`` for ``key`` ('' for nothing), and the
    value as the policy holds it (a ``min_age`` duration in seconds)."""
    inf = float("inf")
    if key == "max_to_keep":
        return _number(value, "an integer (0 or more)", lambda v: v >= 0), value
    if key in ("keep_steps_every", "keep_best"):
        low = 1 if key == "keep_steps_every" else 0
        return _number(value, f"an integer ({low} or more)", lambda v: v >= low), value
    if key == "keep_every_n_hours":
        return _number(value, "a number of hours above 0", lambda v: 0 < v < inf, ints=False), value
    if key == "min_age":
        want = 'a duration ("90s", "30m", "12h", "7d") or seconds'
        if isinstance(value, str):
            try:
                return "", parse_duration(value)
            except ValueError:
                return f"{value!r} is not a duration; give {want}", value
        return _number(value, want, lambda v: 0 <= v < inf, ints=False), value
    if key == "keep":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return ("" if ok else f"give a list of names, as [\"ckpt-1000\"] (not {value!r})"), value
    if key == "mode":
        return ("" if value in ("min", "max") else f"min or max (not {value!r})"), value
    if key == "root":
        return ("" if isinstance(value, bool) else f"{value!r} is {_kind(value)}; give true or false"), value
    if key in ("metric", "metrics"):
        ok = isinstance(value, str) and bool(value) and "\0" not in value
        what = "a metric's name (an event file's tag or a JSON Lines key)" if key == "metric" else "a file's path"
        return ("" if ok else f"{value!r} is not {what}; give {what}"), value
    if key == "series":
        return _series_problem(value), value
    return "", value


def _series_problem(value: object) -> str:
    """What keeps ``value`` from being a filepath template Keras's ModelCheckpoint could use
    ('' for nothing); a directory part is checked by :func:`resolve_policy` against the run's."""
    from ckptool.errors import CkptError
    from ckptool.io.layout.series_names import parse_template

    if not isinstance(value, str):
        return f"{value!r} is {_kind(value)}; give a ModelCheckpoint filepath, as \"model-{{epoch:02d}}.keras\""
    try:
        parse_template(value)
    except CkptError as exc:
        text = str(exc)
        for head in (f"--series {value!r}: ", "--series: "):
            if text.startswith(head):
                return (f"{value!r}: " if head != "--series: " else "") + text[len(head):]
        return text
    return ""


def read_policy(directory: str, storage: Storage = LOCAL) -> dict[str, Any] | None:
    """DIR's own ``.ckptool.toml``, or None when it has none."""
    path = storage.join(directory, POLICY_FILE) if directory else POLICY_FILE
    if not storage.isfile(path):
        if storage.exists(path):
            raise CorruptError(f"{path}: not a regular file")
        return None
    return parse_policy(storage.read_bytes(path), path)


#: The keys of the template ``prune --print-config`` writes, in order: (key, its default as TOML or
#: None when it has none, an example value as TOML, what it does). Every key of POLICY_KEYS is here;
#: the template, read back by :func:`parse_policy`, is :data:`TEMPLATE_DEFAULTS`.
TEMPLATE_KEYS: tuple[tuple[str, str | None, str, str], ...] = (
    ("max_to_keep", "5", "5",
     "Keep the K newest checkpoints of the state file (0 keeps all), as\n"
     "CheckpointManager(max_to_keep=K) / Saver(max_to_keep=K)."),
    ("keep_every_n_hours", None, "6",
     "Of those rotated out, preserve one every H hours (kept on disk, dropped from the\n"
     "state file), as keep_checkpoint_every_n_hours. Default: none."),
    ("keep_steps_every", None, "10000",
     "Also keep every checkpoint whose step is a multiple of N. Default: none."),
    ("min_age", None, '"12h"',
     'Never delete a checkpoint younger than this ("90s", "30m", "12h", "7d", or seconds):\n'
     "an evaluator may be reading it. Default: none."),
    ("keep", "[]", '["ckpt-1000"]',
     "Never delete these checkpoints (their names in the run directory). The pins of every\n"
     ".ckptool.toml at or above the run and of --keep add up."),
    ("keep_best", "0", "3",
     "Also keep the N checkpoints that score best by `metric` at their step (0: off)."),
    ("metric", None, '"eval/loss"',
     "The scalar keep_best ranks by: an event file's tag, prefixed by its subdirectory\n"
     "below the run (tag loss in RUN/eval/ is eval/loss)."),
    ("mode", '"min"', '"max"', "min: the lowest value is best; max: the highest."),
    ("metrics", None, '"metrics.jsonl"',
     'Read the metric from this file instead (JSON Lines of {"step": N, "TAG": value}, a\n'
     "TensorBoard log directory or one event file), relative to each run directory."),
    ("series", None, '"model-{epoch:02d}-{val_loss:.2f}.keras"',
     "Prune a Keras ModelCheckpoint file series instead of TF checkpoints: its filepath\n"
     "template, as given to ModelCheckpoint (a CSVLogger .csv may be the metrics file). A\n"
     'directory part ("ckpts/epoch{epoch:02d}.weights.h5") is relative to this file and must\n'
     "name the run's directory; keep_best takes the template's one metric field by default."),
    ("root", None, "true",
     "true: no .ckptool.toml above this one is read (as in .editorconfig). Default: every\n"
     ".ckptool.toml up to the file system's root is read."),
)
#: What the template says, parsed: the defaults that TOML can spell.
TEMPLATE_DEFAULTS: dict[str, Any] = {"max_to_keep": 5, "keep": [], "keep_best": 0, "mode": "min"}


def policy_template() -> str:
    """A commented ``.ckptool.toml`` holding every key prune reads, each at its default (a key
    without one commented out, with an example), for ``prune --print-config``."""
    lines = [
        "# .ckptool.toml: the retention policy of the checkpoint directories at and below this one,",
        "# read by `ckptool prune DIR`, `prune ROOT --recursive`, `du` and `save` (man ckptool-prune).",
        "# With this file at or above a run, `prune ROOT --recursive` prunes it; a run with none is",
        "# left alone. `prune RUN` reads the same files. A flag on the command line beats a key here,",
        "# and the nearest .ckptool.toml at or above the run that sets a key wins (up to the file",
        "# system's root, or a file saying root = true): delete a key to take it from a file above.",
    ]
    for key, default, example, text in TEMPLATE_KEYS:
        lines.append("")
        lines += ["# " + ln for ln in text.split("\n")]
        lines.append(f"{key} = {default}" if default is not None else f"# {key} = {example}")
    return "\n".join(lines) + "\n"


#: The keep-best settings when nothing sets them (keep_best 0: off).
BEST_DEFAULTS: dict[str, Any] = {"keep_best": 0, "metric": None, "mode": "min"}
#: Where a setting came from (``Effective.sources``): a flag, the default, or a policy file's path.
FLAG, DEFAULT = "flag", "default"


@dataclass
class Effective:
    """The policy of a run directory: ``policy`` (the keys, ``keep`` the pins of all sources),
    ``files`` the policy files read (top down), ``sources`` each key's origin (:data:`FLAG`,
    :data:`DEFAULT` or a file's path)."""

    policy: dict[str, Any]
    files: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


def above(storage: Storage, directory: str) -> Iterator[str]:
    """The directories above ``directory``, nearest first, up to the file system's root (a
    bucket's, on an object store); a relative path goes on above the working directory."""
    p = directory
    for _ in range(4096):
        parent = storage.dirname(p.rstrip("/") or p)
        if not parent or parent == p:
            if storage.isabs(p):
                return
            p = storage.realpath(p or ".")
            parent = storage.dirname(p)
        if not parent or parent == p or parent.endswith("://"):
            return
        yield parent
        p = parent


def _series_here(storage: Storage, value: str, base: str, directory: str, path: str) -> str:
    """A policy file's ``series`` for the run ``directory``: a directory part (relative to
    ``base``, the policy file's directory) must name the run; the file-name part is the series."""
    from ckptool.io.layout.series_names import split_template

    part, name = split_template(value)
    if not part:
        return value
    named = storage.join(base, part) if base else part
    if storage.isdir(named) and storage.same_file(named, directory or "."):
        return name
    raise CorruptError(f"{path}: series: {value!r} names the files of {named} (its directory part is relative to "
                       f"the .ckptool.toml), not of {directory or '.'}: prune {named}, or give the file name alone")


def _chain(storage: Storage, root: str, directory: str, series: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """The policy files that apply to ``directory`` below ``root``, top down, each with its
    keys: those from ``directory`` up to the file system's root, stopping at one that says
    ``root = true`` (as .editorconfig). A run's ``kept/`` reads only its own."""
    from ckptool.io.layout.keptdir import is_kept_dir

    rel = storage.relpath(directory, root)
    parts = [] if rel in (".", "") else rel.replace(os.sep, "/").split("/")
    down = [root] + [storage.join(root, *parts[: i + 1]) for i in range(len(parts))]
    dirs = iter([directory] if is_kept_dir(storage, directory) else [*reversed(down), *above(storage, root)])
    found = []
    for d in dirs:
        doc = read_policy(d, storage)
        if doc is None:
            continue
        path = storage.join(d, POLICY_FILE) if d else POLICY_FILE
        if series and doc.get("series"):
            doc["series"] = _series_here(storage, doc["series"], d, directory, path)
        found.append((path, doc))
        if doc.pop("root", False):
            break
    return found[::-1]


def resolve_policy(root: str, directory: str, values: dict[str, Any], storage: Storage = LOCAL,
                   explicit: Iterable[str] = ()) -> Effective:
    """The one precedence rule, as git and restic have it: a setting given explicitly (a key of
    ``explicit``: the flag was on the command line) beats every ``.ckptool.toml``; otherwise
    the nearest ``.ckptool.toml`` at or above the directory that sets it (up to the file system's
    root or a file saying ``root = true``: a single run reads what ``--recursive`` from any
    ROOT above it reads); otherwise the value in ``values`` (the default). The ``keep`` pins of
    every source add up."""
    explicit = set(explicit)
    policy = dict(values)
    # pins given (values["keep"], or "keep" explicit: the caller holds them) are the flag's
    sources = {k: (FLAG if k in explicit or (k == "keep" and values[k]) else DEFAULT) for k in values}
    for key, default in BEST_DEFAULTS.items():
        policy.setdefault(key, default)
        sources.setdefault(key, DEFAULT)
    pins = list(values.get("keep") or ())
    used = []
    for path, doc in _chain(storage, root, directory, "series" not in explicit):
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


__all__ = ["BEST_DEFAULTS", "DEFAULT", "FLAG", "POLICY_FILE", "POLICY_KEYS", "TEMPLATE_DEFAULTS", "TEMPLATE_KEYS",
           "Effective", "above", "check_value", "effective_policy", "parse_duration", "parse_policy", "policy_template",
           "read_policy", "resolve_policy"]
