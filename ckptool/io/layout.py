"""Checkpoint names on disk: which files make up a checkpoint, and what a
CHECKPOINT argument means (CONTRACT.md, "The CHECKPOINT argument").
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass

from ckptool.errors import CkptWarning, CorruptError, MissingError
from ckptool.format.bundle import DATA_RE, INDEX_SUFFIX
from ckptool.io.state import read_state, resolve
from ckptool.io.storage import LOCAL

V2, V1 = "V2", "V1"
META_SUFFIX = ".meta"
#: V1 sharded file names and the spec Saver records for them (FORMAT.md §1.1).
V1_SHARD_RE = re.compile(r"^(?P<base>.*)-(?P<shard>\d{5,}|\?{5})-of-(?P<num>\d{5,})$")
DATA_NAME_RE = re.compile(r"\.data-\d{5,}-of-\d{5,}$")
STEP_RE = re.compile(r"-(\d+)$")
TEMP_MARKERS = (".tempstate", "_temp", ".part")


@dataclass(frozen=True)
class Located:
    """A resolved checkpoint: its storage, prefix and format."""

    storage: object
    prefix: str
    format: str  # "V2" or "V1"
    v1_files: tuple[str, ...] = ()


def step_of(prefix: str) -> int | None:
    m = STEP_RE.search(prefix.rstrip("/").rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def meta_graph_filename(prefix: str) -> str:
    m = V1_SHARD_RE.match(prefix)
    return (m.group("base") if m else prefix) + META_SUFFIX


def is_v1_table(storage, path: str) -> bool:
    """A file that holds a V1 table: an sstable whose first entry is V1 metadata."""
    if not storage.isfile(path):
        return False
    try:
        from ckptool.format.table import TableReader
        from ckptool.format.v1 import parse_meta

        table = TableReader(storage.read_bytes(path), path)
        for key, value in table:
            if key != b"":
                return False
            parse_meta(value, path)
            return True
    except Exception:
        return False
    return False


def v1_files(storage, prefix: str) -> tuple[str, ...]:
    """The files of a V1 checkpoint named ``prefix`` (or a ``-?????-of-N`` spec)."""
    m = V1_SHARD_RE.match(prefix)
    if m and m.group("shard") == "?????":
        d, base = storage.dirname(prefix), storage.basename(m.group("base"))
        pat = re.compile(re.escape(base) + r"-\d{5,}-of-" + m.group("num") + "$")
        return tuple(storage.join(d, n) if d else n for n in storage.glob(d, base + "-*") if pat.match(n))
    if storage.isfile(prefix) and not prefix.endswith(INDEX_SUFFIX):
        return (prefix,)
    return ()


def checkpoint_exists(storage, prefix: str) -> bool:
    """TF's checkpoint_exists: the V2 index, or V1 files, are there."""
    return storage.isfile(prefix + INDEX_SUFFIX) or bool(v1_files(storage, prefix))


def checkpoint_files(storage, prefix: str) -> list[str]:
    """Every file that belongs to checkpoint ``prefix`` (index, data shards, meta, V1 files).

    Files being written (``.tempstate``) are not included.
    """
    d, base = storage.dirname(prefix), storage.basename(prefix)
    out = []
    data_re = re.compile(re.escape(base) + r"\.data-\d{5,}-of-\d{5,}$")
    for name in storage.glob(d, base + "*"):
        if name == base + INDEX_SUFFIX or data_re.match(name):
            out.append(name)
    meta = storage.basename(meta_graph_filename(prefix))
    if storage.isfile(storage.join(d, meta) if d else meta):
        out.append(meta)
    paths = [storage.join(d, n) if d else n for n in out]
    for f in v1_files(storage, prefix):
        if f not in paths and not f.endswith(INDEX_SUFFIX):
            paths.append(f)
    return sorted(set(paths))


def list_checkpoints(storage, directory: str) -> list[str]:
    """Prefixes of the complete checkpoints in ``directory`` (those with an ``.index``)."""
    out = []
    for name in storage.glob(directory, "*" + INDEX_SUFFIX):
        if any(m in name for m in (".tempstate",)):
            continue
        prefix = name[: -len(INDEX_SUFFIX)]
        out.append(storage.join(directory, prefix) if directory else prefix)
    return out


def _strip_file_suffix(path: str) -> str | None:
    if path.endswith(INDEX_SUFFIX):
        return path[: -len(INDEX_SUFFIX)]
    m = DATA_RE.match(path)
    if m:
        return m.group("prefix")
    if path.endswith(META_SUFFIX):
        return path[: -len(META_SUFFIX)]
    return None


def locate(path: str, storage=None) -> Located:
    """Resolve a CHECKPOINT argument to a checkpoint (every form of the contract)."""
    if storage is None:
        from ckptool.io.storage import storage_for

        storage, path = storage_for(path)
    if path != "/" and path.endswith("/") and not path.endswith("://"):
        path = path.rstrip("/")
    if storage.isdir(path):
        return _locate_dir(storage, path)
    found = _locate_prefix(storage, path)
    if found:
        return found
    stripped = _strip_file_suffix(path)
    if stripped is not None:
        found = _locate_prefix(storage, stripped)
        if found:
            return found
    raise MissingError(_not_found_message(storage, path))


def _locate_prefix(storage, prefix: str) -> Located | None:
    if storage.isfile(prefix + INDEX_SUFFIX):
        return Located(storage, prefix, V2)
    files = v1_files(storage, prefix)
    if files and all(is_v1_table(storage, f) for f in files[:1]):
        return Located(storage, prefix, V1, files)
    return None


def _locate_dir(storage, directory: str) -> Located:
    state = read_state(directory, storage)
    if state is not None:
        recorded = resolve(directory, state.model_checkpoint_path, storage)
        found = _locate_prefix(storage, recorded)
        if found:
            return found
        moved = storage.join(directory, _basename_any(state.model_checkpoint_path))
        found = _locate_prefix(storage, moved)
        if found:
            warnings.warn(
                f"{storage.join(directory, 'checkpoint')}: {state.model_checkpoint_path} does not exist "
                f"(moved directory?); using {moved}",
                CkptWarning,
                stacklevel=3,
            )
            return found
        raise MissingError(
            f"{directory}: the checkpoint state names {state.model_checkpoint_path}, which does not exist"
        )
    saved_model = storage.join(directory, "variables", "variables")
    if storage.isfile(saved_model + INDEX_SUFFIX):
        return Located(storage, saved_model, V2)
    found = list_checkpoints(storage, directory)
    if len(found) == 1:
        return Located(storage, found[0], V2)
    if not found:
        v1 = [storage.join(directory, n) for n in storage.listdir(directory)
              if is_v1_table(storage, storage.join(directory, n))]
        if len(v1) == 1:
            return Located(storage, v1[0], V1, (v1[0],))
        raise MissingError(f"{directory}: no checkpoint here (no 'checkpoint' state file, no *.index file)")
    names = ", ".join(storage.basename(p) for p in found[:5]) + (" ..." if len(found) > 5 else "")
    raise MissingError(
        f"{directory}: {len(found)} checkpoints here and no 'checkpoint' state file to pick one "
        f"({names}); name one by its prefix"
    )


def _basename_any(path: str) -> str:
    return re.split(r"[\\/]", path.rstrip("/\\"))[-1]


def _not_found_message(storage, path: str) -> str:
    import difflib

    d = storage.dirname(path)
    base = storage.basename(path)
    if d and not storage.isdir(d):
        return f"{path}: no such file or directory"
    try:
        names = [n[: -len(INDEX_SUFFIX)] for n in storage.glob(d, "*" + INDEX_SUFFIX)]
    except CorruptError:
        names = []
    close = difflib.get_close_matches(base, names, n=1)
    hint = f"; did you mean {storage.join(d, close[0]) if d else close[0]}?" if close else ""
    if storage.exists(path):
        return f"{path}: not a checkpoint (no {base}{INDEX_SUFFIX} beside it, not a V1 checkpoint file){hint}"
    return f"{path}: no checkpoint found (no {path}{INDEX_SUFFIX}){hint}"
