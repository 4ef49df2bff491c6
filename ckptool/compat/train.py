"""``tf.train``'s checkpoint functions as TensorFlow 2.21 answers them
(``tensorflow/python/training/checkpoint_utils.py`` and ``checkpoint_management.py``)."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from typing import Any

from ckptool.compat import errors
from ckptool.compat.reader import CheckpointReader, as_path, matching_files
from ckptool.errors import CkptError, CorruptError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.format.protos.tensor_bundle_pb2 import CheckpointState
from ckptool.io.state import STATE_FILENAME
from ckptool.io.state import CheckpointState as _State
from ckptool.io.urls import storage_for

log = logging.getLogger("ckptool.compat.tf")


def _fspath(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def NewCheckpointReader(filepattern: Any) -> CheckpointReader:  # noqa: N802  (TF's name)
    """A :class:`~ckptool.compat.reader.CheckpointReader` for a prefix or V1 file pattern
    (a directory is an error here, as in TF)."""
    return CheckpointReader(filepattern)


def _checkpoint_filename(ckpt_dir_or_file: Any) -> Any:
    """What TF opens for a checkpoint argument: a directory's latest checkpoint (``ValueError``
    when there is none), else the argument itself."""
    path = _fspath(ckpt_dir_or_file)
    if isinstance(path, (str, bytes)):
        text = as_path(path)
        storage, local = storage_for(text)
        if storage.isdir(local):
            latest = latest_checkpoint(text)
            if latest is None:
                raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {text}")
            return latest
    return path


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """The reader of a checkpoint prefix, or of the latest checkpoint a directory's
    ``checkpoint`` state file names (``ValueError`` when there is none)."""
    return CheckpointReader(_checkpoint_filename(ckpt_dir_or_file))


#: Readers of the last few V2 bundles read through list_variables/load_variable, by prefix: a
#: script calling load_variable once per name (as transformers does) parses the index once, not
#: once per call. A reader is reused while its index has the size and mtime it was opened with,
#: and, when that mtime is under RACY_SECONDS old (file times are coarser than writes: "racy
#: git"), the same bytes.
_SHARED: OrderedDict[str, tuple[int, float, bytes, CheckpointReader]] = OrderedDict()
_SHARED_MAX = 4
_SHARED_LOCK = threading.Lock()
RACY_SECONDS = 2.0


def _shared_reader(ckpt_dir_or_file: Any) -> CheckpointReader:
    filename = _checkpoint_filename(ckpt_dir_or_file)
    if not isinstance(filename, (str, bytes)):
        return CheckpointReader(filename)  # TF's TypeError
    text = as_path(filename)
    try:
        storage, local = storage_for(text)
        index = local + INDEX_SUFFIX
        if not storage.isfile(index):
            return CheckpointReader(text)  # V1, a pattern, or nothing: the reader says which
        size, mtime = storage.size(index), storage.mtime(index)
        with _SHARED_LOCK:
            hit = _SHARED.get(text)
        if hit is not None and hit[:2] == (size, mtime) and (
                time.time() - mtime > RACY_SECONDS or storage.read_bytes(index) == hit[2]):
            with _SHARED_LOCK:
                if text in _SHARED:
                    _SHARED.move_to_end(text)
            return hit[3]
        raw = storage.read_bytes(index)
    except (OSError, CkptError):
        return CheckpointReader(text)
    reader = CheckpointReader(text)
    with _SHARED_LOCK:
        _SHARED[text] = (size, mtime, raw, reader)
        _SHARED.move_to_end(text)
        while len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)[1][3].close()
    return reader


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """``(name, shape)`` of every variable, sorted by name."""
    return [(v.name, list(v.shape)) for v in _shared_reader(ckpt_dir_or_file).variables()]


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """The value of one variable (a trailing ``:0`` is stripped), as ``get_tensor`` returns it."""
    if name.endswith(":0"):
        name = name[:-2]
    return _shared_reader(ckpt_dir_or_file).get_tensor(name)


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: str | None = None) -> CheckpointState | None:
    """The directory's ``checkpoint`` state (TF's ``CheckpointState`` proto), relative paths
    joined with ``checkpoint_dir``; None without a state file or when it does not parse."""
    directory = as_path(_fspath(checkpoint_dir))
    storage, local = storage_for(directory)
    name = latest_filename or STATE_FILENAME
    path = os.path.join(directory, name)
    local_path = os.path.join(local, name)
    try:
        if not storage.isfile(local_path):
            return None
        raw = storage.read_bytes(local_path)
    except (OSError, errors.OpError) as exc:
        log.warning("%s: %s", type(exc).__name__, exc)
        log.warning("%s: Checkpoint ignored", path)
        return None
    try:
        state = _State.from_text(raw.decode("utf-8", "replace"), path)
    except CorruptError as exc:
        log.warning("ParseError: %s", exc)
        log.warning("%s: Checkpoint ignored", path)
        return None
    if not state.model_checkpoint_path:
        raise ValueError(f"Invalid checkpoint state loaded from {directory}")

    def joined(p: str) -> str:
        return p if os.path.isabs(p) or "://" in p else os.path.join(directory, p)

    return CheckpointState(
        model_checkpoint_path=joined(state.model_checkpoint_path),
        all_model_checkpoint_paths=[joined(p) for p in state.all_model_checkpoint_paths],
        all_model_checkpoint_timestamps=state.all_model_checkpoint_timestamps,
        last_preserved_timestamp=state.last_preserved_timestamp,
    )


def checkpoint_exists(checkpoint_prefix: Any) -> bool:
    """Whether files match ``prefix.index`` or ``prefix`` (V1, patterns allowed), as TF checks."""
    prefix = as_path(_fspath(checkpoint_prefix))
    storage, local = storage_for(prefix)
    return bool(matching_files(storage, local + INDEX_SUFFIX) or matching_files(storage, local))


def latest_checkpoint(checkpoint_dir: Any, latest_filename: str | None = None) -> str | None:
    """The prefix the state file names, when its files exist; else None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix: str = state.model_checkpoint_path
    if checkpoint_exists(prefix):
        return prefix
    log.error("Couldn't match files for checkpoint %s", prefix)
    return None
