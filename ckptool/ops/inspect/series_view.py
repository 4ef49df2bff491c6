"""A Keras ``ModelCheckpoint`` series shown like a run: ``inspect DIR`` summarizes its latest
member and lists every member with its epoch, time, size and status (``latest``, ``kept``,
``in progress``, ``damaged``), as a run's state is listed (:mod:`ckptool.ops.inspect.summary`).
The series is DIR's ``.ckptool.toml`` ``series``, else the one its file names show
(:func:`ckptool.ops.read.series.find_series`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.json_numbers import json_float, json_timestamp
from ckptool.io.layout.series_listing import YOUNG, SeriesListing, classify
from ckptool.ops.inspect.verify import Problem, VerifyReport
from ckptool.ops.read.series import find_series

if TYPE_CHECKING:
    from ckptool.io.base import Storage

LATEST, KEPT, IN_PROGRESS, DAMAGED = "latest", "kept", "in progress", "damaged"


def _listing(storage: Storage, directory: str) -> SeriesListing | None:
    try:
        return find_series(storage, directory) if storage.isdir(directory) else None
    except CkptError:
        return None


def series_state(storage: Storage, directory: str, now: float | None = None,
                 listing: SeriesListing | None = None) -> dict[str, Any] | None:
    """DIR's series as ``inspect`` shows a run's state (None when DIR holds no series); the
    summary adds each entry's ``time``."""
    listing = listing or _listing(storage, directory)
    if listing is None or not listing.members:
        return None
    now = time.time() if now is None else now
    intact, busy, _ = classify(listing, now)
    latest = intact[-1].name if intact else None
    busy_names = {m.name for m in busy}
    entries = []
    for m in listing.members:
        status = LATEST if m.name == latest else KEPT if m in intact else IN_PROGRESS if m.name in busy_names \
            else DAMAGED
        path = storage.join(directory, m.name) if directory else m.name
        fields = {k: (json_float(v) if isinstance(v, float) else v) for k, v in m.values.items()}
        entries.append({"prefix": path, "path": m.name, "step": m.step(listing.template), "fields": fields,
                        "timestamp": json_timestamp(m.mtime),
                        "bytes": m.size, "files": [f.name for f in m.files], "status": status,
                        "latest": status == LATEST, "problem": m.problem})
    return {"path": listing.template.text, "template": listing.template.text, "kind": listing.template.kind,
            "latest": storage.join(directory, latest) if latest else None, "entries": entries}


def series_target(path: str) -> str | None:
    """The latest complete member of the series DIR holds, for ``inspect DIR`` (None: DIR is
    no series directory; CkptError: a series with no complete member)."""
    from ckptool.io.backends.urls import storage_for

    storage, directory = storage_for(path)
    listing = _listing(storage, directory.rstrip("/") or "/")
    if listing is None or not listing.members:
        return None
    intact, _, _ = classify(listing, time.time())
    if not intact:
        raise CkptError(f"{path}: a series {listing.template.text!r} with no complete member "
                        f"({len(listing.members)} being written or damaged)")
    return storage.join(directory, intact[-1].name)


def series_targets(storage: Storage, directory: str) -> list[str]:
    """``verify DIR`` of a series directory: its members, but a save in progress (not whole
    and younger than a minute: :func:`classify`)."""
    listing = _listing(storage, directory)
    if listing is None:
        return []
    _, busy, _ = classify(listing, time.time())
    skip = {m.name for m in busy if time.time() - m.mtime < YOUNG}
    return [storage.join(directory, m.name) for m in listing.members if m.name not in skip]


def member_report(path: str) -> VerifyReport | None:
    """``verify`` of a series member file by its own check (:mod:`ckptool.format.keras_files`):
    a report when it is not whole, or when it is a legacy ``.h5`` (whose tensors ckptool does
    not read: whole is all that is checked); None to verify it as any checkpoint."""
    import io

    from ckptool.format.keras_files import COMPLETE, h5_state, keras_state
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.readerfile import ReaderFile

    low = path.lower()
    if not low.endswith((".keras", ".h5", ".hdf5")):
        return None
    storage, local = storage_for(path)
    try:
        with ReaderFile.of(storage.open_reader(local)) as f:
            size = f.size
            state, why = keras_state(io.BufferedReader(f)) if low.endswith(".keras") else h5_state(f.read_at, size)
    except OSError as exc:
        return VerifyReport(path, problems=[Problem("", f"{path}: {exc.strerror or exc}")])
    if state != COMPLETE:
        return VerifyReport(path, problems=[Problem("", f"{path}: {state}: {why}")])
    if low.endswith(".weights.h5") or low.endswith(".keras"):
        return None
    return VerifyReport(path, 0, size)


__all__ = ["DAMAGED", "IN_PROGRESS", "KEPT", "LATEST", "member_report", "series_state", "series_target",
           "series_targets"]
