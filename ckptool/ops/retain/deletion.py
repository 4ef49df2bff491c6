"""The one deletion engine of the retain family: ``prune``, ``rm``, ``prune --clean-temp``
and ``state --rebuild`` all go through it (docs/ARCHITECTURE.md, "One rule, one function").

- :func:`refuse_special`: a FIFO, socket or device (or a link to one) at the lock, the
  state file or an ``.index`` stops the command at once, with one error line;
- :func:`delete_checkpoint`: a checkpoint's own files (those the listing groups under its
  base, by :mod:`ckptool.io.layout.checkpoints`), through DIR's descriptor, the ``.index`` first: when
  the index cannot go, nothing else of it goes (it stays whole); a file that cannot go is
  reported and the checkpoint is not called deleted;
- the journal ``DIR/.ckptool-prune-pending`` (:mod:`ckptool.ops.retain.journal`): what is
  about to go is written there first; the next deleting command completes an interrupted
  prune or rm;
- :func:`keep_into`: a checkpoint's files get second names in ``DIR/kept/`` (hard links,
  data first, the index last; :mod:`ckptool.io.layout.keptdir`), then ``kept/``'s state file is
  rewritten; :func:`release` deletes the DIR names of a moved one only once ``kept/`` holds
  every file, each the same inode or a copy whose bytes were compared (kill -9 anywhere: the
  next run's :func:`finish_journal` links or copies what is missing, a leftover that is not the
  checkpoint's bytes replaced, then deletes);
- :func:`update_state`: the one compare-and-swap update of the state file (re-read,
  recompute, replace only if unchanged; :data:`STATE_ATTEMPTS` tries);
- :func:`latest_base`: the one answer to "which checkpoint is the latest" that every
  command protects.
"""

from __future__ import annotations

import stat as _stat
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, CkptWarning, RefusedError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.control.lock import DEFAULT_TIMEOUT, LOCK_FILENAME, lock_open
from ckptool.io.control.state import STATE_FILENAME, CheckpointState, parse_state
from ckptool.io.layout.checkpoints import INDEX, file_role, resolve_recorded, step_of
from ckptool.io.layout.keptdir import fsync_dir, open_kept, place_file, read_clock, same_file
from ckptool.io.layout.listing import DirListing, FileInfo, scan
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.kept import alternatives, kept_file, kept_state

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage

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
    recorded paths, :func:`ckptool.io.layout.checkpoints.resolve_recorded`); without a state file, the
    newest complete checkpoint on disk (:func:`newest_on_disk`)."""
    if state is not None:
        return resolve_recorded(storage, directory, state.model_checkpoint_path, warn=False).base
    return newest_on_disk(listing) if listing is not None else None


def newest_on_disk(listing: DirListing) -> str | None:
    """The latest checkpoint of a directory without a state file: its newest complete one
    (:func:`ckptool.ops.retain.retention.newest_of`: by step, then index mtime)."""
    return R.newest_of(R.Entry(b, listing.mtime(b) or 0.0, step_of(b)) for b in listing.complete)


# --------------------------------------------------------------------------- deleting


def delete_checkpoint(d: Dir, listing: DirListing, base: str, failed: list[dict[str, str]]) -> tuple[list[FileInfo],
                                                                                                     bool]:
    """Delete checkpoint ``base``'s files, index (the commit marker) first. ``(files deleted,
    all gone)``; each file that cannot go is added to ``failed`` (``{"path", "error"}``). When
    the index cannot go, the rest stays: the checkpoint is left whole, not half deleted."""
    files = sorted(listing.files.get(base, []), key=lambda f: (f.name != base + INDEX_SUFFIX, f.name))
    return delete_files(d, files, failed, base + INDEX_SUFFIX)


def delete_checkpoints(d: Dir, listing: DirListing, bases: list[str], failed: list[dict[str, str]],
                       release: Any = None, progress: Callable[[int, int], None] | None = None,
                       ) -> tuple[list[FileInfo], set[str]]:
    """Delete the checkpoints ``bases``, each one's index (the commit marker) before its other
    files: ``(files deleted, the bases not wholly gone)``. Where DIR deletes in batches (an object
    store's ``unlink_many``), in two requests for them all: every index, then every other file of
    those whose index went (or had none), with ``release`` (the lock held on DIR, whose object
    carries the journal) released in that same request; else one checkpoint after another
    (:func:`delete_checkpoint`)."""
    many = getattr(d, "unlink_many", None)
    markers = {b: f for b in bases for f in listing.files.get(b, []) if f.name == b + INDEX_SUFFIX}
    got = many([f.name for f in markers.values()]) if many is not None and markers else None
    done: list[FileInfo] = []
    left: set[str] = set()
    if got is None and (many is None or markers):  # no batch delete: one checkpoint at a time
        for i, b in enumerate(bases):
            ok_files, ok = delete_checkpoint(d, listing, b, failed)
            done += ok_files
            if not ok:
                left.add(b)
            if progress is not None:
                progress(i + 1, len(bases))
        return done, left
    left = {b for b, f in markers.items() if not _gone(d, f, (got or {})[f.name], done, failed)}
    owner = {f.name: b for b in bases if b not in left for f in listing.files.get(b, []) if f is not markers.get(b)}
    rest = [f for b in bases for f in listing.files.get(b, []) if f.name in owner]
    got = many(list(owner), release) if owner and many is not None else {}
    for f in rest:
        if not _gone(d, f, _unlink(d, f.name) if got is None else got[f.name], done, failed):
            left.add(owner[f.name])
    if progress is not None:
        progress(len(bases), len(bases))
    return done, left


def delete_files(d: Dir, files: list[FileInfo], failed: list[dict[str, str]],
                 marker: str | None = None) -> tuple[list[FileInfo], bool]:
    """Delete one saved state's files in the order given, through DIR's descriptor: the
    engine of :func:`delete_checkpoint`, and of a Keras series member (``marker`` its first
    file, the one whose going unmakes it). When ``marker`` cannot go, nothing after it does."""
    done: list[FileInfo] = []
    ok = True
    for i, f in enumerate(files):
        if f.name != marker and len(files) - i > 1:  # the marker gone (it goes first, alone): the rest at once
            many = getattr(d, "unlink_many", None)
            got = many([g.name for g in files[i:]]) if many is not None else None
            if got is not None:
                for g in files[i:]:
                    ok = _gone(d, g, got[g.name], done, failed) and ok
                return done, ok
        exc = _unlink(d, f.name)
        ok = _gone(d, f, exc, done, failed) and ok
        if exc is not None and f.name == marker and not isinstance(exc, FileNotFoundError):
            break
    return done, ok


def _unlink(d: Dir, name: str) -> BaseException | None:
    """Unlink ``name`` of DIR: None, or why it could not go."""
    try:
        d.unlink(name)
    except (OSError, CkptError) as exc:
        return exc
    return None


def _gone(d: Dir, f: FileInfo, exc: BaseException | None, done: list[FileInfo], failed: list[dict[str, str]]) -> bool:
    """Record the deletion of ``f``: done, already gone, or failed (False)."""
    if exc is None:
        done.append(f)
    elif not isinstance(exc, FileNotFoundError):
        failed.append({"path": d.join(f.name), "error": _why(exc)})
        return False
    return True


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


def delete_temporaries(d: Dir, listing: DirListing, now: float, dry_run: bool, failed: list[dict[str, str]],
                       max_age: float = TEMP_MAX_AGE) -> tuple[list[str], int]:
    """``--clean-temp``: the temporaries of the listing (the exact rule of
    :func:`ckptool.io.layout.checkpoints.temp_owner`) older than ``max_age``; never while a writer holds
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


# --------------------------------------------------------------------------- kept/


def _holds(d: Dir, kept: Dir, klisting: DirListing, files: list[FileInfo], base: str, kbase: str) -> bool:
    """``kept/`` holds checkpoint ``base`` as ``kbase``: complete there, and each of ``files``
    (its names left in DIR) is the same file as its name there: the same inode, or a copy whose
    bytes are compared (the data files first, the index last), never its size alone."""
    files = sorted(files, key=lambda f: (f.name == base + INDEX_SUFFIX, f.name))
    return kbase in klisting.complete and all(same_file(d, f.name, kept, kept_file(base, kbase, f.name))
                                              for f in files)


#: How a checkpoint got its names in kept/ this run: each (how, bytes copied).
Placed = dict[str, tuple[str, int]]
_TAKEN = "taken"


def keep_into(storage: Storage, d: Dir, listing: DirListing, want: dict[str, float],
              failed: list[dict[str, str]], prove: set[str] | None = None) -> tuple[dict[str, str], Placed]:
    """Give each checkpoint of ``want`` (base -> its time) second names in ``DIR/kept/``, under
    kept/'s lock. ``(base -> its name there for each that kept/ now holds, base -> (how, bytes
    copied) for those that got a name there now: "hard link" or "copy"; the others it held
    already)``. A name of kept/ that holds another checkpoint (another index there) is never
    overwritten (the next of :func:`alternatives` is taken); a file left there by a killed run
    that is not this checkpoint's bytes is replaced; for the bases of ``prove`` (None: all)
    a complete copy there is compared byte for byte too, and a file that differs replaced (its
    index first). A checkpoint whose files went meanwhile is reported in ``failed``."""
    placed: dict[str, str] = {}
    fresh: Placed = {}
    kept = open_kept(storage, d, create=True) if want else None
    if kept is None:
        return placed, fresh
    with kept, lock_open(storage, kept, timeout=DEFAULT_TIMEOUT):
        klisting = scan(kept)
        for base in want:
            files = sorted(listing.files.get(base, []), key=lambda f: (f.name == base + INDEX_SUFFIX, f.name))
            deep = prove is None or base in prove
            for kbase in alternatives(base, base in listing.v1):
                got = _keep_one(d, kept, klisting, files, base, kbase, deep, failed)
                if got == _TAKEN:
                    continue  # another checkpoint has this name in kept/
                if isinstance(got, tuple):
                    placed[base] = kbase
                    if got[0]:
                        fresh[base] = got
                break
            else:
                warn(f"{d.join(base)}: {kept.path} holds other checkpoints of this name; left where it is")
        fsync_dir(kept)
        stamps = {placed[b]: t for b, t in want.items() if b in placed}

        def compute(_raw: bytes | None, cur: CheckpointState | None) -> object:
            new = kept_state(storage, kept.path, scan(kept), stamps, cur)
            return KEEP if new is None or (cur is not None and cur.to_text() == new.to_text()) else new

        update_state(kept, compute, "prune", lenient=True)
    return placed, fresh


def _keep_one(d: Dir, kept: Dir, klisting: DirListing, files: list[FileInfo], base: str, kbase: str, deep: bool,
              failed: list[dict[str, str]]) -> object:
    """Checkpoint ``base`` (``files``, the index last) as ``kbase`` in kept/: :data:`_TAKEN` when
    that name holds another checkpoint; else ``(how, bytes)`` (how "" when kept/ held it
    already), or None when it could not be placed (reported in ``failed``)."""
    names = {f.name: kept_file(base, kbase, f.name) for f in files}
    theirs = {f.name for f in klisting.files.get(kbase, [])}
    if not theirs <= set(names.values()):
        return _TAKEN
    there = [f for f in files if kept.lstat(names[f.name]) is not None]
    complete = kbase in klisting.complete
    if complete:  # a checkpoint of kept/: ours only if every file there matches (the index's bytes say whose)
        if not all(same_file(d, f.name, kept, names[f.name], deep=kbase in klisting.v1) for f in there):
            return _TAKEN
        bad = [f for f in there if deep and not same_file(d, f.name, kept, names[f.name])]
        if bad:  # a damaged copy of this checkpoint: unmade (its index first) and placed again
            bad = there
    else:  # no checkpoint there yet: what a killed run left is kept only when it is this one's bytes
        bad = [f for f in there if not same_file(d, f.name, kept, names[f.name])]
    try:
        for f in sorted(bad, key=lambda f: (f.name != base + INDEX_SUFFIX, f.name)):  # the index goes first
            kept.unlink(names[f.name])
    except (OSError, CkptError):
        return _TAKEN  # a leftover that cannot be replaced (a directory, no permission): the next name is used
    keep = {f.name for f in there} - {f.name for f in bad}
    missing = [f for f in files if f.name not in keep]
    return _place(d, kept, missing, base, kbase, failed)


def _place(d: Dir, kept: Dir, files: list[FileInfo], base: str, kbase: str,
           failed: list[dict[str, str]]) -> tuple[str, int] | None:
    """Link (or copy) ``files`` into kept/ as ``kbase``, the index last: ``(how, bytes copied)``
    by what :func:`place_file` answered ("copy" when any file was copied, "" when none was
    placed); on failure (None) the names made here are removed again (an incomplete checkpoint
    is never left in kept/)."""
    made: list[str] = []
    copied, how = 0, ""
    try:
        for f in files:
            name = kept_file(base, kbase, f.name)
            if place_file(d, kept, f.name, name, follow=f.inode is None) == "copy":
                copied += f.size
                how = "copy"
            elif not how:
                how = "hard link"
            made.append(name)
        return how, copied
    except (OSError, CkptError) as exc:
        gone = isinstance(exc, FileNotFoundError)
        failed.append({"path": d.join(base), "action": "keep", "error": "deleted by another process while being kept"
                       if gone else f"{kept.path}: {_why(exc)}"})
        for name in reversed(made):
            try:
                kept.unlink(name)
            except (OSError, CkptError):
                pass
        return None


def release(storage: Storage, d: Dir, listing: DirListing, moved: dict[str, str],
            failed: list[dict[str, str]], quiet: bool = False) -> tuple[list[FileInfo], set[str]]:
    """Delete the DIR names of each checkpoint of ``moved`` (base -> its name in kept/) that
    kept/ holds whole; ``(files deleted, bases left)``. One kept/ does not hold is left and
    reported in ``failed`` (unless ``quiet``)."""
    done: list[FileInfo] = []
    left: set[str] = set()
    kept = open_kept(storage, d, create=False) if moved else None
    if kept is None:
        return done, set(moved)
    with kept:
        klisting = scan(kept)
        for base, kbase in moved.items():
            here = [f for f in listing.files.get(base, []) if d.lstat(f.name) is not None]
            if not _holds(d, kept, klisting, here, base, kbase):
                if not quiet:
                    failed.append({"path": d.join(base), "action": "keep",
                                   "error": f"{kept.path} does not hold it whole; left in place"})
                left.add(base)
                continue
            files, ok = delete_checkpoint(d, listing, base, failed)
            done += files
            if not ok:
                left.add(base)
    return done, left


def carried_clock(storage: Storage, d: Dir, state: CheckpointState | None,
                  listing: DirListing) -> tuple[float | None, str | None]:
    """TF1 Saver's every-N-hours clock as the last run left it in ``DIR/kept/``, and the latest to
    record with the next one (None: this run's). The clock is None (it starts again from the
    oldest checkpoint) when there is none, or when the Saver was started again: the latest of the
    last run is still in DIR, yet the state file, listing several, no longer names it (a new
    Saver lists only its own checkpoints; its clock starts at its construction). While the state
    file lists one only, that cannot be told yet: the last run's latest is recorded again."""
    got = read_clock(storage, d)
    if got is None:
        return None, None
    t, before = got
    if state is not None and before is not None and before in listing.complete:
        listed = {resolve_recorded(storage, d.path, p, warn=False).base for p in state.all_model_checkpoint_paths}
        if before not in listed:
            return (None, None) if len(listed) > 1 else (t, before)
    return t, None


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
            if d.unlink_if(STATE_FILENAME, raw):
                return None
            continue
        if d.replace(STATE_FILENAME, new.to_text().encode("utf-8"), raw):
            return new
    raise RefusedError(f"{d.join(STATE_FILENAME)}: the state file changed {STATE_ATTEMPTS} times while {who} was "
                       f"updating it (is a trainer saving every few milliseconds?); nothing deleted; run {who} again")


__all__ = ["JOURNAL", "KEEP", "STATE_ATTEMPTS", "TEMP_MAX_AGE", "carried_clock", "delete_checkpoint",
           "delete_checkpoints", "delete_files", "delete_temporaries", "keep_into", "latest_base", "newest_on_disk",
           "read_dir_state", "refuse_special", "release", "update_state", "warn"]
