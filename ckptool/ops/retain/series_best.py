"""Keep the best of a Keras series (``prune --series T --keep-best N --metric M``): the metric
of each member from its own file name, or from a metrics file joined on the epoch.

- When ``M`` is a field of the template (``{val_loss:.2f}``) and no ``--metrics`` is given, each
  member's value is the one its name shows (rounded as Keras formatted it).
- Else from ``--metrics PATH`` (or the event files below DIR, as for TF runs): Keras's
  ``CSVLogger`` file (``.csv``: an ``epoch`` column and one per metric), a JSON Lines history
  (``{"epoch": N, "val_loss": x}`` a line, as a ``LambdaCallback`` writes it), or TensorBoard
  event files (Keras's ``TensorBoard`` callback: step = epoch). Keras's callbacks count epochs
  from 0 while ``ModelCheckpoint`` names files ``epoch + 1``: the value logged at epoch ``e``
  is the file named ``{epoch}`` = ``e + 1``'s. A later row for an epoch wins (a resumed run).

A member with no value is no candidate; ties go to the newer (:func:`choose_best`).
"""

from __future__ import annotations

import csv
import fnmatch
import io
import math
from typing import TYPE_CHECKING

from ckptool.errors import CkptError, MissingError
from ckptool.format.jsonl import top_level_numbers
from ckptool.io.backends.urls import storage_for
from ckptool.ops.retain.keep_best import BestSpec, choose_best
from ckptool.ops.retain.metrics import EVENT_GLOB, BestPins, metric_values

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.layout.series_listing import Member
    from ckptool.io.layout.series_names import Template

#: Keras callbacks log epoch ``e`` (0-based) for the file ModelCheckpoint names ``e + 1``.
EPOCH_OFFSET = 1


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def csv_series(raw: bytes, metric: str, where: str) -> dict[int, float]:
    """``{epoch: value}`` of ``metric`` in a CSVLogger file (its ``epoch`` column as written)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CkptError(f"{where}: not UTF-8 text (a CSVLogger file?)") from None
    rows = csv.reader(io.StringIO(text, newline=""))
    head = next(rows, None)
    if not head or "epoch" not in head:
        raise CkptError(f"{where}: no 'epoch' column (a Keras CSVLogger file has one)")
    if metric not in head:
        cols = ", ".join(c for c in head if c != "epoch")
        raise MissingError(f"{where}: no column {metric!r} (found: {cols or 'none'})")
    ie, im = head.index("epoch"), head.index(metric)
    out: dict[int, float] = {}
    for row in rows:
        if len(row) <= max(ie, im):
            continue
        e = _number(row[ie])
        v = _number(row[im])
        if e is not None and e.is_integer() and v is not None:
            out[int(e)] = v
    return out


def jsonl_epochs(raw: bytes, metric: str, where: str) -> dict[int, float]:
    """``{epoch: value}`` of ``metric`` in a JSON Lines history of ``{"epoch": N, ...}`` lines."""
    out: dict[int, float] = {}
    names: set[str] = set()
    for line in raw.split(b"\n"):
        try:
            doc = top_level_numbers(line.decode("utf-8")) if line.strip() else None
        except UnicodeDecodeError:
            doc = None
        if not doc:
            continue
        names.update(k for k in doc if k != "epoch")
        e, v = doc.get("epoch"), doc.get(metric)
        if isinstance(e, (int, float)) and float(e).is_integer() and isinstance(v, (int, float)) \
                and not math.isnan(float(v)):
            out[int(e)] = float(v)
    if not out:
        shown = ", ".join(sorted(names)[:20])
        raise MissingError(f"{where}: no {metric!r} at any \"epoch\" (found: {shown or 'no such lines'})")
    return out


def epoch_values(directory: str, spec: BestSpec, storage: Storage) -> tuple[str, dict[int, float]]:
    """``(series name, {file-name epoch: value})`` from ``spec.metrics`` or the event files."""
    path = spec.metrics
    by_callback: dict[int, float] | None = None
    name = spec.metric
    if path is not None:
        mstorage, mpath = storage_for(path)
        if mpath.lower().endswith(".csv"):
            by_callback = csv_series(mstorage.read_bytes(mpath), spec.metric, path)
        elif not mstorage.isdir(mpath) and not fnmatch.fnmatchcase(mstorage.basename(mpath), EVENT_GLOB):
            by_callback = jsonl_epochs(mstorage.read_bytes(mpath), spec.metric, path)
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


__all__ = ["EPOCH_OFFSET", "csv_series", "epoch_values", "jsonl_epochs", "series_best"]
