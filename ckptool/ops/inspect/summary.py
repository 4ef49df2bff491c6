"""What ``inspect`` shows by default: a checkpoint's summary and its directory's state."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.format.json_numbers import json_timestamp
from ckptool.format.meta_graph import tf_versions
from ckptool.io.control.state import read_state, resolve, state_path
from ckptool.io.layout.checkpoints import (
    checkpoint_exists,
    checkpoint_files,
    list_checkpoints,
    list_v1_checkpoints,
    meta_graph_filename,
    resolve_recorded,
    step_of,
)
from ckptool.io.layout.keptdir import KEPT_DIRNAME, kept_path

if TYPE_CHECKING:
    from ckptool.io.base import Storage


@dataclass
class CheckpointInfo:
    """One checkpoint of a directory's state, as ``inspect`` shows it."""

    prefix: str
    path: str  # as recorded in the state file ("" for checkpoints found on disk only)
    step: int | None
    timestamp: float | None  # from the state file, else the .index modification time
    bytes: int | None  # every file of the checkpoint; None when it is not on disk
    status: str  # "latest", "kept", "preserved", "untracked", "missing" or "in kept/" (DIR/kept/, part of the run)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "path": self.path, "step": self.step,
                "timestamp": json_timestamp(self.timestamp), "time": iso_time(self.timestamp), "bytes": self.bytes,
                "status": self.status, "latest": self.status == "latest"}


def iso_time(ts: float | None) -> str | None:
    """``ts`` (seconds since the epoch) as ISO 8601 UTC; None when there is none or when
    it names no representable time (NaN, infinities, 1e300, -1e18: a state file can hold any)."""
    if ts is None or not math.isfinite(ts):
        return None
    import datetime

    try:
        return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def directory_state(directory: str, storage: Storage) -> dict[str, Any] | None:
    """The ``checkpoint`` state of ``directory`` with every checkpoint there, or None.

    Each checkpoint named by the state file or found on disk gets a status:
    ``latest`` (model_checkpoint_path), ``kept`` (listed, managed by
    retention), ``preserved`` (on disk, no longer listed, at or before
    ``last_preserved_timestamp``, as ``keep_checkpoint_every_n_hours`` leaves
    them), ``untracked`` (on disk, not listed, newer than that: from another
    run or written with ``--no-state``), ``missing`` (listed, not on disk), ``in kept/``
    (in ``DIR/kept/``, where prune keeps what a running trainer must not delete: part of the run).
    """
    state = read_state(directory, storage)
    if state is None:
        return None
    on_disk = set(list_checkpoints(storage, directory)) | set(list_v1_checkpoints(storage, directory))

    def where(p: str) -> str:
        # a recorded absolute path of a moved directory: the same name inside it (the layout's rule)
        rec = resolve_recorded(storage, directory, p, warn=False)
        return storage.join(directory, rec.base) if rec.base else resolve(directory, p, storage)

    latest = where(state.model_checkpoint_path)
    listed = [where(p) for p in state.all_model_checkpoint_paths]
    if latest not in listed:
        listed.append(latest)
    stamps = dict(zip([where(p) for p in state.all_model_checkpoint_paths], state.all_model_checkpoint_timestamps))
    recorded = dict(zip(listed, list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path]))
    out = []
    order = lambda p: (step_of(p) is None, step_of(p) or 0, p not in listed, p)  # noqa: E731
    for prefix in sorted(on_disk | set(listed), key=order):
        present = prefix in on_disk or checkpoint_exists(storage, prefix)  # V2 index or V1 files
        size = None
        mtime = None
        if present:
            files = checkpoint_files(storage, prefix)
            size = sum(_size_or_zero(storage, f) for f in files)
            idx = prefix + bundle.INDEX_SUFFIX
            mtime = storage.mtime(idx) if storage.isfile(idx) else (storage.mtime(files[0]) if files else None)
        ts = stamps.get(prefix, mtime)
        if not present:
            status = "missing"
        elif prefix == latest:
            status = "latest"
        elif prefix in listed:
            status = "kept"
        elif state.last_preserved_timestamp and ts is not None and ts <= state.last_preserved_timestamp + 1e-3:
            status = "preserved"
        else:
            status = "untracked"
        out.append(CheckpointInfo(prefix, recorded.get(prefix, ""), step_of(prefix), ts, size, status))
    out += _kept_entries(directory, storage)
    return {
        "path": state_path(directory, storage),
        "model_checkpoint_path": state.model_checkpoint_path,
        "last_preserved_timestamp": json_timestamp(state.last_preserved_timestamp) or None,
        "entries": [c.to_json() for c in out],
    }


def _kept_entries(directory: str, storage: Storage) -> list[CheckpointInfo]:
    """The checkpoints of ``DIR/kept/`` (oldest first by step), status ``in kept/``."""
    kept = kept_path(storage, directory)
    if not storage.isdir(kept):
        return []
    out = []
    for prefix in sorted(list_checkpoints(storage, kept), key=lambda p: (step_of(p) is None, step_of(p) or 0, p)):
        idx = prefix + bundle.INDEX_SUFFIX
        size = sum(_size_or_zero(storage, f) for f in checkpoint_files(storage, prefix))
        out.append(CheckpointInfo(prefix, f"{KEPT_DIRNAME}/{storage.basename(prefix)}", step_of(prefix),
                                  storage.mtime(idx), size, "in kept/"))
    return out


def _size_or_zero(storage: Storage, path: str) -> int:
    """The size of a file of a listed checkpoint; 0 for one that went or is a dangling symlink
    (the state is shown beside every checkpoint inspected: it must not fail on a sibling)."""
    try:
        return storage.size(path)
    except (OSError, CkptError):
        return 0


def summary(ck: Any, path: str | None = None) -> dict[str, Any]:
    """What ``inspect`` prints by default, as a JSON-ready dict.

    ``path`` is the CHECKPOINT argument as given: the state of the directory it
    names, or else of the directory holding the checkpoint, is included when that
    directory has a ``checkpoint`` state file.
    """
    storage = ck.storage
    variables = ck.variables()
    by_dtype: dict[str, dict[str, Any]] = {}
    for v in variables:
        d = by_dtype.setdefault(v.dtype, {"variables": 0, "parameters": 0, "bytes": 0})
        d["variables"] += 1
        d["parameters"] += v.numel
        d["bytes"] += v.nbytes
    doc = {
        "prefix": ck.prefix,
        "format": ck.format,
        "object_based": ck.is_object_based,
        "variables": len(variables),
        "parameters": sum(v.numel for v in variables),
        "bytes": sum(v.nbytes for v in variables),
        "partitioned": sum(1 for v in variables if v.num_slices),
        "dtypes": dict(sorted(by_dtype.items(), key=lambda kv: (-kv[1]["bytes"], kv[0]))),
    }
    if ck.format == "V2":
        _warn_damage(storage, ck.prefix)
        h = ck.header
        doc["index"] = {"path": ck.index_path, "bytes": ck.index_size}
        doc["shards"] = [{"path": p, "bytes": storage.size(p) if storage.isfile(p) else None}
                         for p in ck.shard_paths()]
        doc["bundle"] = {"producer": h.producer, "min_consumer": h.min_consumer,
                         "endianness": "big" if h.big_endian else "little"}
    else:
        doc["files"] = [{"path": p, "bytes": storage.size(p)} for p in ck.files]
    if ck.format == "keras":  # a Keras 3 file (ops/read/keras.py): its saved objects, names and classes
        kmeta = ck.metadata if isinstance(ck.metadata, dict) else {}
        doc["keras"] = {"keras_version": kmeta.get("keras_version"),
                        "class_name": ck.config.get("class_name") if isinstance(ck.config, dict) else None,
                        "layers": [lay.to_json() for lay in ck.layers()]}
    ema = _averages(ck)  # which variables have an exponential moving average (convert --ema)
    if ema is not None:
        doc["ema"] = ema
    meta = meta_graph_filename(ck.prefix)
    doc["meta_graph"] = None
    if storage.isfile(meta):
        doc["meta_graph"] = {"path": meta, "bytes": storage.size(meta), **_meta_versions(storage, meta)}
    # the state of the directory given, else of the one holding the checkpoint (runs/ckpt-5: runs/)
    given = None if path is None else (path.rstrip("/") or "/")
    if given is not None and storage.isdir(given):
        doc["state"] = directory_state(given, storage)
        if doc["state"] is None:  # a Keras ModelCheckpoint series, listed like a run
            from ckptool.ops.inspect.series_view import series_state

            series = series_state(storage, given)
            if series is not None:
                doc["series"] = series
                for e in series["entries"]:
                    e["time"] = iso_time(e["timestamp"])
    else:  # a sibling's trouble (a state file that does not parse) must not fail this checkpoint's summary
        try:
            doc["state"] = directory_state(storage.dirname(ck.prefix), storage)
        except CkptError as exc:
            import warnings

            from ckptool.errors import CkptWarning

            warnings.warn(f"the directory's state is not shown: {exc}", CkptWarning, stacklevel=2)
            doc["state"] = None
    return doc


def _warn_damage(storage: Storage, prefix: str) -> None:
    """A data file missing or shorter than the index says (the cheap check, no CRC): one warning."""
    import warnings

    from ckptool.errors import CkptWarning
    from ckptool.ops.read.integrity import damage

    problem = damage(storage, prefix)
    if problem is not None:
        warnings.warn(f"{prefix}: damaged: {problem} (TF cannot restore it; 'ckptool verify' checks every byte)",
                      CkptWarning, stacklevel=3)


def _averages(ck: Any) -> dict[str, Any] | None:
    """:func:`ckptool.ops.read.ema.checkpoint_plan` as JSON (None: no averages); a layout that
    cannot be paired is shown with its error rather than failing the summary."""
    from ckptool.ops.read.ema import checkpoint_plan

    try:
        plan = checkpoint_plan(ck)
    except CkptError as exc:
        return {"kind": None, "averaged": 0, "without": [], "pairs": {}, "error": str(exc)}
    return plan.to_json() if plan is not None else None


#: A .meta file is read for its version strings only up to this size.
META_READ_LIMIT = 256 << 20


def _meta_versions(storage: Storage, path: str) -> dict[str, Any]:
    """tensorflow_version / tensorflow_git_version from a MetaGraphDef's MetaInfoDef (fields 1 -> 5, 6)."""
    out: dict[str, str | None] = {"tensorflow_version": None, "tensorflow_git_version": None}
    if storage.size(path) > META_READ_LIMIT:
        return out
    try:
        out.update(tf_versions(storage.read_bytes(path)))
    except CkptError:
        pass
    return out

