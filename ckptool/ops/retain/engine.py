"""The one deletion engine of the retain family: ``prune``, ``rm``, ``prune --clean-temp``
and ``state --rebuild`` all go through it (docs/ARCHITECTURE.md, "One rule, one function").

- :func:`refuse_special`: a FIFO, socket or device (or a link to one) at the lock, the
  state file or an ``.index`` stops the command at once, with one error line;
- :func:`delete_checkpoint`: a checkpoint's own files (those the listing groups under its
  base, by :mod:`ckptool.io.layout`), through DIR's descriptor, the ``.index`` first: when
  the index cannot go, nothing else of it goes (it stays whole); a file that cannot go is
  reported and the checkpoint is not called deleted;
- the journal ``DIR/.ckptool-prune-pending``: what is about to go is written there first;
  :func:`finish_journal` (run by every deleting command under the lock) completes an
  interrupted prune or rm;
- :func:`update_state`: the one compare-and-swap update of the state file (re-read,
  recompute, replace only if unchanged; :data:`STATE_ATTEMPTS` tries);
- :func:`latest_base`: the one answer to "which checkpoint is the latest" that every
  command protects.
"""

from __future__ import annotations

import json
import stat as _stat
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CkptWarning, RefusedError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.layout import INDEX, file_role, resolve_recorded, step_of
from ckptool.io.listing import DirListing, FileInfo, scan
from ckptool.io.lock import LOCK_FILENAME
from ckptool.io.state import STATE_FILENAME, CheckpointState, parse_state

if TYPE_CHECKING:
    from ckptool.io.dirfd import LocalDir, PathDir
    from ckptool.io.storage import Storage

    Dir = LocalDir | PathDir

JOURNAL = ".ckptool-prune-pending"
STATE_ATTEMPTS = 10  # re-reads of a state file that keeps changing before a command gives up
TEMP_MAX_AGE = 3600.0  # --clean-temp deletes temporaries older than this
KEEP = object()  # update_state's "leave the state file as it is"


def warn(msg: str) -> None:
    """One warning line of the retain family (the CLI prints it as ``ckptool: warning: ...``)."""
    warnings.warn(msg, CkptWarning, stacklevel=4)


# --------------------------------------------------------------------------- refusals


def refuse_special(d: Dir, listing: DirListing | None = None) -> None:
    """A non-regular file (FIFO, socket, device, a symlink to one) at DIR's lock, state file
    or an ``.index`` (of the listing) is refused at once: one CkptError naming it."""
    names = [LOCK_FILENAME, STATE_FILENAME]
    if listing is not None:
        names += [n for n in listing.special if (r := file_role(n)) is not None and r[1] == INDEX]
    for n in names:
        st = d.lstat(n)
        if st is not None and _stat.S_ISLNK(st.st_mode):
            st = d.stat(n)  # None: a dangling link, no file at all
        if st is not None and not _stat.S_ISREG(st.st_mode) and not _stat.S_ISDIR(st.st_mode):
            raise CkptError(f"{d.join(n)}: not a regular file (a FIFO, socket or device); refusing to use it")


def read_dir_state(d: Dir) -> tuple[bytes | None, CheckpointState | None]:
    """The state file's bytes and parse (None, None when absent); a FIFO or device is refused."""
    raw = d.read(STATE_FILENAME)
    return raw, (parse_state(raw, d.join(STATE_FILENAME)) if raw is not None else None)


# --------------------------------------------------------------------------- the latest


def latest_base(storage: Storage, directory: str, state: CheckpointState | None,
                listing: DirListing | None = None) -> str | None:
    """The checkpoint every command protects: the state file's latest (by the one rule for
    recorded paths, :func:`ckptool.io.layout.resolve_recorded`); without a state file, the
    newest complete checkpoint on disk (by step, then index mtime)."""
    if state is not None:
        return resolve_recorded(storage, directory, state.model_checkpoint_path, warn=False).base
    if listing is None:
        return None
    found = [(step_of(b) if step_of(b) is not None else -1, listing.mtime(b) or 0.0, b) for b in listing.complete]
    return max(found)[2] if found else None


# --------------------------------------------------------------------------- deleting


def delete_checkpoint(d: Dir, listing: DirListing, base: str, failed: list[dict[str, str]]) -> tuple[list[FileInfo],
                                                                                                     bool]:
    """Delete checkpoint ``base``'s files, index (the commit marker) first. ``(files deleted,
    all gone)``; each file that cannot go is added to ``failed`` (``{"path", "error"}``). When
    the index cannot go, the rest stays: the checkpoint is left whole, not half deleted."""
    files = sorted(listing.files.get(base, []), key=lambda f: (f.name != base + INDEX_SUFFIX, f.name))
    return delete_files(d, files, failed, base + INDEX_SUFFIX)


def delete_files(d: Dir, files: list[FileInfo], failed: list[dict[str, str]],
                 marker: str | None = None) -> tuple[list[FileInfo], bool]:
    """Delete one saved state's files in the order given, through DIR's descriptor: the
    engine of :func:`delete_checkpoint`, and of a Keras series member (``marker`` its first
    file, the one whose going unmakes it). When ``marker`` cannot go, nothing after it does."""
    done: list[FileInfo] = []
    ok = True
    for f in files:
        try:
            d.unlink(f.name)
            done.append(f)
        except FileNotFoundError:
            pass
        except (OSError, CkptError) as exc:
            ok = False
            failed.append({"path": d.join(f.name), "error": _why(exc)})
            if f.name == marker:
                break
    return done, ok


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


def delete_temporaries(d: Dir, listing: DirListing, now: float, dry_run: bool, failed: list[dict[str, str]],
                       max_age: float = TEMP_MAX_AGE) -> tuple[list[str], int]:
    """``--clean-temp``: the temporaries of the listing (the exact rule of
    :func:`ckptool.io.layout.temp_owner`) older than ``max_age``; never while a writer holds
    DIR's lock (the caller holds it, or checks it on a dry run). ``(paths, bytes)``."""
    gone: list[str] = []
    freed = 0
    for f in listing.temps:
        if now - f.mtime < max_age:
            continue
        if not dry_run:
            try:
                d.rmtree(f.name) if f.is_dir else d.unlink(f.name)
            except (OSError, CkptError) as exc:
                failed.append({"path": d.join(f.name), "error": _why(exc)})
                continue
        gone.append(d.join(f.name))
        freed += f.size
    return gone, freed


# --------------------------------------------------------------------------- the journal


def write_journal(d: Dir, bases: Iterable[str], groups: Iterable[list[FileInfo]] = ()) -> None:
    """Name what is about to go: checkpoint bases, and ``groups`` of files deleted as one
    (a Keras series member: its files by name, size and time, its first file first)."""
    doc: list[Any] = sorted(set(bases))
    doc += [{"files": [[f.name, f.size, f.mtime] for f in g]} for g in groups]
    d.replace(JOURNAL, json.dumps(doc).encode("utf-8"))


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


def finish_journal(storage: Storage, d: Dir, state: CheckpointState | None) -> None:
    """Complete the deletions of an earlier prune or rm (killed, or stopped by a file it could
    not delete): the names it journaled that the state file does not list, and its groups of
    files (:func:`write_journal`) that are still as journaled."""
    raw = d.read(JOURNAL)
    if raw is None:
        return
    try:
        names = json.loads(raw.decode("utf-8"))
        if not isinstance(names, list) or not all(isinstance(n, str) or _group(n) is not None for n in names):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        warn(f"{d.join(JOURNAL)}: unreadable journal; ignored")
        d.unlink(JOURNAL)
        return
    listed = set()
    if state is not None:
        for p in state.all_model_checkpoint_paths + [state.model_checkpoint_path]:
            b = resolve_recorded(storage, d.path, p, warn=False).base
            if b:
                listed.add(b)
    listing = scan(d)
    left: list[str] = []
    left_groups: list[list[FileInfo]] = []
    failed: list[dict[str, str]] = []
    for base in names:
        if not isinstance(base, str):
            files = _group(base) or []
            if not _finish_group(d, files, failed):
                left_groups.append([FileInfo(n, s, t) for n, s, t in files])
            continue
        if base in listed or "/" in base or base in ("", ".", ".."):
            continue
        _, ok = delete_checkpoint(d, listing, base, failed)
        if not ok:
            left.append(base)
    for f in failed:
        warn(f"{f['path']}: cannot delete: {f['error']}")
    if left or left_groups:
        try:
            write_journal(d, left, left_groups)
        except CkptError:
            pass  # the old journal names a superset: still true
    else:
        d.unlink(JOURNAL)


def end_journal(d: Dir, left: Iterable[str], groups: Iterable[list[FileInfo]] = ()) -> None:
    """After the deletions: the journal names what is still to go, or is removed."""
    left, groups = list(left), list(groups)
    if left or groups:
        try:
            write_journal(d, left, groups)
        except CkptError:
            pass  # the journal written before names a superset: still true
    else:
        try:
            d.unlink(JOURNAL)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------- the state file


def update_state(d: Dir, compute: Callable[[bytes | None, CheckpointState | None], Any], who: str,
                 lenient: bool = False) -> Any:
    """The one compare-and-swap update of DIR's state file. ``compute(raw, state)`` returns
    the new :class:`CheckpointState`, None to remove the file, or :data:`KEEP`; it is
    re-run on what the file holds now until the replace finds the file unchanged. Returns
    what was applied. RefusedError after :data:`STATE_ATTEMPTS` changes by someone else.
    ``lenient`` (a rebuild): a file that does not parse is given to ``compute`` as None."""
    for _ in range(STATE_ATTEMPTS):
        if lenient:
            raw = d.read(STATE_FILENAME)
            try:
                state = parse_state(raw, d.join(STATE_FILENAME)) if raw is not None else None
            except CkptError:
                state = None
        else:
            raw, state = read_dir_state(d)
        new = compute(raw, state)
        if new is KEEP:
            return KEEP
        if new is None:
            if raw is None:
                return None
            if d.read(STATE_FILENAME) == raw:
                d.unlink(STATE_FILENAME)
                return None
            continue
        if d.replace(STATE_FILENAME, new.to_text().encode("utf-8"), raw):
            return new
    raise RefusedError(f"{d.join(STATE_FILENAME)}: the state file changed {STATE_ATTEMPTS} times while {who} was "
                       f"updating it (is a trainer saving every few milliseconds?); nothing deleted; run {who} again")


__all__ = ["JOURNAL", "KEEP", "STATE_ATTEMPTS", "TEMP_MAX_AGE", "delete_checkpoint", "delete_files",
           "delete_temporaries", "end_journal", "finish_journal", "latest_base", "read_dir_state", "refuse_special",
           "update_state", "warn", "write_journal"]
