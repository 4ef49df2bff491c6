"""``ckptool rm``: delete checkpoints and their state-file entries.

Each CHECKPOINT argument is resolved as every command resolves one
(:func:`ckptool.io.layout.locate`); its files are those
:func:`ckptool.io.layout.checkpoint_files` names (``.index``, every
``.data-*``, ``.meta``; a V1 checkpoint's files). Per directory, under its
advisory lock (the one prune takes):

- the state file is rewritten first, atomically, with each removed
  checkpoint's path and timestamp gone, and only if it still holds the bytes
  read (else read again and redone), so it never names a deleted checkpoint;
  the latest checkpoint may be removed only with ``force``, and then the
  newest remaining entry becomes the latest; when no entry remains the state
  file is removed (TF then finds no checkpoint, as in an empty directory);
- then the files are deleted, the ``.index`` (the commit marker) first.

Everything is resolved before anything is deleted: an argument that names no
checkpoint, or the latest without ``force``, deletes nothing at all.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

from ckptool.errors import RefusedError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.layout import (
    V1_SHARD_RE,
    checkpoint_files,
    list_checkpoints,
    locate,
    resolve_recorded,
    step_of,
    v1_files,
)
from ckptool.io.state import (
    CheckpointState,
    parse_state,
    resolve,
    state_path,
    write_state,
)
from ckptool.io.storage import LOCAL
from ckptool.io.urls import storage_for

STATE_ATTEMPTS = 10


@dataclass
class Removed:
    checkpoint: str  # the prefix
    files: list[str]
    bytes: int
    in_state: bool  # it had an entry in the state file (removed with it)
    latest: bool  # it was the latest

    def to_json(self) -> dict:
        return {"checkpoint": self.checkpoint, "files": list(self.files), "bytes": self.bytes,
                "state_entry": self.in_state, "latest": self.latest}


@dataclass
class DirChange:
    directory: str
    latest_before: str | None
    latest_after: str | None
    state_file: str  # "updated", "removed", "unchanged", "none" (there is none)

    def to_json(self) -> dict:
        return {"directory": self.directory, "latest_before": self.latest_before,
                "latest_after": self.latest_after, "state_file": self.state_file}


@dataclass
class RmResult:
    removed: list[Removed] = field(default_factory=list)
    directories: list[DirChange] = field(default_factory=list)
    dry_run: bool = False

    @property
    def bytes_freed(self) -> int:
        return sum(r.bytes for r in self.removed)

    def to_json(self) -> dict:
        return {"removed": [r.to_json() for r in self.removed], "directories": [d.to_json() for d in self.directories],
                "bytes_freed": self.bytes_freed, "dry_run": self.dry_run}


def _norm(storage, path: str) -> str:
    return os.path.normpath(os.path.abspath(path)) if storage is LOCAL else path.rstrip("/")


def _lock(storage, directory: str, dry_run: bool):
    from ckptool.io.lock import lock_directory

    if dry_run:
        return contextlib.nullcontext()
    return lock_directory(storage, directory, timeout=0.0)


def _entry(storage, directory: str, entry: str, targets: dict[str, str]) -> tuple[str | None, str]:
    """What a state entry names, by the one moved-directory rule (layout.resolve_recorded):
    the target key (normalized prefix) it names or None, and the entry as it is written
    back (a moved one by its name inside ``directory``, as prune writes it)."""
    rec = resolve_recorded(storage, directory, entry, warn=False)
    if rec.base is not None:
        full = _norm(storage, storage.join(directory, rec.base) if directory else rec.base)
    else:
        full = _norm(storage, resolve(directory, entry, storage))
    return (full if full in targets else None), (rec.base if rec.moved and rec.base else entry)


def _newest_on_disk(storage, directory: str) -> str | None:
    found = []
    for p in list_checkpoints(storage, directory):
        try:
            t = storage.mtime(p + INDEX_SUFFIX)
        except OSError:
            t = 0.0
        s = step_of(p)
        found.append((s if s is not None else -1, t, p))
    return max(found)[2] if found else None


@dataclass
class _Plan:
    new: object  # the CheckpointState to write, None to remove the file, ... to leave it
    before: str | None
    after: str | None
    hit: set = field(default_factory=set)  # target keys with a state entry
    latest_key: str | None = None  # the target key of the latest, when it is one


def _plan_state(storage, directory: str, raw: bytes | None, targets: dict[str, str], force: bool) -> _Plan:
    """What removing ``targets`` (normalized prefix -> prefix) does to the state ``raw`` holds."""
    if raw is None:
        newest = _newest_on_disk(storage, directory)
        key = _norm(storage, newest) if newest else None
        if key in targets and not force:
            raise RefusedError(f"{targets[key]}: the newest checkpoint in {directory or '.'} (no state file); "
                               f"use --force to remove it")
        return _Plan(..., newest, newest if key not in targets else None, set(), key if key in targets else None)
    state = parse_state(raw, state_path(directory, storage))
    latest_key, latest_entry = _entry(storage, directory, state.model_checkpoint_path, targets)
    if latest_key is not None and not force:
        raise RefusedError(f"{targets[latest_key]}: the latest checkpoint of {directory or '.'}; "
                           f"use --force to remove it")
    ts = list(state.all_model_checkpoint_timestamps)
    with_ts = len(ts) == len(state.all_model_checkpoint_paths) and bool(ts)
    paths, stamps, hit = [], [], set()
    for i, p in enumerate(state.all_model_checkpoint_paths):
        m, written = _entry(storage, directory, p, targets)
        if m is not None:
            hit.add(m)
            continue
        paths.append(written)
        if with_ts:
            stamps.append(ts[i])
    if latest_key is not None:
        hit.add(latest_key)
    before = state.model_checkpoint_path
    if not hit:
        return _Plan(..., before, before)
    if latest_key is None:
        latest = latest_entry
        if not paths or paths[-1] != latest:  # as TF writes it: the latest is listed last
            paths.append(latest)
            if with_ts:
                stamps.append(ts[-1] if ts else 0.0)
    elif not paths:
        return _Plan(None, before, None, hit, latest_key)
    else:
        latest = paths[-1]
    return _Plan(CheckpointState(latest, paths, stamps, state.last_preserved_timestamp), before, latest, hit,
                 latest_key)


def rm(checkpoints, *, force: bool = False, dry_run: bool = False) -> RmResult:
    """Delete each checkpoint of ``checkpoints`` (CHECKPOINT arguments) and its state entries."""
    groups: dict[tuple, dict[str, tuple]] = {}
    for arg in checkpoints:
        storage, path = storage_for(arg)
        found = locate(path, storage)
        prefix = found.prefix
        d = storage.dirname(prefix)
        if storage.basename(prefix) == "variables" and storage.basename(d) == "variables":
            raise RefusedError(f"{arg}: the variables of a SavedModel; not removed (delete the SavedModel "
                               f"directory instead)")
        files = list(found.v1_files) if found.format == "V1" else []
        m = V1_SHARD_RE.match(prefix) if found.format == "V1" else None
        if m and m.group("shard").isdigit():  # one shard named: the whole sharded V1 checkpoint
            spec = f"{m.group('base')}-{'?' * 5}-of-{m.group('num')}"
            if v1_files(storage, spec):
                prefix, files = spec, list(v1_files(storage, spec))
        for f in checkpoint_files(storage, prefix):
            if f not in files:
                files.append(f)
        key = (id(storage), _norm(storage, d or "."))
        groups.setdefault(key, {})[_norm(storage, prefix)] = (storage, d, prefix, files)
    out = RmResult(dry_run=dry_run)
    plans = []
    for targets in groups.values():  # everything checked before anything is deleted
        storage, d = next(iter(targets.values()))[:2]
        names = {k: v[2] for k, v in targets.items()}
        raw = storage.read_if_exists(state_path(d, storage))
        plans.append((storage, d, targets, names, raw, _plan_state(storage, d, raw, names, force)))
    for storage, d, targets, names, raw, plan in plans:
        with _lock(storage, d, dry_run):
            if dry_run:
                status = "none" if raw is None else "unchanged" if plan.new is ... else \
                    "removed" if plan.new is None else "updated"
            else:
                plan, status = _write_state(storage, d, names, force)
            out.directories.append(DirChange(d, plan.before, plan.after, status))
            for tkey, (_, _, prefix, files) in targets.items():
                size = 0
                for f in files:
                    try:
                        size += storage.size(f)
                    except OSError:
                        pass
                out.removed.append(Removed(prefix, files, size, tkey in plan.hit, tkey == plan.latest_key))
                if not dry_run:
                    _delete(storage, prefix, files)
    return out


def _write_state(storage, d: str, names: dict[str, str], force: bool):
    """Apply the plan under the lock: re-read, re-plan, replace only if unchanged meanwhile."""
    spath = state_path(d, storage)
    for _ in range(STATE_ATTEMPTS):
        raw = storage.read_if_exists(spath)
        plan = _plan_state(storage, d, raw, names, force)
        if plan.new is ...:
            return plan, "none" if raw is None else "unchanged"
        if plan.new is None:
            if storage.read_if_exists(spath) == raw:
                storage.remove(spath)
                return plan, "removed"
            continue
        if isinstance(plan.new, CheckpointState) and write_state(d, plan.new, storage, expect=raw):
            return plan, "updated"
    raise RefusedError(f"{spath}: the state file changed {STATE_ATTEMPTS} times while rm was updating it; "
                       f"nothing in {d or '.'} deleted")


def _delete(storage, prefix: str, files: list[str]) -> None:
    order = sorted(files, key=lambda f: (f != prefix + INDEX_SUFFIX, f))
    for f in order:
        try:
            storage.remove(f)
        except FileNotFoundError:
            pass


__all__ = ["DirChange", "Removed", "RmResult", "rm"]
