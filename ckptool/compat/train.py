"""``tf.train``'s checkpoint functions as TensorFlow 2.21 answers them
(``tensorflow/python/training/checkpoint_utils.py`` and ``checkpoint_management.py``)."""

from __future__ import annotations

import logging
import os
from typing import Any

from ckptool.compat import errors
from ckptool.compat.reader import CheckpointReader, as_path, matching_files
from ckptool.errors import CorruptError
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


def load_checkpoint(ckpt_dir_or_file: Any) -> CheckpointReader:
    """The reader of a checkpoint prefix, or of the latest checkpoint a directory's
    ``checkpoint`` state file names (``ValueError`` when there is none)."""
    path = _fspath(ckpt_dir_or_file)
    filename = path
    if isinstance(path, (str, bytes)):
        text = as_path(path)
        storage, local = storage_for(text)
        if storage.isdir(local):
            filename = latest_checkpoint(text)
            if filename is None:
                raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given directory {text}")
    return CheckpointReader(filename)


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """``(name, shape)`` of every variable, sorted by name."""
    shapes = load_checkpoint(ckpt_dir_or_file).get_variable_to_shape_map()
    return [(name, shapes[name]) for name in sorted(shapes)]


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """The value of one variable (a trailing ``:0`` is stripped), as ``get_tensor`` returns it."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


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
