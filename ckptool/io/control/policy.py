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
from ckptool.io.backends.local import LOCAL
from ckptool.io.base import Storage

POLICY_FILE = ".ckptool.toml"
POLICY_KEYS = frozenset({"max_to_keep", "keep_every_n_hours", "keep_steps_every", "min_age", "keep",
                         "keep_best", "metric", "mode", "metrics",  # these four: keep-best
                         "series"})  # a Keras ModelCheckpoint file series (ckptool.io.layout.series_names)


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
    from ckptool.io.layout.series_names import parse_template

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
     ".ckptool.toml from ROOT down and of --keep add up."),
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
     "template, as given to ModelCheckpoint (a CSVLogger .csv may be the metrics file)."),
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
        "# left alone. A flag on the command line beats a key here, and the nearest .ckptool.toml from",
        "# ROOT down that sets a key wins: delete a key to take it from a file above.",
    ]
    for key, default, example, text in TEMPLATE_KEYS:
        lines.append("")
        lines += ["# " + ln for ln in text.split("\n")]
        lines.append(f"{key} = {default}" if default is not None else f"# {key} = {example}")
    return "\n".join(lines) + "\n"


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
    # pins given (values["keep"], or "keep" explicit: the caller holds them) are the flag's
    sources = {k: (FLAG if k in explicit or (k == "keep" and values[k]) else DEFAULT) for k in values}
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


__all__ = ["DEFAULT", "FLAG", "POLICY_FILE", "POLICY_KEYS", "TEMPLATE_DEFAULTS", "TEMPLATE_KEYS", "Effective",
           "effective_policy", "parse_duration", "parse_policy", "policy_template", "read_policy", "resolve_policy"]
