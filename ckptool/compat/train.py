"""``tf.train``'s checkpoint functions as TensorFlow 2.21 answers them
(``tensorflow/python/training/checkpoint_utils.py`` and ``checkpoint_management.py``)."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ckptool.compat import errors, tflog
from ckptool.compat.reader import CheckpointReader, as_path, matching_files
from ckptool.compat.schemes import served, tf_storage, unimplemented
from ckptool.errors import CkptError, CorruptError, MissingError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.format.protos.tensor_bundle_pb2 import CheckpointState
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.state import STATE_FILENAME
from ckptool.io.control.state import CheckpointState as _State
from ckptool.ops.read.reader import open as open_checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint


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
        if not served(text):
            return path  # no file system: no directory (TF's reader then says so)
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


#: The indexes of the last few V2 bundles read through list_variables/load_variable, by prefix:
#: a script calling load_variable once per name (as transformers does) parses the index once,
#: not once per call. An index is reused while its file is the same one (device, inode), with
#: the size and mtime it was read with, and, when that mtime is under RACY_SECONDS old (file
#: times are coarser than writes: "racy git"), the same bytes. No data file is held open between
#: calls: each call opens the shards it reads afresh and closes them, as TF's fresh reader does,
#: so a replaced, deleted or repaired shard reads as it now is.
_SHARED: OrderedDict[str, tuple[tuple[Any, ...], bytes, BundleCheckpoint]] = OrderedDict()
_SHARED_MAX = 4
_SHARED_LOCK = threading.Lock()
RACY_SECONDS = 2.0


def _identity(storage: Any, path: str) -> tuple[Any, ...]:
    """What says a file is still the one read, as its storage answers (device, inode, size,
    mtime: an object store's device and inode are 0); its mtime last, in seconds."""
    with storage.open_dir(storage.dirname(path) or ".") as d:
        st = d.stat(storage.basename(path))
    if st is None:
        raise MissingError(f"{path}: no such file")
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime


def _cached_index(text: str) -> BundleCheckpoint | None:
    """The cached index of the V2 bundle at ``text`` (read now if stale or new); None when
    ``text`` is not a V2 prefix (a V1 pattern, nothing: the reader says which)."""
    if not served(text):
        return None
    try:
        storage, local = storage_for(text)
        index = local + INDEX_SUFFIX
        if not storage.isfile(index):
            return None
        ident = _identity(storage, index)
        with _SHARED_LOCK:
            hit = _SHARED.get(text)
        mtime = ident[-1]
        if hit is not None and hit[0] == ident and (
                time.time() - mtime > RACY_SECONDS or storage.read_bytes(index) == hit[1]):
            with _SHARED_LOCK:
                if text in _SHARED:
                    _SHARED.move_to_end(text)
            return hit[2]
        raw = storage.read_bytes(index)
        ckpt = open_checkpoint(local, storage)
    except (OSError, CkptError):
        return None
    if not isinstance(ckpt, BundleCheckpoint) or _identity(storage, index) != ident:
        return None  # changed while read: not cached
    with _SHARED_LOCK:
        _SHARED[text] = (ident, raw, ckpt)
        _SHARED.move_to_end(text)
        while len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)
    return ckpt


@contextmanager
def _shared_reader(ckpt_dir_or_file: Any) -> Iterator[CheckpointReader]:
    """A reader for one call: over the cached index of a V2 bundle, else a new one; its data
    files closed on the way out."""
    filename = _checkpoint_filename(ckpt_dir_or_file)
    if not isinstance(filename, (str, bytes)):
        CheckpointReader(filename)  # TF's TypeError
    text = as_path(filename)
    ckpt = _cached_index(text)
    reader = CheckpointReader(text) if ckpt is None else CheckpointReader.over_index(text, ckpt)
    try:
        yield reader
    finally:
        reader.close()


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """``(name, shape)`` of every variable, sorted by name."""
    with _shared_reader(ckpt_dir_or_file) as reader:
        return [(v.name, list(v.shape)) for v in reader.variables()]


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """The value of one variable (a trailing ``:0`` is stripped), as ``get_tensor`` returns it."""
    if name.endswith(":0"):
        name = name[:-2]
    with _shared_reader(ckpt_dir_or_file) as reader:
        return reader.get_tensor(name)


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: str | None = None) -> CheckpointState | None:
    """The directory's ``checkpoint`` state (TF's ``CheckpointState`` proto), relative paths
    joined with ``checkpoint_dir``; None without a state file or when it does not parse."""
    directory = as_path(_fspath(checkpoint_dir))
    name = latest_filename or STATE_FILENAME
    path = os.path.join(directory, name)
    try:
        storage, local_path = tf_storage(path)
        if not storage.isfile(local_path):
            return None
        raw = storage.read_bytes(local_path)
    except (OSError, errors.OpError) as exc:
        tflog.warning("%s: %s", type(exc).__name__, exc)
        tflog.warning("%s: Checkpoint ignored", path)
        return None
    try:
        state = _State.from_text(raw.decode("utf-8", "replace"), path)
    except CorruptError as exc:
        tflog.warning("ParseError: %s", exc)
        tflog.warning("%s: Checkpoint ignored", path)
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


def _exists(checkpoint_prefix: Any) -> bool:
    prefix = as_path(_fspath(checkpoint_prefix))
    if not served(prefix):
        raise unimplemented(prefix + INDEX_SUFFIX)
    storage, local = storage_for(prefix)
    return bool(matching_files(storage, local + INDEX_SUFFIX) or matching_files(storage, local))


@tflog.deprecated("tensorflow.python.checkpoint.checkpoint_management",
                  "Use standard file APIs to check for files with this prefix.")
def checkpoint_exists(checkpoint_prefix: Any) -> bool:
    """Whether files match ``prefix.index`` or ``prefix`` (V1, patterns allowed), as TF checks;
    deprecated in TF, and so it logs TF's notice on first use."""
    return _exists(checkpoint_prefix)


def latest_checkpoint(checkpoint_dir: Any, latest_filename: str | None = None) -> str | None:
    """The prefix the state file names, when its files exist; else None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix: str = state.model_checkpoint_path
    if _exists(prefix):
        return prefix
    tflog.error("Couldn't match files for checkpoint %s", prefix)
    return None
