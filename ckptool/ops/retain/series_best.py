"""Keep the best of a Keras series (``prune --series T --keep-best N --metric M``): the metric
of each member from its own file name, or from a metrics file joined on the epoch.

- When ``M`` is a field of the template (``{val_loss:.2f}``) and no ``--metrics`` is given, each
  member's value is the one its name shows (rounded as Keras formatted it).
- Else from ``--metrics PATH`` (or the event files below DIR, as for TF runs; read by
  :mod:`ckptool.ops.retain.history`, the one reader of metric histories): Keras's
  ``CSVLogger`` file (``.csv``: an ``epoch`` column and one per metric), a JSON Lines history
  (``{"epoch": N, "val_loss": x}`` a line, as a ``LambdaCallback`` writes it), or TensorBoard
  event files (Keras's ``TensorBoard`` callback: step = epoch). Keras's callbacks count epochs
  from 0 while ``ModelCheckpoint`` names files ``epoch + 1``: the value logged at epoch ``e``
  is the file named ``{epoch}`` = ``e + 1``'s. A later row for an epoch wins (a resumed run).

A member with no value is no candidate; ties go to the newer (:func:`choose_best`).
"""

from __future__ import annotations

import fnmatch
import math
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.io.backends.urls import storage_for
from ckptool.ops.retain.history import EVENT_GLOB, pick, read_history
from ckptool.ops.retain.keep_best import BestSpec, choose_best
from ckptool.ops.retain.metrics import BestPins, metric_values

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.layout.series_listing import Member
    from ckptool.io.layout.series_names import Template

#: Keras callbacks log epoch ``e`` (0-based) for the file ModelCheckpoint names ``e + 1``.
EPOCH_OFFSET = 1


def epoch_values(directory: str, spec: BestSpec, storage: Storage) -> tuple[str, dict[int, float]]:
    """``(series name, {file-name epoch: value})`` from ``spec.metrics`` or the event files."""
    path = spec.metrics
    by_callback: dict[int, float] | None = None
    name = spec.metric
    if path is not None:  # a CSVLogger file or JSON Lines, by epoch (event files are by step: below)
        mstorage, mpath = storage_for(path)
        if not mstorage.isdir(mpath) and not fnmatch.fnmatchcase(mstorage.basename(mpath), EVENT_GLOB):
            by_callback = pick(read_history(mpath, "epoch", mstorage), spec.metric, path, "epoch")
    if by_callback is None:
        name, by_callback = metric_values(directory, spec.metric, metrics=path, storage=storage)
    return name, {e + EPOCH_OFFSET: v for e, v in by_callback.items()}


def series_best(directory: str, template: Template, members: list[Member], spec: BestSpec,
                storage: Storage) -> BestPins:
    """The ``spec.n`` best of ``members`` (intact, oldest first)."""
    from_names = spec.metric in template.fields and spec.metrics is None
    values: dict[int, float] = {}
    if from_names:
        series = "{" + spec.metric + "}"
    elif "epoch" not in template.fields:
        raise CkptError(f"--series {template.text!r} has no {{epoch}} to join --metrics on; keep-best takes its "
                        f"metric from a field of the file names ({', '.join(template.fields)})")
    else:
        series, values = epoch_values(directory, spec, storage)
    scored: list[tuple[str, float | None]] = []
    steps: dict[str, int] = {}
    for m in members:
        epoch = m.values.get("epoch")
        v = m.values.get(spec.metric) if from_names else values.get(epoch) if isinstance(epoch, int) else None
        if isinstance(epoch, int):
            steps[m.name] = epoch
        scored.append((m.name, float(v) if v is not None else None))
    chosen = choose_best(scored, spec.n, spec.mode)
    none = sum(1 for _, v in scored if v is None or math.isnan(v))
    return BestPins(spec, series, dict(chosen), none, len(scored), {b: steps[b] for b, _ in chosen if b in steps})


__all__ = ["EPOCH_OFFSET", "epoch_values", "series_best"]
