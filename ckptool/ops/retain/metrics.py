"""Metric values by step, for ``prune --keep-best``: from TensorBoard event files or JSON Lines.

Event files are every ``events.out.tfevents.*`` below the run directory (any
subdirectory, such as ``eval/``; symlinked directories are not followed). A
scalar's *series name* is its tag, prefixed by the event file's directory
relative to the run directory: tag ``loss`` in ``DIR/eval/`` is ``eval/loss``,
tag ``eval/loss`` in ``DIR`` is ``eval/loss`` too. ``--metric TAG`` picks the
series named exactly TAG; else the one series whose name ends with ``/TAG``
(several is an error that lists them). Of two values at one step, the later
written (by the event's wall time, then file order) wins.

With ``metrics=PATH``, PATH is read instead: a JSON Lines file of
``{"step": N, "<metric>": value}`` objects (a later line wins); or a directory
of event files kept apart from the checkpoints (a TensorBoard log directory:
series named relative to it); or one event file (series named by tag).

A damaged event file (truncated, bad CRC, records that are no Event) is
reported with a warning and its damaged part skipped; a damaged line of a
metrics file too. A metric that no file has is a :class:`MissingError` that
lists the names found.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError
from ckptool.format.json_numbers import json_float
from ckptool.io.backends.local import LOCAL
from ckptool.io.backends.urls import storage_for
from ckptool.ops.retain.history import EVENT_GLOB, event_series, find_event_files, read_history
from ckptool.ops.retain.keep_best import BestSpec, choose_best

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.retain.retention import Entry, Policy



def select_series(series: dict[str, dict[int, float]], metric: str, where: str) -> tuple[str, dict[int, float]]:
    """The series ``metric`` names (see the module docstring); MissingError listing the names found."""
    if metric in series:
        return metric, series[metric]
    near = sorted(n for n in series if n.endswith("/" + metric))
    if len(near) == 1:
        return near[0], series[near[0]]
    if near:
        raise CkptError(f"{where}: metric {metric!r} is ambiguous: {', '.join(map(_shown, near))}; "
                        f"name one of them")
    names = sorted(series)
    shown = ", ".join(map(_shown, names[:20])) + (f" ... ({len(names)} in all)" if len(names) > 20 else "")
    raise MissingError(f"{where}: no metric {metric!r} found " +
                       (f"(found: {shown})" if names else "(no scalars found)"))


def _shown(name: str) -> str:
    """A series name as a message shows it: quoted and escaped when it holds a control
    character (tags come from files: a newline must not forge a line of output)."""
    return name if name.isprintable() else repr(name)


def metric_values(directory: str, metric: str, *, metrics: str | None = None,
                  storage: Storage = LOCAL) -> tuple[str, dict[int, float]]:
    """``(series name, {step: value})`` of ``metric`` for the run in ``directory``."""
    if metrics is not None:
        mstorage, mpath = storage_for(metrics)
        if mstorage.isdir(mpath):  # a TensorBoard log directory kept apart from the checkpoints
            directory, storage = mpath, mstorage
        else:  # one event file, JSON Lines by "step", a CSVLogger file by "epoch"
            return select_series(read_history(mpath, "step", mstorage), metric, metrics)
    files = find_event_files(directory, storage)
    if not files:
        logs = csv_beside(directory, storage)
        raise MissingError(f"{directory}: no metric {metric!r} found (no {EVENT_GLOB} files below it; "
                           + (f"a CSVLogger file is beside the run: --metrics {logs[0]}" if logs else
                              "give --metrics PATH for a JSON Lines file or a CSVLogger .csv") + ")")
    return select_series(event_series(directory, storage), metric, directory)


def csv_beside(directory: str, storage: Storage = LOCAL) -> list[str]:
    """The ``.csv`` files (Keras's CSVLogger writes one) in the run directory and the directory
    above it, for the hint of a metric not found."""
    out: list[str] = []
    parent = storage.dirname(directory.rstrip("/")) if directory not in ("", ".") else ".."
    for d in (directory or ".", parent or "."):
        try:
            out += sorted(storage.join(d, n) for n in storage.listdir(d) if n.lower().endswith(".csv"))
        except (CkptError, OSError):
            continue
    return out


@dataclass
class BestPins:
    """The checkpoints kept as best (base name -> value, best first) and how many had no value."""

    spec: BestSpec
    series: str
    pins: dict[str, float] = field(default_factory=dict)
    none_count: int = 0
    candidates: int = 0
    steps: dict[str, int] = field(default_factory=dict)  # base -> the step its value is of

    def to_json(self) -> dict[str, Any]:
        return {**self.spec.to_json(), "series": self.series, "candidates": self.candidates,
                "without_value": self.none_count,
                "best": [{"checkpoint": b, "step": self.steps.get(b), "value": json_float(v)}
                         for b, v in self.pins.items()]}


#: Where a checkpoint keeps its global step: TF1's ``global_step`` variable, or the
#: ``step`` / ``global_step`` attribute of a ``tf.train.Checkpoint`` (the TF2 idiom).
GLOBAL_STEP_NAMES = ("global_step", "global_step/.ATTRIBUTES/VARIABLE_VALUE", "step/.ATTRIBUTES/VARIABLE_VALUE")
_INT_DTYPES = ("int64", "int32", "uint64", "uint32", "int16", "uint16", "int8", "uint8")


def stored_step(prefix: str, storage: Storage = LOCAL) -> int | None:
    """The global step checkpoint ``prefix`` holds (an integer scalar of
    :data:`GLOBAL_STEP_NAMES`), or None (none, or the checkpoint cannot be read)."""
    from ckptool.ops.read.reader import open as open_checkpoint

    try:
        with open_checkpoint(prefix, storage) as ckpt:
            for name in GLOBAL_STEP_NAMES:
                if name in ckpt:
                    v = ckpt.variable(name)
                    if v.dtype in _INT_DTYPES and v.numel == 1:
                        return int(ckpt.read(name).reshape(()))
    except (CkptError, OSError, ValueError, OverflowError):
        return None
    return None


def kept_candidates(directory: str, storage: Storage = LOCAL) -> list[tuple[str, int | None]]:
    """The checkpoints of ``DIR/kept/`` as keep-best candidates: ``("kept/NAME", step)``."""
    from ckptool.io.layout.checkpoints import list_checkpoints, step_of
    from ckptool.io.layout.keptdir import KEPT_DIRNAME

    kept = storage.join(directory, KEPT_DIRNAME) if directory else KEPT_DIRNAME
    if not storage.isdir(kept):
        return []
    return [(f"{KEPT_DIRNAME}/{storage.basename(p)}", step_of(p)) for p in sorted(list_checkpoints(storage, kept))]


def best_pins(directory: str, candidates: Iterable[tuple[str, int | None]], spec: BestSpec,
              storage: Storage = LOCAL) -> BestPins:
    """The ``spec.n`` best of ``candidates`` ((base name, step or None) pairs, oldest first)
    by the metric at their step. A checkpoint's step is the global step it holds
    (:func:`stored_step`), else (or when the metric has no value there) the number in
    its name. ``spec.metrics`` relative paths are taken as they are (the caller
    resolves them)."""
    name, values = spec.found or metric_values(directory, spec.metric, metrics=spec.metrics, storage=storage)
    scored = []
    steps = {}
    none = 0
    for base, step in candidates:
        held = stored_step(storage.join(directory, base) if directory else base, storage)
        v = None
        for s in (held, step):
            if s is not None and values.get(s) is not None:
                v, steps[base] = values[s], s
                break
        if v is None:
            none += 1
        scored.append((base, v))
    chosen = choose_best(scored, spec.n, spec.mode)
    return BestPins(spec, name, dict(chosen), none, len(scored), {b: steps[b] for b, _ in chosen})


def pin_best(directory: str, managed: list[Entry], policy: Policy, spec: BestSpec | None,
             storage: Storage = LOCAL, with_kept: bool = False) -> tuple[Policy, BestPins | None]:
    """For prune: ``(policy with the spec.n best of managed pinned, BestPins)``, given the
    retention engine's entries (oldest first) and Policy; ``(policy, None)`` without a spec.
    ``with_kept``: the checkpoints of ``DIR/kept/`` compete too (as ``kept/NAME``), so that one
    of DIR is kept as best only when it beats those already kept."""
    import dataclasses

    if spec is None:
        return policy, None
    candidates = [(e.name, e.step) for e in managed]
    if with_kept:
        candidates = sorted(candidates + kept_candidates(directory, storage),
                            key=lambda c: -1 if c[1] is None else c[1])  # stable: oldest first by step
    bp = best_pins(directory, candidates, spec, storage)
    return dataclasses.replace(policy, pinned=policy.pinned | frozenset(bp.pins)), bp


__all__ = [
    "GLOBAL_STEP_NAMES",
    "BestPins",
    "best_pins",
    "csv_beside",
    "kept_candidates",
    "metric_values",
    "pin_best",
    "select_series",
    "stored_step",
]
