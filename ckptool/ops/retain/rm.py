"""``ckptool rm``: delete checkpoints and their state-file entries.

Each CHECKPOINT argument is resolved as every command resolves one
(:func:`ckptool.io.layout.checkpoints.locate`); its files are those
:func:`ckptool.io.layout.checkpoints.checkpoint_files` names (``.index``, every
``.data-*``, ``.meta``; a V1 checkpoint's files). Per directory, under its
advisory lock (the one prune takes):

- the state file is rewritten first, atomically, with each removed
  checkpoint's path and timestamp gone, and only if it still holds the bytes
  read (else read again and redone), so it never names a deleted checkpoint;
  the latest checkpoint may be removed only with ``force``, and then the
  newest remaining entry becomes the latest; when no entry remains the state
  file is removed (TF then finds no checkpoint, as in an empty directory);
- then the files are deleted, the ``.index`` (the commit marker) first.

While the latest checkpoint is damaged, the newest intact one is refused too without
``force``: it is what a restart needs.

Everything is resolved before anything is deleted: an argument that names no
checkpoint, or the latest without ``force``, deletes nothing at all.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError, RefusedError
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.lock import lock_open
from ckptool.io.control.state import CheckpointState
from ckptool.io.layout.checkpoints import (
    V1_SHARD_RE,
    locate,
    resolve_recorded,
    step_of,
    strip_file_suffix,
    v1_files,
)
from ckptool.io.layout.listing import DirListing, scan
from ckptool.ops.retain.deletion import (
    KEEP,
    delete_checkpoint,
    latest_base,
    read_dir_state,
    refuse_special,
    update_state,
)
from ckptool.ops.retain.health import Health
from ckptool.ops.retain.journal import end_journal, finish_journal, journaled, write_journal
from ckptool.ops.retain.retention import INTACT

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage

@dataclass
class Removed:
    checkpoint: str  # the prefix
    files: list[str]
    bytes: int
    in_state: bool  # it had an entry in the state file (removed with it)
    latest: bool  # it was the latest

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "files": list(self.files), "bytes": self.bytes,
                "state_entry": self.in_state, "latest": self.latest}


@dataclass
class DirChange:
    directory: str
    latest_before: str | None
    latest_after: str | None
    state_file: str  # "updated", "removed", "unchanged", "none" (there is none)

    def to_json(self) -> dict[str, Any]:
        return {"directory": self.directory, "latest_before": self.latest_before,
                "latest_after": self.latest_after, "state_file": self.state_file}


@dataclass
class RmResult:
    removed: list[Removed] = field(default_factory=list)
    directories: list[DirChange] = field(default_factory=list)
    dry_run: bool = False
    failed: list[dict[str, str]] = field(default_factory=list)  # {"path", "error"}: files that did not go
    not_removed: list[str] = field(default_factory=list)  # checkpoints a file of which did not go

    @property
    def bytes_freed(self) -> int:
        return sum(r.bytes for r in self.removed)

    def to_json(self) -> dict[str, Any]:
        return {"removed": [r.to_json() for r in self.removed], "directories": [d.to_json() for d in self.directories],
                "bytes_freed": self.bytes_freed, "dry_run": self.dry_run, "failed": list(self.failed),
                "not_removed": list(self.not_removed)}


def _entry(storage: Storage, directory: str, entry: str, targets: dict[str, str]) -> tuple[str | None, str]:
    """What a state entry names, by the one rule for recorded paths (layout.checkpoints.resolve_recorded):
    the target base it names or None, and the entry as it is written back (a moved or copied
    one by its name inside ``directory``, as prune writes it)."""
    rec = resolve_recorded(storage, directory, entry, warn=False)
    return (rec.base if rec.base in targets else None), (rec.base if rec.moved and rec.base else entry)


@dataclass
class _Plan:
    new: object  # the CheckpointState to write, None to remove the file, KEEP to leave it
    before: str | None
    after: str | None
    hit: set[str] = field(default_factory=set)  # target bases with a state entry
    latest: str | None = None  # the target base of the latest, when it is one


def _plan_state(storage: Storage, directory: str, state: CheckpointState | None, listing: DirListing,
                targets: dict[str, str], force: bool) -> _Plan:
    """What removing ``targets`` (base -> prefix) does to ``state``; the latest (engine.latest_base)
    is refused without ``force``."""
    latest = latest_base(storage, directory, state, listing)
    if latest in targets and not force:
        what = "the latest checkpoint of" if state is not None else "the newest checkpoint in"
        extra = "" if state is not None else " (no state file)"
        raise RefusedError(f"{targets[latest]}: {what} {directory or '.'}{extra}; use --force to remove it")
    if state is None:
        newest = storage.join(directory, latest) if latest and directory else latest
        return _Plan(KEEP, newest, newest if latest not in targets else None, set(),
                     latest if latest in targets else None)
    latest_key, latest_entry = _entry(storage, directory, state.model_checkpoint_path, targets)
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
        return _Plan(KEEP, before, before)
    if latest_key is None:
        if not paths or paths[-1] != latest_entry:  # as TF writes it: the latest is listed last
            paths.append(latest_entry)
            if with_ts:
                stamps.append(ts[-1] if ts else 0.0)
        new_latest = latest_entry
    elif not paths:
        return _Plan(None, before, None, hit, latest_key)
    else:
        new_latest = paths[-1]
    return _Plan(CheckpointState(new_latest, paths, stamps, state.last_preserved_timestamp), before, new_latest, hit,
                 latest_key)


def _guard_last_intact(storage: Storage, directory: str, state: CheckpointState | None, listing: DirListing,
                       targets: dict[str, str]) -> None:
    """While the latest is damaged (the cheap check of ops/read/integrity; or none of its files
    is there), the newest intact checkpoint is the one a restart needs: refused without force."""
    latest = latest_base(storage, directory, state, listing)
    health = Health(storage, directory, listing)
    if latest is None or health(latest) == INTACT:
        return
    if state is not None:
        order = [b for p in state.all_model_checkpoint_paths + [state.model_checkpoint_path]
                 if (b := resolve_recorded(storage, directory, p, warn=False).base) is not None]
    else:
        order = sorted(listing.complete, key=lambda b: (step_of(b) if step_of(b) is not None else -1,
                                                        listing.mtime(b) or 0.0))
    newest = next((b for b in reversed(order) if b and b != latest and health(b) == INTACT), None)
    if newest in targets:
        what = health.problem(latest) or "none of its files is there"
        raise RefusedError(f"{targets[newest]}: the newest intact checkpoint of {directory or '.'}, and the latest "
                           f"({latest}) is damaged: {what}; use --force to remove it")


@dataclass
class _Group:
    storage: Storage
    directory: str
    targets: dict[str, str] = field(default_factory=dict)  # base -> prefix


def _resolve(checkpoints: list[str]) -> list[_Group]:
    """Every argument resolved (by path identity, grouped by directory) before anything goes."""
    groups: list[_Group] = []
    for arg in checkpoints:
        storage, path = storage_for(arg)
        try:
            found = locate(path, storage)
        except MissingError:
            prefix = _journaled_prefix(storage, path)  # an rm (or prune) a kill stopped half way: finished
            if prefix is None:
                raise
            _group_of(groups, storage, prefix).targets.setdefault(storage.basename(prefix), prefix)
            continue
        prefix = found.prefix
        d = storage.dirname(prefix)
        if storage.basename(prefix) == "variables" and storage.basename(d) == "variables":
            raise RefusedError(f"{arg}: the variables of a SavedModel; not removed (delete the SavedModel "
                               f"directory instead)")
        m = V1_SHARD_RE.match(prefix) if found.format == "V1" else None
        if m and m.group("shard").isdigit():  # one shard named: the whole sharded V1 checkpoint
            spec = f"{m.group('base')}-{'?' * 5}-of-{m.group('num')}"
            if v1_files(storage, spec):
                prefix = spec
        _group_of(groups, storage, prefix).targets.setdefault(storage.basename(prefix), prefix)
    return groups


def _group_of(groups: list[_Group], storage: Storage, prefix: str) -> _Group:
    """The group of ``prefix``'s directory (by path identity), added when new."""
    d = storage.dirname(prefix)
    g = next((g for g in groups if g.storage is storage and storage.same_file(g.directory, d)), None)
    if g is None:
        g = _Group(storage, d)
        groups.append(g)
    return g


def _journaled_prefix(storage: Storage, path: str) -> str | None:
    """``path`` (a prefix, or one of its files) when it names no checkpoint on disk any more but
    its directory's journal names it as going (a kill took its index): the prefix, else None."""
    p = path.rstrip("/")
    prefix = s if (s := strip_file_suffix(p)) is not None else p
    base, d = storage.basename(prefix), storage.dirname(prefix)
    if not base or not storage.isdir(d or "."):
        return None
    try:
        with storage.open_dir(d or ".") as h:
            return prefix if base in journaled(h) else None
    except (OSError, CkptError):
        return None


def rm(checkpoints: list[str], *, force: bool = False, dry_run: bool = False) -> RmResult:
    """Delete each checkpoint of ``checkpoints`` (CHECKPOINT arguments) and its state entries,
    through the deletion engine (:mod:`ckptool.ops.retain.deletion`)."""
    groups = _resolve(list(checkpoints))
    out = RmResult(dry_run=dry_run)
    with contextlib.ExitStack() as stack:
        opened = []
        for g in groups:  # everything checked before anything is deleted
            h = g.storage.open_dir(g.directory or ".")
            stack.callback(h.close)
            listing = scan(h)
            refuse_special(h, listing)
            _, state = read_dir_state(h)
            if not force:
                _guard_last_intact(g.storage, g.directory, state, listing, g.targets)
            opened.append((g, h, _plan_state(g.storage, g.directory, state, listing, g.targets, force)))
        for g, h, plan in opened:
            with contextlib.nullcontext() if dry_run else lock_open(g.storage, h, timeout=0.0):
                _apply(g, h, plan, force, dry_run, out)
    return out


def _apply(g: _Group, h: Dir, plan: _Plan, force: bool, dry_run: bool, out: RmResult) -> None:
    storage, d = g.storage, g.directory
    if dry_run:
        raw, _ = read_dir_state(h)
        status = "none" if raw is None else "unchanged" if plan.new is KEEP else \
            "removed" if plan.new is None else "updated"
        listing = before = scan(h)
    else:
        raw, state = read_dir_state(h)
        before = scan(h)  # what finish_journal takes of a target is this rm's too (a rerun after a kill)
        finish_journal(storage, h, state)  # an interrupted prune or rm is finished first
        listing = scan(h)
        write_journal(h, g.targets)  # (1) what is about to go

        def compute(_raw: bytes | None, st: CheckpointState | None) -> object:
            nonlocal plan
            plan = _plan_state(storage, d, st, listing, g.targets, force)
            return plan.new

        try:
            applied = update_state(h, compute, "rm")  # (2)
        except RefusedError:
            end_journal(h, [])  # nothing deleted: nothing for a later run to finish
            raise
        status = "none" if raw is None and applied is KEEP else "unchanged" if applied is KEEP else \
            "removed" if applied is None else "updated"
    out.directories.append(DirChange(d, plan.before, plan.after, status))
    left = []
    for base, prefix in g.targets.items():
        files = listing.files.get(base) or before.files.get(base, [])
        paths = [storage.join(d, f.name) if d else f.name for f in files]
        removed = Removed(prefix, paths, sum(f.size for f in files), base in plan.hit, base == plan.latest)
        if dry_run:
            out.removed.append(removed)
            continue
        _, ok = delete_checkpoint(h, listing, base, out.failed)  # (3)
        if ok:
            out.removed.append(removed)
        else:
            left.append(base)
            out.not_removed.append(prefix)
    if not dry_run:
        end_journal(h, left)  # (4)


__all__ = ["DirChange", "Removed", "RmResult", "rm"]
