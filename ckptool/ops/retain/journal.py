"""The journal of the deletion engine, ``DIR/.ckptool-prune-pending``: what a prune or rm is
about to do is written there first (the checkpoints to delete, those moving into ``DIR/kept/``
with their name there, and a Keras series member's files by name, size and time);
:func:`finish_journal`, run by every deleting command under the lock, completes an interrupted
one through :mod:`ckptool.ops.retain.deletion`."""

from __future__ import annotations

import stat as _stat
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CorruptError
from ckptool.format.json_doc import dump_json, load_json
from ckptool.io.control.lock import LOCK_FILENAME
from ckptool.io.control.state import CheckpointState
from ckptool.io.layout.checkpoints import resolve_recorded
from ckptool.io.layout.listing import FileInfo, scan
from ckptool.ops.retain.deletion import JOURNAL, delete_checkpoint, delete_files, keep_into, release, warn

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage


def journal_doc(bases: Iterable[str], moves: dict[str, str] | None = None,
                groups: Iterable[list[FileInfo]] = ()) -> Any:
    """The journal as a JSON value: a list of checkpoint bases to delete and of ``groups`` of files
    deleted as one (a Keras series member: its files by name, size and time, its first file
    first); when some checkpoints move into kept/, ``{"delete": [...], "move": {base: name in kept/}}``.
    Written as the file :data:`JOURNAL`, or carried by the lock object (``prune --recursive`` on an
    object store: :func:`ckptool.ops.retain.prune.run`'s planned-first path)."""
    doc: Any = sorted(set(bases))
    doc += [{"files": [[f.name, f.size, f.mtime] for f in g]} for g in groups]
    if moves:
        doc = {"delete": doc, "move": dict(sorted(moves.items()))}
    return doc


def write_journal(d: Dir, bases: Iterable[str], moves: dict[str, str] | None = None,
                  groups: Iterable[list[FileInfo]] = ()) -> None:
    """What is about to go (:func:`journal_doc`), as the file :data:`JOURNAL`."""
    d.replace(JOURNAL, dump_json(journal_doc(bases, moves, groups), d.join(JOURNAL), compact=True))


#: The largest journal read (one names at most every checkpoint of a directory).
JOURNAL_MAX_BYTES = 64 << 20


def _read_journal(raw: bytes, where: str) -> tuple[list[Any], dict[str, str]]:
    """The journal's checkpoints and groups to delete, and its moves; CorruptError (by the one
    bounded JSON reader, :func:`ckptool.format.json_doc.load_json`) or ValueError when it is not one."""
    doc = load_json(raw, where, max_bytes=JOURNAL_MAX_BYTES, what="a prune journal")
    if isinstance(doc, dict):
        names, moves = doc.get("delete", []), doc.get("move", {})
    else:
        names, moves = doc, {}
    if not (isinstance(names, list) and all(isinstance(n, str) or _group(n) is not None for n in names)
            and isinstance(moves, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in moves.items())):
        raise ValueError
    return names, moves


def _group(entry: Any) -> list[tuple[str, int, float]] | None:
    files = entry.get("files") if isinstance(entry, dict) else None
    if not isinstance(files, list) or not files or not all(
            isinstance(f, list) and len(f) == 3 and isinstance(f[0], str) and isinstance(f[1], int)
            and isinstance(f[2], (int, float)) for f in files):
        return None
    return [(f[0], f[1], float(f[2])) for f in files]


def _finish_group(d: Dir, files: list[tuple[str, int, float]], failed: list[dict[str, str]]) -> bool:
    """A journaled group: the files that are still exactly what was journaled (a regular file
    of that size and time: a name rewritten since is another save), the first one first."""
    infos = []
    for name, size, mtime in files:
        if "/" in name or name in ("", ".", ".."):
            return True
        st = d.lstat(name)
        if st is None or not _stat.S_ISREG(st.st_mode) or st.st_size != size or st.st_mtime != mtime:
            if name == files[0][0] and st is not None:
                return True  # its first file is another save's now: the group is not ours to finish
            continue
        infos.append(FileInfo(name, size, mtime))
    return delete_files(d, infos, failed, files[0][0])[1]


def _journal_file(d: Dir) -> tuple[list[Any], dict[str, str]] | None:
    """The journal file's checkpoints and groups, and moves (None: none, or unreadable: removed)."""
    st = d.lstat(JOURNAL)
    if st is None:
        return None
    try:
        if st.st_size > JOURNAL_MAX_BYTES:  # never read whole: one a hostile hand made 3 GB cost 6 GB and 24 s
            raise CorruptError(f"{d.join(JOURNAL)}: over {JOURNAL_MAX_BYTES} bytes, more than a prune journal")
        raw = d.read(JOURNAL)
        if raw is None:
            return None
        return _read_journal(raw, d.join(JOURNAL))
    except (ValueError, CkptError) as exc:
        why = str(exc).removeprefix(d.join(JOURNAL) + ": ") if isinstance(exc, CkptError) else "not a journal"
        warn(f"{d.join(JOURNAL)}: unreadable journal ({why}); ignored")
        d.unlink(JOURNAL)
        return None


def _lock_journal(storage: Storage, d: Dir) -> tuple[Any, tuple[list[Any], dict[str, str]] | None]:
    """``(the lock we hold, the journal its takeover found)``: a holder killed with the journal in
    its lock object's note (:func:`ckptool.ops.retain.prune.run`'s planned-first path); the lock
    is None where the storage's lock carries no note."""
    held = getattr(storage, "held_lock", None)
    lock = held(d.path) if held is not None else None
    note = getattr(lock, "inherited", None)
    if note is None:
        return lock, None
    try:
        return lock, _read_journal(dump_json(note, d.join(LOCK_FILENAME), compact=True), d.join(LOCK_FILENAME))
    except (ValueError, CkptError):
        warn(f"{d.join(LOCK_FILENAME)}: the journal its last holder left is unreadable; ignored")
        return lock, None


def finish_journal(storage: Storage, d: Dir, state: CheckpointState | None) -> None:
    """Complete the deletions and moves of an earlier prune or rm (killed, or stopped by a file
    it could not delete): the checkpoints it journaled (the journal file, or the note of the
    lock object a killed holder left, which the lock we hold took over) that the state file
    does not list, and its groups of files (:func:`write_journal`) that are still as journaled."""
    lock, noted = _lock_journal(storage, d)
    filed = _journal_file(d)
    if filed is None and noted is None:
        return
    names, moves = filed if filed is not None else ([], {})
    if noted is not None:
        names = names + [n for n in noted[0] if n not in names]
        moves = {**noted[1], **moves}
    listed = set()
    if state is not None:
        for p in state.all_model_checkpoint_paths + [state.model_checkpoint_path]:
            b = resolve_recorded(storage, d.path, p, warn=False).base
            if b:
                listed.add(b)

    def ok(base: str) -> bool:
        return base not in listed and "/" not in base and base not in ("", ".", "..")

    listing = scan(d)
    left_groups: list[list[FileInfo]] = []
    failed: list[dict[str, str]] = []
    moves = {b: k for b, k in moves.items() if ok(b) and ok(k) and b in listing.files}
    kfailed: list[dict[str, str]] = []
    _, pending = release(storage, d, listing, moves, kfailed, quiet=True)  # kept/ holds them: their DIR names go
    left_moves = set()
    if pending:  # killed before kept/ held them whole: linked now (the originals are whole), then released
        placed, _ = keep_into(storage, d, listing, {b: listing.mtime(b) or 0.0 for b in pending}, kfailed)
        _, still = release(storage, d, listing, placed, kfailed)
        left_moves = (pending - set(placed)) | still
    left = []
    for base in names:
        if not isinstance(base, str):
            files = _group(base) or []
            if not _finish_group(d, files, failed):
                left_groups.append([FileInfo(n, sz, t) for n, sz, t in files])
            continue
        if not ok(base):
            continue
        _, done = delete_checkpoint(d, listing, base, failed)
        if not done:
            left.append(base)
    for f in failed:
        warn(f"{f['path']}: cannot delete: {f['error']}")
    for f in kfailed:
        warn(f"{f['path']}: cannot keep: {f['error']}")
    if left or left_moves or left_groups:
        try:
            write_journal(d, left, {b: moves[b] for b in sorted(left_moves)}, left_groups)
        except CkptError:
            if filed is None:
                raise  # the lock's note is the only record: it stays, in the lock object we hold
            return  # the old journal names a superset: still true
    elif filed is not None:
        d.unlink(JOURNAL)
    if noted is not None:  # finished (or in the journal file now): the lock object carries it no more
        lock.inherited = None
        lock.set_note(None)


def journaled(d: Dir) -> set[str]:
    """The checkpoints DIR's journal names as going (deleted, or moving into kept/): an ``rm``
    of one of them, rerun after a kill took its index, finishes it. Empty without a readable journal."""
    try:
        raw = d.read(JOURNAL)
        names, moves = _read_journal(raw, d.join(JOURNAL)) if raw is not None else ([], {})
    except (ValueError, CkptError, OSError):
        return set()
    return {n for n in names if isinstance(n, str)} | set(moves)


def end_journal(d: Dir, left: Iterable[str], left_moves: dict[str, str] | None = None,
                groups: Iterable[list[FileInfo]] = ()) -> None:
    """After the deletions: the journal names what is still to go, or is removed."""
    left, groups = list(left), list(groups)
    if left or left_moves or groups:
        try:
            write_journal(d, left, left_moves, groups)
        except CkptError:
            pass  # the journal written before names a superset: still true
    else:
        try:
            d.unlink(JOURNAL)
        except FileNotFoundError:
            pass


__all__ = ["JOURNAL", "end_journal", "finish_journal", "journal_doc", "journaled", "write_journal"]
