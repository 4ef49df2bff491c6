"""Metric histories, the one reader: ``{metric: {n: value}}`` from a JSON Lines file (a line
per ``{"step": N, ...}`` or ``{"epoch": N, ...}`` object), a Keras ``CSVLogger`` file (an
``epoch`` column and one per metric) or TensorBoard event files, joined by step or by epoch,
for TF runs (``prune --keep-best``) and Keras series alike.

Every file is read a chunk and a line at a time (:func:`lines`), and of a JSON line only its
top-level numbers are built (:func:`ckptool.format.jsonl.top_level_numbers`): memory is a small
multiple of the longest line, whatever the file holds. A value too large for a float (a
400-digit number) is no value; a line that is no object with an integer ``by`` is skipped,
with one warning that counts them. A later line for the same ``n`` wins (a resumed run).
"""

from __future__ import annotations

import csv
import fnmatch
import math
import re
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ckptool.errors import CkptError, CkptWarning, MissingError
from ckptool.format.events import RecordReader, iter_scalars
from ckptool.io.backends.local import LOCAL
from ckptool.io.backends.urls import storage_for

if TYPE_CHECKING:
    from ckptool.io.base import Reader, Storage

EVENT_GLOB = "events.out.tfevents.*"
LINE_CHUNK = 1 << 20
_BLANK = re.compile(rb"[ \t\n\r\x0b\x0c]*")
History = dict[str, dict[int, float]]


def lines(reader: Reader, chunk: int = LINE_CHUNK) -> Iterator[str | None]:
    """The lines of a file (split at ``\\n``), decoded: ``""`` for a blank one, None for one
    that is not UTF-8. One line and one chunk are in memory at a time."""
    pending = bytearray()
    pos, size = 0, reader.size

    def done() -> str | None:
        text = None if _BLANK.fullmatch(pending) is None else ""
        if text is None:
            try:
                text = pending.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        pending.clear()
        return text

    while pos < size:
        raw = reader.read(pos, min(chunk, size - pos))
        if not len(raw):
            break
        pos += len(raw)
        view = memoryview(raw).cast("B")
        start = 0
        while True:
            i = raw.find(b"\n", start)
            if i < 0:
                pending += view[start:]
                break
            pending += view[start:i]
            yield done()
            start = i + 1
    if pending:
        yield done()


def _value(v: object) -> float | None:
    """A metric value as a float: None for no number, NaN, or one no float can hold."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)  # type: ignore[arg-type]
    except (OverflowError, TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _index(v: object) -> int | None:
    """The step or epoch of a line: a whole number (``3`` or ``3.0``), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return None


def jsonl_history(path: str, storage: Storage, by: str = "step") -> History:
    """``{metric: {n: value}}`` of a JSON Lines file, ``n`` each line's ``by`` key."""
    from ckptool.format.jsonl import top_level_numbers

    out: History = {}
    bad = []
    reader = storage.open_reader(path)
    try:
        for lineno, line in enumerate(lines(reader), 1):
            if line == "":
                continue
            doc = top_level_numbers(line) if line is not None else None
            n = _index(doc.get(by)) if doc is not None else None
            if doc is None or n is None:
                bad.append(lineno)
                continue
            for key, raw in doc.items():
                v = _value(raw) if key != by else None
                if v is not None:
                    out.setdefault(key, {})[n] = v
    finally:
        reader.close()
    if bad:
        warnings.warn(f"{path}: {len(bad)} line(s) that are not a JSON object with an integer \"{by}\" skipped "
                      f"(first: line {bad[0]})", CkptWarning, stacklevel=3)
    return out


def csv_history(path: str, storage: Storage, by: str = "epoch") -> History:
    """``{metric: {n: value}}`` of a CSVLogger file (its ``by`` column as written)."""
    reader = storage.open_reader(path)
    try:
        def text() -> Iterator[str]:
            for i, line in enumerate(lines(reader)):
                if line is None:
                    raise CkptError(f"{path}: not UTF-8 text (a CSVLogger file?)")
                yield line.lstrip("\ufeff") if i == 0 else line

        rows = csv.reader(text())
        head = next(rows, None)
        if not head or by not in head:
            raise CkptError(f"{path}: no {by!r} column (a Keras CSVLogger file has one)")
        at = head.index(by)
        out: History = {name: {} for name in head if name != by}
        for row in rows:
            n = _index(_value(row[at])) if len(row) > at else None
            if n is None:
                continue
            for name, cell in zip(head, row):
                v = _value(cell) if name != by else None
                if v is not None:
                    out[name][n] = v
        return out
    except csv.Error as exc:
        raise CkptError(f"{path}: not a CSV file ({exc})") from None
    finally:
        reader.close()


def _warn(msg: str) -> None:
    warnings.warn(msg, CkptWarning, stacklevel=3)


def find_event_files(directory: str, storage: Storage = LOCAL) -> list[str]:
    """Every event file below ``directory``, sorted by path."""
    return storage.find(directory, EVENT_GLOB)


def _rel_dir(directory: str, path: str, storage: Storage) -> str:
    rel = storage.relpath(storage.dirname(path), directory).replace(storage.sep, "/")
    return "" if rel in (".", "") else rel


def event_series(directory: str, storage: Storage = LOCAL, files: Iterable[str] | None = None
                 ) -> dict[str, dict[int, float]]:
    """Series name -> {step: value} of every scalar in the event files below ``directory``
    (or in ``files``; a file directly given names its series by tag alone).

    Each file is read in chunks and each scalar folded into the series as it is read:
    memory is the series plus a small multiple of the largest record (event files with
    images grow large; one record may hold a million values)."""
    best: dict[str, dict[int, tuple[tuple[float, int, int], float]]] = {}
    for order, path in enumerate(find_event_files(directory, storage) if files is None else files):
        rel = _rel_dir(directory, path, storage) if files is None else ""
        problems: list[str] = []
        try:
            reader = storage.open_reader(path)
            try:
                for i, s in enumerate(iter_scalars(RecordReader(reader.read, reader.size, path), problems)):
                    name = f"{rel}/{s.tag}" if rel else s.tag
                    series = best.setdefault(name, {})
                    key = (s.wall_time, order, i)
                    if s.step not in series or series[s.step][0] <= key:
                        series[s.step] = (key, s.value)
            finally:
                reader.close()
        except (CkptError, OSError) as exc:
            _warn(f"{path}: cannot read ({exc}); skipped")
            continue
        for p in problems:
            _warn(p)
    return {name: {step: v for step, (_, v) in s.items()} for name, s in best.items()}


def read_history(path: str, by: str = "step", storage: Storage | None = None) -> History:
    """The history in ``path`` (a ``.csv``, a TensorBoard log directory, an event file or JSON
    Lines), by step (event files always are) or by ``by``."""
    if storage is None:
        storage, path = storage_for(path)
    if storage.isdir(path):
        return event_series(path, storage)
    if fnmatch.fnmatchcase(storage.basename(path), EVENT_GLOB):
        return event_series(path, storage, files=[path])
    if path.lower().endswith(".csv"):
        return csv_history(path, storage, "epoch" if by == "step" else by)
    return jsonl_history(path, storage, by)


def pick(history: History, metric: str, where: str, by: str) -> dict[int, float]:
    """``metric``'s series of a file's history; MissingError naming what the file has."""
    found = history.get(metric)
    if found:
        return found
    shown = ", ".join(sorted(history)[:20])
    raise MissingError(f"{where}: no {metric!r} at any \"{by}\" (found: {shown or 'none'})")


__all__ = ["EVENT_GLOB", "LINE_CHUNK", "History", "csv_history", "event_series", "find_event_files", "jsonl_history",
           "lines", "pick", "read_history"]
