"""``state``: show, rebuild and relativize a directory's ``checkpoint`` state file.

:func:`state_document` is the one renderer of a state as JSON: ``state --json`` and
``state --rebuild|--relative --dry-run --json`` print the same shape."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError
from ckptool.format.json_numbers import json_timestamp
from ckptool.io.backends.local import LOCAL
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.lock import lock_open
from ckptool.io.control.state import CheckpointState, read_state, resolve
from ckptool.io.layout.checkpoints import checkpoint_exists, resolve_recorded, step_of
from ckptool.io.layout.listing import scan
from ckptool.ops.retain.deletion import KEEP, read_dir_state, refuse_special, update_state, warn
from ckptool.ops.retain.journal import finish_journal

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def _storage(directory: str, storage: Storage | None) -> tuple[Storage, str]:
    if storage is None:
        storage, directory = storage_for(directory)
    return storage, directory


def state_document(directory: str, state: CheckpointState, storage: Storage = LOCAL) -> dict[str, Any]:
    """The state as a JSON-able dict, each entry with its existence on disk (a moved
    directory's absolute paths resolve to the checkpoint of the same name here)."""
    entries = []
    ts = state.all_model_checkpoint_timestamps
    for i, p in enumerate(state.all_model_checkpoint_paths):
        try:
            rec = resolve_recorded(storage, directory, p, warn=False)
            target = storage.join(directory, rec.base) if rec.base else resolve(directory, p, storage)
            exists = checkpoint_exists(storage, target)
        except (CkptError, OSError, ValueError):
            exists = False
        entries.append({"path": p, "timestamp": json_timestamp(ts[i]) if i < len(ts) else None, "exists": exists,
                        "step": step_of(p)})
    return {"directory": directory, "model_checkpoint_path": state.model_checkpoint_path,
            "all_model_checkpoint_paths": list(state.all_model_checkpoint_paths),
            "all_model_checkpoint_timestamps": [json_timestamp(t) for t in ts],
            "last_preserved_timestamp": json_timestamp(state.last_preserved_timestamp) or None, "entries": entries}


def show_state(directory: str, storage: Storage | None = None) -> dict[str, Any]:
    """The state file of DIR as :func:`state_document`."""
    storage, directory = _storage(directory, storage)
    state = read_state(directory, storage)
    if state is None:
        raise MissingError(f"{directory}: no 'checkpoint' state file here")
    return state_document(directory, state, storage)


def rebuild_state(directory: str, *, dry_run: bool = False, storage: Storage | None = None,
                  max_to_keep: int | None = None) -> CheckpointState:
    """Recreate the state file from the complete checkpoints in DIR (V1 ones included),
    oldest first by step then mtime (recover_last_checkpoints uses the mtimes), the newest
    ``max_to_keep`` only when given (the older stay on disk, unlisted, so a trainer's
    CheckpointManager never deletes them: kept means kept, as prune writes the state);
    timestamps are the index (V1 file) mtimes. Under DIR's lock, an interrupted prune or rm
    is finished first (its checkpoints are never recorded again), and the file is replaced
    by the engine's compare-and-swap."""
    storage, directory = _storage(directory, storage)
    with storage.open_dir(directory) as d, (contextlib.nullcontext() if dry_run else lock_open(storage, d,
                                                                                                 timeout=0.0)):
        listing = scan(d)
        refuse_special(d, listing)
        if not dry_run:
            try:
                _, state = read_dir_state(d)
            except CkptError:
                state = None
            finish_journal(storage, d, state)
            listing = scan(d)
        found = []
        for base in listing.complete:
            if listing.links_out(base):
                warn(f"{storage.join(directory, base)}: a symlink out of {directory}; not recorded")
                continue
            found.append((step_of(base), listing.mtime(base) or 0.0, base))
        if not found:
            raise MissingError(f"{directory}: no complete checkpoint (no *.index file, no V1 checkpoint) "
                               f"to rebuild the state from")
        found.sort(key=lambda x: (x[0] if x[0] is not None else -1, x[1], x[2]))
        if max_to_keep is not None:
            found = found[-max_to_keep:]

        def compute(_raw: bytes | None, old: CheckpointState | None) -> CheckpointState:
            lp = old.last_preserved_timestamp if old is not None else 0.0
            return CheckpointState(found[-1][2], [b for _, _, b in found], [t for _, t, _ in found], lp)

        if dry_run:
            try:
                _, old = read_dir_state(d)
            except CkptError:
                old = None
            return compute(None, old)
        return update_state(d, compute, "state --rebuild", lenient=True)  # type: ignore[no-any-return]


def relative_state(directory: str, *, dry_run: bool = False,
                   storage: Storage | None = None) -> tuple[CheckpointState, list[str]]:
    """Rewrite absolute paths inside DIR as relative ones (also those of a moved or copied
    directory that name a checkpoint present here: layout.checkpoints.resolve_recorded). Paths outside
    DIR are kept, with a warning. Returns the new state and the paths changed."""
    storage, directory = _storage(directory, storage)
    with storage.open_dir(directory) as d, (contextlib.nullcontext() if dry_run else lock_open(storage, d,
                                                                                                 timeout=0.0)):
        refuse_special(d)
        changed: list[str] = []

        def compute(_raw: bytes | None, state: CheckpointState | None) -> object:
            if state is None:
                raise MissingError(f"{directory}: no 'checkpoint' state file here")
            changed.clear()

            def rel(p: str) -> str:
                if not (storage.isabs(p) or "://" in p):
                    return p
                rec = resolve_recorded(storage, directory, p, warn=False)
                if rec.base is not None:
                    changed.append(p)
                    return rec.base
                if "://" not in p:
                    warn(f"{p}: outside {directory}; kept as it is")
                return p

            new = CheckpointState(rel(state.model_checkpoint_path),
                                  [rel(p) for p in state.all_model_checkpoint_paths],
                                  list(state.all_model_checkpoint_timestamps), state.last_preserved_timestamp)
            planned[:] = [new]
            return new if changed and not dry_run else KEEP

        planned: list[CheckpointState] = []
        update_state(d, compute, "state --relative")
        return planned[0], sorted(set(changed))


__all__ = ["rebuild_state", "relative_state", "show_state", "state_document"]
