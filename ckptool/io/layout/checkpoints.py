"""Checkpoint names on disk: the one place that decides which files make up a
checkpoint, what is a temporary file, and what a CHECKPOINT argument means
(README, "The CHECKPOINT argument"; docs/ARCHITECTURE.md lists the rules).

A checkpoint ``P`` owns exactly: ``P.index``, ``P.data-NNNNN-of-NNNNN``,
``P.meta``; for V1 the file ``P`` itself or its ``P-NNNNN-of-NNNNN`` shards
(recorded as ``P-?????-of-NNNNN``); and the temporary files of a writer of
``P`` (:func:`temp_owner`). Nothing else beside it (``P.notes.txt``,
``P.index.bak``) is its.
"""

from __future__ import annotations

import posixpath
import warnings
from dataclasses import dataclass

from ckptool.errors import CkptError, CkptWarning, CorruptError, MissingError, ResourceError
from ckptool.format.bundle import HEADER_KEY, INDEX_SUFFIX, parse_header
from ckptool.io.base import Storage
from ckptool.io.layout.names import (  # the name rules: re-exported (__all__), layout is their one entry point
    DATA,
    INDEX,
    META,
    META_SUFFIX,
    OWN_FILES,
    STAGING_PART_RE,
    STAGING_RE,
    STEP_RE,
    TEMPSTATE_RE,
    TMP_RE,
    V1_FILE,
    V1_SHARD_RE,
    basename_any,
    file_role,
    is_staging_dir,
    is_temp,
    may_be_v1_table,
    meta_graph_filename,
    owns,
    prefix_of_dir,
    staging_owner,
    step_of,
    strip_file_suffix,
    temp_owner,
)

V2, V1 = "V2", "V1"


@dataclass(frozen=True)
class Located:
    """A resolved checkpoint: its storage, prefix and format."""

    storage: Storage
    prefix: str
    format: str  # "V2" or "V1"
    v1_files: tuple[str, ...] = ()


# --------------------------------------------------------------------------- content probes


def first_entry(storage: Storage, path: str) -> tuple[bytes, bytes] | None:
    """The first ``(key, value)`` of the sstable at ``path`` (format/table.py first_entry:
    the 48-byte footer first, then only the index block and the first data block it
    names); None when it is not a (readable) table. Never reads a file whole."""
    from ckptool.format.table import first_entry as table_first_entry

    try:
        if not storage.isfile(path):
            return None
        reader = storage.open_reader(path)
    except ResourceError:
        raise  # out of descriptors says nothing of the file
    except (CkptError, OSError):
        return None
    try:
        return table_first_entry(reader, path)
    except (CkptError, OSError, ValueError):
        return None
    finally:
        reader.close()


def is_index(storage: Storage, path: str) -> bool:
    """``path`` is a V2 index: a table whose first entry is a bundle header."""
    kv = first_entry(storage, path)
    if kv is None or kv[0] != HEADER_KEY:
        return False
    try:
        parse_header(kv[1], path)
    except CorruptError:
        return False
    except CkptError:  # a header of a newer TF: still a checkpoint
        return True
    return True


def is_v1_table(storage: Storage, path: str) -> bool:
    """A file that holds a V1 table: an sstable whose first entry is V1 metadata."""
    from ckptool.format.v1 import parse_meta

    kv = first_entry(storage, path)
    if kv is None or kv[0] != b"":
        return False
    try:
        parse_meta(kv[1], path)
    except CkptError:
        return False
    return True


# --------------------------------------------------------------------------- files of a checkpoint


def _join(storage: Storage, d: str, name: str) -> str:
    return storage.join(d, name) if d else name


def names_in(storage: Storage, directory: str) -> list[str]:
    """The names in ``directory`` ([] when it cannot be listed); callers match them literally
    (never a glob built from a prefix: ``ckpt[a]-400`` is an ordinary name)."""
    try:
        return storage.listdir(directory or ".")
    except ResourceError:
        raise  # out of descriptors: not an empty directory
    except (CkptError, OSError):
        return []


def data_shards(storage: Storage, prefix: str) -> list[str]:
    """The names of the data shards ``P.data-NNNNN-of-NNNNN`` beside ``prefix``, matched literally."""
    d, base = storage.dirname(prefix), storage.basename(prefix)
    return [n for n in names_in(storage, d) if file_role(n) == (base, DATA)]


def v1_files(storage: Storage, prefix: str) -> tuple[str, ...]:
    """The files of a V1 checkpoint named ``prefix`` (or a ``-?????-of-N`` spec): a file is
    one only when it parses as a V1 table (a text file named ``ckpt`` is nobody's)."""
    m = V1_SHARD_RE.match(prefix)
    if m and m.group("shard") == "?????":
        d, base = storage.dirname(prefix), storage.basename(prefix)
        shards = [_join(storage, d, n) for n in names_in(storage, d) if file_role(n) == (base, V1_FILE)]
        return tuple(shards) if shards and is_v1_table(storage, shards[0]) else ()
    if file_role(storage.basename(prefix)) is None and is_v1_table(storage, prefix):
        return (prefix,)
    return ()


def checkpoint_exists(storage: Storage, prefix: str) -> bool:
    """TF's checkpoint_exists: the V2 index, or V1 files, are there."""
    return storage.isfile(prefix + INDEX_SUFFIX) or bool(v1_files(storage, prefix))


def checkpoint_files(storage: Storage, prefix: str) -> list[str]:
    """Every file that belongs to checkpoint ``prefix`` (index, data shards, meta, V1 files that
    parse as V1 tables); names compared whole (:func:`owns`); temporary files are not included."""
    d, base = storage.dirname(prefix), storage.basename(prefix)
    out = [_join(storage, d, n) for n in names_in(storage, d) if owns(base, n)]
    out += list(v1_files(storage, prefix))
    return sorted(set(out))


def list_checkpoints(storage: Storage, directory: str, damaged: bool = False) -> list[str]:
    """Prefixes of the complete V2 checkpoints in ``directory``: an ``.index`` that parses as one.

    ``damaged`` (for verification) also lists an ``.index`` that does not parse when a data
    shard of the same prefix lies beside it: a checkpoint, broken, not a stray file."""
    out = []
    names = names_in(storage, directory)
    for name in names:
        role = file_role(name)
        if role is None or role[1] != INDEX:
            continue
        path = _join(storage, directory, name)
        if is_index(storage, path) or (damaged and any(file_role(n) == (role[0], DATA) for n in names)):
            out.append(_join(storage, directory, role[0]))
    return out


def list_v1_checkpoints(storage: Storage, directory: str, damaged: bool = False) -> list[str]:
    """Prefixes of the V1 checkpoints in ``directory``: a file with no other checkpoint role
    that parses as a V1 table (the file ``P``), or shards ``P-NNNNN-of-NNNNN`` whose first
    parses as one (the spec ``P-?????-of-NNNNN``). Content decides, never the name alone.

    ``damaged`` (for verification) also lists such a file that does not parse when its
    ``P.meta`` lies beside it: a checkpoint, broken, not a stray file."""
    names = sorted(names_in(storage, directory))
    present = set(names)
    out: list[str] = []
    for name in names:
        role = file_role(name)
        if role is None and name != "checkpoint" and may_be_v1_table(name):
            base = name
        elif role is not None and role[1] == V1_FILE:
            base = role[0]
        else:
            continue
        prefix = _join(storage, directory, base)
        if prefix in out:
            continue
        if is_v1_table(storage, _join(storage, directory, name)) or (
                damaged and meta_graph_filename(base) in present and storage.isfile(_join(storage, directory, name))):
            out.append(prefix)
    return out


# --------------------------------------------------------------------------- recorded paths


@dataclass(frozen=True)
class Recorded:
    """Where a state-file path leads: ``base`` (the name inside DIR) when it names a
    checkpoint directly in DIR, else None; ``moved`` when it held the absolute path of
    an old location and the same basename is a checkpoint here."""

    path: str
    base: str | None
    moved: bool = False


def resolve_recorded(storage: Storage, directory: str, path: str, warn: bool = True) -> Recorded:
    """The one rule for a path recorded in DIR's state file. Relative: joined to DIR, as TF
    does. Absolute (TF1 Saver's default): DIR's checkpoint when its directory *is* DIR by
    identity (through symlinks: :meth:`Storage.same_file`, never a string compare); else,
    when DIR holds a checkpoint of the recorded name, that one (a moved or copied run:
    ``moved``, with one warning unless ``warn`` is False); else not DIR's (``base`` None)."""
    if not path or "\0" in path or "\n" in path:
        return Recorded(path, None)
    if "://" in path or storage.isabs(path):
        base = _safe_base(basename_any(path))
        if base is None:
            return Recorded(path, None)
        head = path.rstrip("/\\")[: -len(base)].rstrip("/\\") or storage.sep
        if storage.same_file(head, directory or "."):
            return Recorded(path, base)
        here = _join(storage, directory, base)
        if checkpoint_exists(storage, here):
            if warn:
                why = "names another directory (a copied run?)" if checkpoint_exists(storage, path) else \
                    "does not exist (moved directory?)"
                warnings.warn(f"{_join(storage, directory, 'checkpoint')}: {path} {why}; using {here}",
                              CkptWarning, stacklevel=3)
            return Recorded(path, base, True)
        return Recorded(path, None)
    return Recorded(path, _safe_base(posixpath.normpath(path.replace("\\", "/"))))


def _safe_base(base: str) -> str | None:
    if base in ("", ".", "..") or "/" in base or "\\" in base or is_temp(base):
        return None
    return base


# --------------------------------------------------------------------------- CHECKPOINT arguments


def locate(path: str, storage: Storage | None = None) -> Located:
    """Resolve a CHECKPOINT argument to a checkpoint (every form of the contract)."""
    if storage is None:
        from ckptool.io.backends.urls import storage_for

        storage, path = storage_for(path)
    if path != "/" and path.endswith("/") and not path.endswith("://"):
        path = path.rstrip("/")
    if storage.isdir(path):
        return _locate_dir(storage, path)
    found = _locate_prefix(storage, path)
    if found:
        return found
    stripped = strip_file_suffix(path)
    if stripped is not None:
        found = _locate_prefix(storage, stripped)
        if found:
            return found
    raise MissingError(_not_found_message(storage, path))


def _locate_prefix(storage: Storage, prefix: str) -> Located | None:
    if storage.isfile(prefix + INDEX_SUFFIX):
        return Located(storage, prefix, V2)
    if storage.kind(prefix + INDEX_SUFFIX) == "other":  # a FIFO, device or a link to one: refused, unread
        raise CkptError(f"{prefix}{INDEX_SUFFIX}: not a regular file (a FIFO, socket or device); refusing to read it")
    files = v1_files(storage, prefix)
    if files:
        return Located(storage, prefix, V1, files)
    return None


def _locate_dir(storage: Storage, directory: str) -> Located:
    from ckptool.io.control.state import read_state

    found: Located | list[str] | None
    state = read_state(directory, storage)
    if state is not None:
        rec = resolve_recorded(storage, directory, state.model_checkpoint_path)
        target = _join(storage, directory, rec.base) if rec.base else _resolve(storage, directory, rec.path)
        found = _locate_prefix(storage, target)
        if found:
            return found
        raise MissingError(
            f"{directory}: the checkpoint state names {state.model_checkpoint_path!r}, which does not exist"
        )
    saved_model = storage.join(directory, "variables", "variables")
    if storage.isfile(saved_model + INDEX_SUFFIX):
        return Located(storage, saved_model, V2)
    found = list_checkpoints(storage, directory)
    if len(found) == 1:
        return Located(storage, found[0], V2)
    if not found:
        v1 = [storage.join(directory, n) for n in storage.listdir(directory)
              if file_role(n) is None and may_be_v1_table(n) and is_v1_table(storage, storage.join(directory, n))]
        if len(v1) == 1:
            return Located(storage, v1[0], V1, (v1[0],))
        raise MissingError(f"{directory}: no checkpoint here (no 'checkpoint' state file, no *.index file)")
    names = ", ".join(storage.basename(p) for p in found[:5]) + (" ..." if len(found) > 5 else "")
    raise MissingError(
        f"{directory}: {len(found)} checkpoints here and no 'checkpoint' state file to pick one "
        f"({names}); name one by its prefix"
    )


def _resolve(storage: Storage, directory: str, path: str) -> str:
    from ckptool.io.control.state import resolve

    return resolve(directory, path, storage)


def _not_found_message(storage: Storage, path: str) -> str:
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
    hint = f"; did you mean {_join(storage, d, close[0])}?" if close else ""
    if storage.exists(path):
        return f"{path}: not a checkpoint (no {base}{INDEX_SUFFIX} beside it, not a V1 checkpoint file){hint}"
    return f"{path}: no checkpoint found (no {path}{INDEX_SUFFIX}){hint}"


__all__ = [
    "DATA",
    "INDEX",
    "Located",
    "META",
    "META_SUFFIX",
    "OWN_FILES",
    "Recorded",
    "STAGING_PART_RE",
    "STAGING_RE",
    "STEP_RE",
    "TEMPSTATE_RE",
    "TMP_RE",
    "V1",
    "V1_FILE",
    "V1_SHARD_RE",
    "V2",
    "basename_any",
    "checkpoint_exists",
    "checkpoint_files",
    "data_shards",
    "file_role",
    "first_entry",
    "is_index",
    "is_staging_dir",
    "is_temp",
    "is_v1_table",
    "list_checkpoints",
    "list_v1_checkpoints",
    "locate",
    "may_be_v1_table",
    "meta_graph_filename",
    "names_in",
    "owns",
    "prefix_of_dir",
    "resolve_recorded",
    "staging_owner",
    "step_of",
    "strip_file_suffix",
    "temp_owner",
    "v1_files",
]
