"""Managing a directory of checkpoints: retention after ``save``, ``prune``, ``state``.

Decisions come from the pure engine (:mod:`ckptool.ops.retention`); this module
reads the state file and the directory, applies the decision and rewrites
the state file. Safety rules (CONTRACT.md ``prune``):

- only files directly inside DIR are ever deleted; a state entry that
  resolves elsewhere (``..``, an absolute path outside, a symlink out) is
  left alone with a warning, and stays in the state file as it was;
- files being written (``*.tempstate*``, ``*_temp*``) are never deleted;
- the latest checkpoint is never deleted; a plan that would leave no
  checkpoint on disk is refused;
- the state file is rewritten atomically *before* any file is deleted, so it
  never names a deleted checkpoint. Just before that rewrite the state is
  read again: entries added meanwhile (a writer saving) are kept, and the
  new file replaces the old only if it still holds what was read (else the
  merge is done again; after 10 tries nothing is deleted). The names
  to delete are journaled in ``DIR/.ckptool-prune-pending`` first, so a run
  killed half-way is finished by the next one;
- an advisory lock (``DIR/.ckptool.lock``, local directories only) keeps
  two prunes from interleaving.
"""

from __future__ import annotations

import json
import re
import stat as _stat
import time
import warnings
from dataclasses import dataclass, field

from ckptool.ops import retention as R
from ckptool.errors import CkptError, CkptWarning, CorruptError, MissingError, RefusedError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.layout import STEP_RE, V1_SHARD_RE, step_of
from ckptool.io.state import STATE_FILENAME, CheckpointState, parse_state, read_state, state_path, write_state
from ckptool.io.storage import ANY, LOCAL, storage_for

JOURNAL = ".ckptool-prune-pending"
STATE_ATTEMPTS = 10  # merges of a state file that keeps changing before prune gives up
_DATA_RE = re.compile(r"^(?P<base>.+)\.data-\d{5,}-of-\d{5,}$")
_V1_RE = re.compile(r"^(?P<base>.+)-\d{5,}-of-\d{5,}$")


def _is_temp(name: str) -> bool:
    return ".tempstate" in name or "_temp" in name or name.startswith(STATE_FILENAME + ".tmp")


# --------------------------------------------------------------------------- the directory


@dataclass
class FileInfo:
    name: str
    size: int
    mtime: float
    link_out: bool = False  # a symlink that leads outside the directory
    inode: tuple | None = None  # (st_dev, st_ino): du counts a hard-linked file once


@dataclass
class DirListing:
    """One listing of DIR: checkpoint base names -> their files (temp files excluded)."""

    directory: str
    files: dict[str, list[FileInfo]] = field(default_factory=dict)
    complete: set[str] = field(default_factory=set)  # bases with a .index (or a V1 table)

    def mtime(self, base: str) -> float | None:
        for f in self.files.get(base, ()):
            if f.name == base + INDEX_SUFFIX or f.name == base:
                return f.mtime
        return None

    def size(self, base: str) -> int:
        return sum(f.size for f in self.files.get(base, ()))


def _stat_of(storage, path: str):
    lstat = getattr(storage, "lstat", None)
    if lstat is None:
        try:
            return False, storage.size(path), storage.mtime(path), None
        except (OSError, CkptError):
            return None
    st = lstat(path)
    if st is None:
        return None
    if _stat.S_ISLNK(st.st_mode):
        return True, 0, st.st_mtime_ns / 1e9, None
    if not _stat.S_ISREG(st.st_mode):
        return None
    return False, st.st_size, st.st_mtime_ns / 1e9, (st.st_dev, st.st_ino)


def list_directory(storage, directory: str) -> DirListing:
    """Group DIR's files by the checkpoint they belong to, with one listing."""
    names = storage.listdir(directory)
    out = DirListing(directory)
    candidates: dict[str, str] = {}  # file name -> base
    bases = set()
    for n in names:
        if _is_temp(n):
            continue
        if n.endswith(INDEX_SUFFIX):
            candidates[n] = n[: -len(INDEX_SUFFIX)]
            bases.add(candidates[n])
        else:
            m = _DATA_RE.match(n)
            if m:
                candidates[n] = m.group("base")
    real_dir = None
    for n in names:
        if _is_temp(n) or n in (STATE_FILENAME, JOURNAL, ".ckptool.lock", ".ckptool.toml"):
            continue
        base = candidates.get(n)
        if base is None:
            base = _owner(n, bases)
            if base is None:
                continue
        info = _stat_of(storage, storage.join(directory, n))
        if info is None:
            continue
        is_link, size, mtime, inode = info
        link_out = False
        if is_link:
            if real_dir is None:
                real_dir = storage.realpath(directory)
            target = storage.realpath(storage.join(directory, n))
            link_out = not target.startswith(real_dir.rstrip("/") + "/")
            if not link_out:
                try:
                    size, mtime = storage.size(target), storage.mtime(target)
                except OSError:
                    pass
        out.files.setdefault(base, []).append(FileInfo(n, size, mtime, link_out, inode))
    out.complete = {b for b in bases if any(f.name == b + INDEX_SUFFIX for f in out.files.get(b, ()))}
    return out


def _owner(name: str, bases: set[str]) -> str | None:
    """The longest checkpoint base that ``name`` belongs to (``base.meta``, ``base.<any>``)."""
    i = len(name)
    while True:
        i = name.rfind(".", 0, i)
        if i <= 0:
            return None
        if name[:i] in bases:
            return name[:i]


# --------------------------------------------------------------------------- state entries


@dataclass
class Candidate:
    """A checkpoint under consideration: its state-file name and its base name in DIR."""

    name: str  # as written in the state file (or the base name, for scanned ones)
    base: str | None  # the file name prefix inside DIR; None when it is not safely inside
    timestamp: float | None = None
    step: int | None = None


def _inside_base(storage, directory: str, path: str) -> str | None:
    """The base name when the state path ``path`` names a checkpoint directly in DIR, else None."""
    import os

    if not path or "\0" in path or "\n" in path:
        return None
    if storage is LOCAL:
        if "://" in path:
            return None
        if os.path.isabs(path):
            full = os.path.normpath(path)
            if os.path.dirname(full) != os.path.normpath(os.path.abspath(directory or ".")):
                return None
            base = os.path.basename(full)
        else:
            base = os.path.normpath(path)
            if os.sep in base or (os.altsep and os.altsep in base):
                return None
    else:
        prefix = directory.rstrip("/") + "/"
        if "://" in path or path.startswith("/"):
            if not path.startswith(prefix):
                return None
            base = path[len(prefix):]
        else:
            base = path
        if "/" in base:
            return None
    if base in ("", ".", "..") or _is_temp(base):
        return None
    return base


def _warn(msg: str) -> None:
    warnings.warn(msg, CkptWarning, stacklevel=3)


# --------------------------------------------------------------------------- results


@dataclass
class PruneResult:
    directory: str
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    preserved: list[str] = field(default_factory=list)
    reasons: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # refused: outside DIR or a symlink out
    missing: list[str] = field(default_factory=list)  # listed in the state, not on disk
    bytes_freed: int = 0
    dry_run: bool = False
    last_preserved_timestamp: float = 0.0
    policy: dict = field(default_factory=dict)
    _seen: tuple = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {"kept": list(self.kept), "deleted": list(self.deleted), "preserved": list(self.preserved),
                "directory": self.directory, "reasons": dict(self.reasons), "skipped": list(self.skipped),
                "missing": list(self.missing), "bytes_freed": self.bytes_freed, "dry_run": self.dry_run,
                "last_preserved_timestamp": _finite(self.last_preserved_timestamp), "policy": dict(self.policy)}


# Retention after `save` is the same engine, applied as CheckpointManager.save does.
RetentionResult = PruneResult


# --------------------------------------------------------------------------- the core


def _lock(storage, directory: str, dry_run: bool):
    import contextlib

    lock = getattr(storage, "lock", None)
    if dry_run or lock is None:
        return contextlib.nullcontext()
    return lock(directory)


def _finish_journal(storage, directory: str, listing: DirListing | None = None) -> None:
    """Complete the deletions of a prune that was killed (names it journaled)."""
    path = storage.join(directory, JOURNAL)
    if not storage.isfile(path):
        return
    try:
        names = json.loads(storage.read_bytes(path).decode("utf-8"))
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError
    except (ValueError, UnicodeDecodeError):
        _warn(f"{path}: unreadable prune journal; ignored")
        storage.remove(path)
        return
    state = _read_state_safe(storage, directory)
    listed = set()
    if state is not None:
        for p in state.all_model_checkpoint_paths + [state.model_checkpoint_path]:
            b = _inside_base(storage, directory, p)
            if b:
                listed.add(b)
    listing = listing or list_directory(storage, directory)
    for base in names:
        if base in listed or "/" in base or base in ("", ".", ".."):
            continue
        _delete_files(storage, directory, listing, base)
    storage.remove(path)


def _read_state_safe(storage, directory: str):
    try:
        return read_state(directory, storage)
    except MissingError:
        return None


def _delete_files(storage, directory: str, listing: DirListing, base: str) -> int:
    """Delete every file of checkpoint ``base`` (index first: the commit marker). Bytes freed."""
    files = listing.files.get(base, [])
    order = sorted(files, key=lambda f: (f.name != base + INDEX_SUFFIX, f.name))
    freed = 0
    for f in order:
        try:
            storage.remove(storage.join(directory, f.name))
            freed += f.size
        except FileNotFoundError:
            pass
    return freed


def _state_entries(storage, directory: str, state: CheckpointState) -> list[Candidate]:
    paths = list(state.all_model_checkpoint_paths)
    if not paths or paths[-1] != state.model_checkpoint_path:
        paths.append(state.model_checkpoint_path)  # as TF's generate_checkpoint_state_proto
    ts = list(state.all_model_checkpoint_timestamps)
    out = []
    for i, p in enumerate(paths):
        base = _inside_base(storage, directory, p)
        t = ts[i] if i < len(ts) else None
        out.append(Candidate(p, base, t, step_of(base) if base else None))
    return out


def _order_key(c: Candidate, ts: float):
    return (c.step if c.step is not None else -1, ts)


def _run(directory: str, policy: R.Policy, *, storage, now: float, dry_run: bool, scan: bool,
         new_entry: str | None = None) -> PruneResult:
    res = PruneResult(directory, dry_run=dry_run, policy=policy.to_json())
    if not storage.isdir(directory):
        raise MissingError(f"{directory}: no such directory")
    if not dry_run:
        _finish_journal(storage, directory)
    state = read_state(directory, storage)
    listing = list_directory(storage, directory)
    if state is None and not scan and new_entry is None:
        raise MissingError(f"{directory}: no 'checkpoint' state file here (use --scan to consider every "
                           f"checkpoint on disk, or 'ckptool state --rebuild' to recreate it)")
    entries = _state_entries(storage, directory, state) if state is not None else []
    if new_entry is not None:
        entries = [c for c in entries if c.name != new_entry and c.base != new_entry]
    have_ts = state is not None and bool(state.all_model_checkpoint_timestamps) and \
        len(state.all_model_checkpoint_timestamps) == len(state.all_model_checkpoint_paths)
    unsafe = []
    safe: list[Candidate] = []
    for c in entries:
        if c.base is None:
            unsafe.append(c)
            _warn(f"{storage.join(directory, STATE_FILENAME)}: {c.name!r} is not a checkpoint inside "
                  f"{directory}; left alone")
        elif any(f.link_out for f in listing.files.get(c.base, ())):
            unsafe.append(c)
            _warn(f"{storage.join(directory, c.base)}: a file of this checkpoint is a symlink leading out "
                  f"of {directory}; left alone")
        else:
            safe.append(c)
    res.skipped = [c.name for c in unsafe]
    latest_name = state.model_checkpoint_path if state is not None else None
    latest_base = _inside_base(storage, directory, latest_name) if latest_name else None
    res._seen = (listing, latest_base)  # for du: one listing and one state read per directory

    missing_bases: set[str] = set()
    # Timestamps: the state file's; otherwise the index file's mtime (recover_last_checkpoints).
    if scan:
        by_base: dict[str, Candidate] = {}
        for c in safe:
            by_base.setdefault(c.base, c)
        for base in sorted(listing.complete):
            if base not in by_base and not any(f.link_out for f in listing.files.get(base, ())):
                by_base[base] = Candidate(base, base, None, step_of(base))
        pool = []
        for c in by_base.values():
            t = c.timestamp if (have_ts and c.timestamp is not None) else listing.mtime(c.base)
            if t is None:
                res.missing.append(c.name)
                missing_bases.add(c.base)
                continue
            pool.append((c, min(t, now)))
        pool.sort(key=lambda ct: _order_key(*ct))
        managed = [R.Entry(c.base, t, c.step) for c, t in pool]
        names = {c.base: c.name for c, _ in pool}
        if new_entry is not None:
            managed = R.record(managed, R.Entry(new_entry, now, step_of(new_entry)))
            names[new_entry] = new_entry
        lp0 = state.last_preserved_timestamp if state is not None else 0.0
        decision = R.rethin(managed, policy, now, latest=new_entry or latest_base)
        decision.last_preserved_timestamp = max(decision.last_preserved_timestamp, min(lp0, now))
        unmanaged = []
    else:
        names = {c.base: c.name for c in safe}
        if have_ts:
            rec = R.recover([c.base for c in safe], [now if c.timestamp is None else c.timestamp for c in safe],
                            state.last_preserved_timestamp, now, [c.step for c in safe],
                            continuing=new_entry is not None)
        else:
            stamped = []
            for c in safe:
                t = listing.mtime(c.base)
                if t is None:
                    res.missing.append(c.name)
                    missing_bases.add(c.base)
                    continue
                stamped.append(R.Entry(c.base, min(t, now), c.step))
            lp = state.last_preserved_timestamp if state is not None else None
            if lp is None:
                rec = R.recover([], None, None, now)
            else:
                rec = R.Recovered([], [], min(lp, now))
                seen = {}
                for e in stamped:
                    seen[e.name] = e if e.name not in seen else R.Entry(e.name, e.timestamp, seen[e.name].step)
                rec.managed = list(seen.values())
        if rec.clock_went_back:
            _warn(f"{directory}: the clock is behind the state's last_preserved_timestamp; using now")
        managed = rec.managed
        unmanaged = rec.unmanaged
        if new_entry is not None:
            managed = R.record(managed, R.Entry(new_entry, now, step_of(new_entry)))
            names[new_entry] = new_entry
        decision = R.plan(managed, policy, rec.last_preserved_timestamp, now,
                          latest=new_entry or latest_base)

    for e in unmanaged:
        decision.preserved.append(e)
        decision.reasons[e.name] = [R.UNMANAGED]
    # Never delete the latest checkpoint, even when the state lists it oddly.
    protect = {new_entry} if new_entry else ({latest_base} if latest_base else set())
    rescued = [e for e in decision.deleted if e.name in protect]
    if rescued:
        decision.deleted = [e for e in decision.deleted if e.name not in protect]
        decision.kept = [e for e in managed if e in decision.kept or e in rescued]
        for e in rescued:
            decision.reasons[e.name] = [R.LATEST]
    if decision.deleted:
        survivors = [e.name for e in decision.kept + decision.preserved if e.name in listing.complete]
        survivors += [c.name for c in unsafe]
        if not survivors and new_entry is None:
            raise RefusedError(f"{directory}: refusing a policy that would delete every checkpoint "
                               f"({len(decision.deleted)})")

    def disp(base: str) -> str:
        return storage.join(directory, base) if directory else base

    res.kept = [disp(e.name) for e in decision.kept]
    res.preserved = [disp(e.name) for e in decision.preserved]
    res.deleted = [disp(e.name) for e in decision.deleted]
    res.reasons = {disp(k): v for k, v in decision.reasons.items()
                   if k not in {e.name for e in decision.deleted}}
    res.last_preserved_timestamp = decision.last_preserved_timestamp
    res.bytes_freed = sum(listing.size(e.name) for e in decision.deleted)
    if dry_run:
        return res
    drop = {e.name for e in decision.deleted} | {e.name for e in decision.preserved}
    drop |= missing_bases  # mtime mode: as recover_last_checkpoints, missing ones go
    if decision.deleted:
        storage.write_bytes_atomic(storage.join(directory, JOURNAL),
                                   json.dumps([e.name for e in decision.deleted]).encode("utf-8"))
    for _ in range(STATE_ATTEMPTS):
        # Merge into the state as it is now (a writer may have saved since we planned), and
        # replace it only if it still is: a concurrent update is merged again, never lost.
        expect, current = _current_state(storage, directory, state)
        new_state = _merge_state(storage, directory, state, current, decision, names, drop, unsafe,
                                 have_ts or scan or new_entry is not None, new_entry)
        if new_state is None or not (new_entry is not None or drop or decision.deleted or scan or
                                     _changed(state, new_state)):
            break
        if write_state(directory, new_state, storage, expect=expect):
            break
    else:
        if decision.deleted:
            storage.remove(storage.join(directory, JOURNAL))
        raise RefusedError(f"{directory}: the state file changed {STATE_ATTEMPTS} times while prune was "
                           f"updating it (is a trainer saving every few milliseconds?); nothing deleted; "
                           f"run prune again")
    freed = 0
    for e in decision.deleted:
        freed += _delete_files(storage, directory, listing, e.name)
    res.bytes_freed = freed
    if decision.deleted:
        storage.remove(storage.join(directory, JOURNAL))
    return res


def _finite(x):
    """JSON has no NaN or infinity: such timestamps (a hostile state file) show as null."""
    import math

    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _changed(old, new) -> bool:
    return old is None or old.to_text() != new.to_text()


def _current_state(storage, directory: str, planned: CheckpointState | None):
    """``(bytes, state)`` of the state file now, to merge into and to replace only if
    unchanged; ``(ANY, planned)`` when there was none when we planned (nothing to merge)."""
    if planned is None:
        return ANY, None
    path = state_path(directory, storage)
    raw = storage.read_if_exists(path)
    return raw, (parse_state(raw, path) if raw is not None else planned)


def _merge_state(storage, directory, planned: CheckpointState | None, current: CheckpointState | None,
                 decision: R.Decision, names: dict[str, str], drop: set[str], unsafe: list[Candidate],
                 with_ts: bool, new_entry: str | None) -> CheckpointState | None:
    """The state to write: ``current`` (the state file as it is now, or ``planned`` when
    it has gone) with the decision applied, so entries a writer added since we planned
    stay."""
    kept = {e.name: e for e in decision.kept}
    paths: list[str] = []
    stamps: list[float] = []
    cur_ts = list(current.all_model_checkpoint_timestamps) if current is not None else []
    cur_paths = list(current.all_model_checkpoint_paths) if current is not None else []
    seen = set()
    unsafe_names = {c.name for c in unsafe}
    planned_names = set(names.values()) | set(names)
    # Planned entries, in the engine's order (oldest first).
    order = [e.name for e in decision.kept]
    placed = []
    for base in order:
        placed.append((names.get(base, base), kept[base].timestamp))
    # Entries of the current file we did not plan for (a concurrent writer) or refused to touch.
    extra = []
    for i, p in enumerate(cur_paths):
        base = _inside_base(storage, directory, p)
        if p in unsafe_names or (p not in planned_names and (base is None or base not in names)
                                 and base not in drop):
            t = cur_ts[i] if i < len(cur_ts) else time.time()
            extra.append((p, t, p in unsafe_names))
    unsafe_first = [x for x in extra if x[2]]
    newer = [x for x in extra if not x[2]]
    for p, t, _ in unsafe_first:
        if p not in seen:
            seen.add(p)
            paths.append(p)
            stamps.append(t)
    for p, t in placed:
        if p not in seen:
            seen.add(p)
            paths.append(p)
            stamps.append(t)
    for p, t, _ in newer:
        if p not in seen:
            seen.add(p)
            paths.append(p)
            stamps.append(t)
    latest = current.model_checkpoint_path if current is not None else None
    if new_entry is not None and (planned is None or current is None
                                  or current.model_checkpoint_path == planned.model_checkpoint_path):
        latest = new_entry
    if latest is None or (latest in {names.get(b, b) for b in drop} and paths):
        latest = paths[-1] if paths else latest
    if latest is None:
        return None
    if not paths or paths[-1] != latest:
        if latest in seen:
            i = paths.index(latest)
            stamps.append(stamps.pop(i))
            paths.append(paths.pop(i))
        else:
            paths.append(latest)
            stamps.append(time.time())
    lp = decision.last_preserved_timestamp
    if current is not None and current.last_preserved_timestamp > lp:
        lp = current.last_preserved_timestamp
    if not with_ts:
        stamps = []
        lp = current.last_preserved_timestamp if current is not None else 0.0
    return CheckpointState(latest, paths, stamps, lp)


# --------------------------------------------------------------------------- public API


def record_save(directory: str, prefix: str, *, max_to_keep: int | None, keep_every_n_hours: float | None,
                now: float | None = None, storage=None) -> PruneResult:
    """After saving ``prefix`` (a checkpoint in ``directory``): record it in the state file and
    apply retention, as ``tf.train.CheckpointManager.save`` does (relative paths, timestamps,
    last_preserved_timestamp)."""
    if storage is None:
        storage, directory = storage_for(directory)
    now = time.time() if now is None else now
    base = storage.basename(prefix)
    if storage.dirname(prefix) and _norm(storage, storage.dirname(prefix)) != _norm(storage, directory):
        raise CkptError(f"{prefix}: not in {directory}; cannot record it in that state file")
    policy = R.Policy(max_to_keep or None, keep_every_n_hours or None)
    with _lock(storage, directory, False):
        return _run(directory, policy, storage=storage, now=now, dry_run=False, scan=False, new_entry=base)


def _norm(storage, path: str) -> str:
    import os

    return os.path.normpath(os.path.abspath(path)) if storage is LOCAL else path.rstrip("/")


def prune(directory: str, *, max_to_keep: int | None = 5, keep_every_n_hours: float | None = None,
          keep_steps_every: int | None = None, min_age: float | None = None, keep=(), scan: bool = False,
          dry_run: bool = False, now: float | None = None, storage=None) -> PruneResult:
    """Apply retention to ``directory`` (see the module docstring for the safety rules).

    ``max_to_keep`` None or 0 keeps every checkpoint in the state; ``min_age`` is in
    seconds; ``keep`` names checkpoints (base names) that are never deleted.
    """
    if storage is None:
        storage, directory = storage_for(directory)
    if directory != "/" and directory.endswith("/") and "://" not in directory:
        directory = directory.rstrip("/")
    if max_to_keep is not None and max_to_keep < 0:
        raise CkptError(f"max_to_keep must be >= 0, not {max_to_keep}")
    if keep_steps_every is not None and keep_steps_every <= 0:
        raise CkptError(f"keep_steps_every must be > 0, not {keep_steps_every}")
    now = time.time() if now is None else now
    policy = R.Policy(max_to_keep or None, keep_every_n_hours or None, keep_steps_every, min_age,
                      frozenset(keep))
    with _lock(storage, directory, dry_run):
        return _run(directory, policy, storage=storage, now=now, dry_run=dry_run, scan=scan)


# --------------------------------------------------------------------------- state


def show_state(directory: str, storage=None) -> dict:
    """The state file as a JSON-able dict, with each entry's existence on disk."""
    if storage is None:
        storage, directory = storage_for(directory)
    state = read_state(directory, storage)
    if state is None:
        raise MissingError(f"{directory}: no 'checkpoint' state file here")
    from ckptool.io.layout import checkpoint_exists
    from ckptool.io.state import resolve

    entries = []
    ts = state.all_model_checkpoint_timestamps
    for i, p in enumerate(state.all_model_checkpoint_paths):
        try:
            exists = checkpoint_exists(storage, resolve(directory, p, storage))
        except (CkptError, OSError, ValueError):
            exists = False
        entries.append({"path": p, "timestamp": _finite(ts[i]) if i < len(ts) else None, "exists": exists,
                        "step": step_of(p)})
    return {"directory": directory, "model_checkpoint_path": state.model_checkpoint_path,
            "all_model_checkpoint_paths": list(state.all_model_checkpoint_paths),
            "all_model_checkpoint_timestamps": [_finite(t) for t in ts],
            "last_preserved_timestamp": _finite(state.last_preserved_timestamp), "entries": entries}


def rebuild_state(directory: str, *, dry_run: bool = False, storage=None) -> CheckpointState:
    """Recreate the state file from the complete checkpoints in DIR, oldest first by step then
    mtime (recover_last_checkpoints uses the mtimes); timestamps are the index mtimes."""
    if storage is None:
        storage, directory = storage_for(directory)
    with _lock(storage, directory, dry_run):
        listing = list_directory(storage, directory)
        found = []
        for base in listing.complete:
            if any(f.link_out for f in listing.files.get(base, ())):
                _warn(f"{storage.join(directory, base)}: a symlink out of {directory}; not recorded")
                continue
            found.append((step_of(base), listing.mtime(base), base))
        if not found:
            raise MissingError(f"{directory}: no complete checkpoint (no *.index file) to rebuild the state from")
        found.sort(key=lambda x: (x[0] if x[0] is not None else -1, x[1], x[2]))
        old = _read_state_safe_any(storage, directory)
        lp = old.last_preserved_timestamp if old is not None else 0.0
        st = CheckpointState(found[-1][2], [b for _, _, b in found], [t for _, t, _ in found], lp)
        if not dry_run:
            write_state(directory, st, storage)
        return st


def _read_state_safe_any(storage, directory):
    try:
        return read_state(directory, storage)
    except CkptError:
        return None


def relative_state(directory: str, *, dry_run: bool = False, storage=None) -> tuple[CheckpointState, list[str]]:
    """Rewrite absolute paths inside DIR as relative ones (also those of a moved directory that
    name a checkpoint present here). Paths outside DIR are kept, with a warning. Returns the
    new state and the paths changed."""
    if storage is None:
        storage, directory = storage_for(directory)
    import os

    with _lock(storage, directory, dry_run):
        state = read_state(directory, storage)
        if state is None:
            raise MissingError(f"{directory}: no 'checkpoint' state file here")
        changed = []

        def rel(p: str) -> str:
            if storage is LOCAL and os.path.isabs(p):
                base = _inside_base(storage, directory, p)
                if base is None:
                    moved = re.split(r"[\\/]", p.rstrip("/\\"))[-1]
                    if moved and storage.isfile(storage.join(directory, moved + INDEX_SUFFIX)):
                        base = moved
                if base is not None:
                    changed.append(p)
                    return base
                _warn(f"{p}: outside {directory}; kept as it is")
            elif storage is not LOCAL and "://" in p:
                base = _inside_base(storage, directory, p)
                if base:
                    changed.append(p)
                    return base
            return p

        new = CheckpointState(rel(state.model_checkpoint_path), [rel(p) for p in state.all_model_checkpoint_paths],
                              list(state.all_model_checkpoint_timestamps), state.last_preserved_timestamp)
        if changed and not dry_run:
            write_state(directory, new, storage)
        return new, sorted(set(changed))


# --------------------------------------------------------------------------- fleets (prune --recursive, du)

POLICY_FILE = ".ckptool.toml"
_POLICY_KEYS = {"max_to_keep", "keep_every_n_hours", "keep_steps_every", "min_age", "keep"}


def _load_toml(storage, path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            from ckptool.errors import UnsupportedError

            raise UnsupportedError(f"{path}: reading .ckptool.toml on Python < 3.11 needs the 'tomli' "
                                   f"package") from None
    raw = storage.read_bytes(path)
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CorruptError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise CorruptError(f"{path}: {exc}") from None
    bad = sorted(set(doc) - _POLICY_KEYS)
    if bad:
        raise CorruptError(f"{path}: unknown key {bad[0]!r} (known: {', '.join(sorted(_POLICY_KEYS))})")
    out = {}
    for key, value in doc.items():
        ok = True
        if key in ("max_to_keep", "keep_steps_every"):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= (0 if key == "max_to_keep" else 1)
        elif key == "keep_every_n_hours":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        elif key == "min_age":
            if isinstance(value, str):
                try:
                    value = R.parse_duration(value)
                except ValueError:
                    ok = False
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        elif key == "keep":
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not ok:
            raise CorruptError(f"{path}: bad value for {key}: {value!r}")
        out[key] = value
    return out


def effective_policy(root: str, directory: str, defaults: dict, storage=LOCAL) -> tuple[dict, list[str]]:
    """The policy for a run directory: ``defaults`` (the command line), overridden by each
    ``.ckptool.toml`` from ROOT down to the directory (the nearest wins). Also the files read."""
    import os

    policy = dict(defaults)
    rel = os.path.relpath(directory, root) if storage is LOCAL else directory[len(root.rstrip("/")) + 1:]
    parts = [] if rel in (".", "") else rel.replace(os.sep, "/").split("/")
    chain = [root] + [storage.join(root, *parts[: i + 1]) for i in range(len(parts))]
    used = []
    for d in chain:
        p = storage.join(d, POLICY_FILE)
        if storage.isfile(p):
            policy.update(_load_toml(storage, p))
            used.append(p)
    return policy, used


def find_runs(root: str, *, exclude=(), scan: bool = False, storage=None) -> list[str]:
    """Directories below ROOT (ROOT included) holding checkpoints: a state file, or with ``scan``
    an ``*.index`` file. Symlinked directories are not followed; ``*_temp*`` staging directories
    and directories matching an ``exclude`` glob (against the path relative to ROOT or the
    name) are skipped."""
    import fnmatch
    import os

    if storage is None:
        storage, root = storage_for(root)
    if not storage.isdir(root):
        raise MissingError(f"{root}: no such directory")
    out = []

    def excluded(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(name, g) for g in exclude)

    if storage is LOCAL:
        for d, dirs, files in os.walk(root, followlinks=False):
            rel = os.path.relpath(d, root).replace(os.sep, "/")
            dirs[:] = sorted(x for x in dirs if not _is_temp(x) and not excluded(
                (x if rel == "." else f"{rel}/{x}")))
            if STATE_FILENAME in files or (scan and any(f.endswith(INDEX_SUFFIX) and not _is_temp(f)
                                                        for f in files)):
                out.append(d)
        return out
    find = getattr(storage, "find", None)
    if find is None:
        from ckptool.errors import UnsupportedError

        raise UnsupportedError(f"{root}: this storage cannot list a tree")
    seen = set()
    for path in find(root):
        d, name = path.rsplit("/", 1)
        rel = d[len(root.rstrip("/")) + 1:] if d != root.rstrip("/") else "."
        if any(_is_temp(p) for p in rel.split("/")) or (rel != "." and any(
                excluded("/".join(rel.split("/")[: i + 1])) for i in range(rel.count("/") + 1))):
            continue
        if name == STATE_FILENAME or (scan and name.endswith(INDEX_SUFFIX) and not _is_temp(name)):
            seen.add(d)
    return sorted(seen)


@dataclass
class TreeResult:
    root: str
    runs: dict = field(default_factory=dict)  # directory -> PruneResult
    errors: dict = field(default_factory=dict)  # directory -> message
    dry_run: bool = False

    def to_json(self) -> dict:
        runs = {}
        for d, r in self.runs.items():
            doc = r.to_json()
            doc["counts"] = {"kept": len(r.kept), "deleted": len(r.deleted), "preserved": len(r.preserved)}
            runs[d] = doc
        for d, msg in self.errors.items():
            runs[d] = {"error": msg}
        return {"root": self.root, "dry_run": self.dry_run, "directories": runs, "total": self.total()}

    def total(self) -> dict:
        rs = list(self.runs.values())
        return {"directories": len(rs) + len(self.errors), "failed": len(self.errors),
                "kept": sum(len(r.kept) for r in rs), "deleted": sum(len(r.deleted) for r in rs),
                "preserved": sum(len(r.preserved) for r in rs), "bytes_freed": sum(r.bytes_freed for r in rs)}


def prune_tree(root: str, *, max_to_keep: int | None = 5, keep_every_n_hours: float | None = None,
               keep_steps_every: int | None = None, min_age: float | None = None, keep=(), exclude=(),
               scan: bool = False, dry_run: bool = False, now: float | None = None, storage=None,
               progress=None, discover_all: bool = False) -> TreeResult:
    """``prune --recursive``: each run directory below ROOT pruned as :func:`prune` would, with
    its effective policy; a directory's failure is recorded and the others still run."""
    if storage is None:
        storage, root = storage_for(root)
    if root != "/" and root.endswith("/") and "://" not in root:
        root = root.rstrip("/")
    now = time.time() if now is None else now
    defaults = {"max_to_keep": max_to_keep, "keep_every_n_hours": keep_every_n_hours,
                "keep_steps_every": keep_steps_every, "min_age": min_age, "keep": list(keep)}
    out = TreeResult(root, dry_run=dry_run)
    runs = find_runs(root, exclude=exclude, scan=scan or discover_all, storage=storage)
    for i, d in enumerate(runs):
        if progress:
            progress(i, len(runs), d)
        try:
            pol, _ = effective_policy(root, d, defaults, storage)
            out.runs[d] = prune(d, max_to_keep=pol["max_to_keep"] or None, keep_every_n_hours=pol["keep_every_n_hours"],
                                keep_steps_every=pol["keep_steps_every"], min_age=pol["min_age"], keep=pol["keep"],
                                scan=scan or not storage.isfile(storage.join(d, STATE_FILENAME)),
                                dry_run=dry_run, now=now, storage=storage)
        except (CkptError, OSError) as exc:
            out.errors[d] = str(exc) if isinstance(exc, CkptError) else f"{getattr(exc, 'filename', d)}: {exc.strerror or exc}"
    return out


@dataclass
class RunUsage:
    directory: str
    checkpoints: int
    bytes: int
    latest: str | None
    latest_step: int | None
    latest_age: float | None
    would_free: int | None
    error: str | None = None

    def to_json(self) -> dict:
        return {"directory": self.directory, "checkpoints": self.checkpoints, "bytes": self.bytes,
                "latest": self.latest, "latest_step": self.latest_step, "latest_age_seconds": self.latest_age,
                "would_free": self.would_free, "error": self.error}


def du(root: str, *, max_to_keep: int | None = 5, keep_every_n_hours: float | None = None,
       keep_steps_every: int | None = None, min_age: float | None = None, exclude=(), now: float | None = None,
       storage=None) -> list[RunUsage]:
    """Per run directory below ROOT: complete checkpoints, their bytes (each file counted once,
    hard links included), the latest and its age, and what prune would free with the effective
    policy. Sorted by bytes, largest first."""
    if storage is None:
        storage, root = storage_for(root)
    now = time.time() if now is None else now
    plan = prune_tree(root, max_to_keep=max_to_keep, keep_every_n_hours=keep_every_n_hours,
                      keep_steps_every=keep_steps_every, min_age=min_age, exclude=exclude,
                      dry_run=True, now=now, storage=storage, discover_all=True)
    seen_inodes: set = set()
    out = []
    for d in list(plan.runs) + list(plan.errors):
        r = plan.runs.get(d)
        seen = r._seen if r is not None else None
        try:
            listing = seen[0] if seen else list_directory(storage, d)
        except CkptError as exc:
            out.append(RunUsage(d, 0, 0, None, None, None, None, str(exc)))
            continue
        total = 0
        for base in listing.complete:
            for f in listing.files.get(base, ()):
                if f.link_out:
                    continue
                key = f.inode or (d, f.name)
                if key in seen_inodes:
                    continue
                seen_inodes.add(key)
                total += f.size
        if seen:
            latest = seen[1]
        else:
            state = _read_state_safe_any(storage, d)
            latest = _inside_base(storage, d, state.model_checkpoint_path) if state is not None else None
        if latest is None or latest not in listing.complete:
            ranked = sorted(listing.complete, key=lambda b: (step_of(b) if step_of(b) is not None else -1,
                                                             listing.mtime(b) or 0))
            latest = ranked[-1] if ranked else None
        mt = listing.mtime(latest) if latest else None
        out.append(RunUsage(d, len(listing.complete), total, storage.join(d, latest) if latest else None,
                            step_of(latest) if latest else None, None if mt is None else max(0.0, now - mt),
                            r.bytes_freed if r is not None else None, plan.errors.get(d)))
    out.sort(key=lambda u: (-u.bytes, u.directory))
    return out


__all__ = ["prune_tree", "du", "find_runs", "effective_policy", "TreeResult", "RunUsage", "record_save", "prune", "PruneResult", "RetentionResult", "show_state", "rebuild_state",
           "relative_state", "list_directory"]
