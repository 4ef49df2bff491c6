"""``state``: show, rebuild and relativize a directory's ``checkpoint`` state file.

:func:`state_document` is the one renderer of a state as JSON: ``state --json`` and
``state --rebuild|--relative --dry-run --json`` print the same shape."""

from __future__ import annotations

import os

from ckptool.errors import CkptError, MissingError
from ckptool.io.dirfd import open_dir
from ckptool.io.layout import checkpoint_exists, resolve_recorded, step_of
from ckptool.io.listing import scan
from ckptool.io.lock import lock_directory
from ckptool.io.state import STATE_FILENAME, CheckpointState, read_state, resolve
from ckptool.io.storage import LOCAL
from ckptool.io.urls import storage_for
from ckptool.ops.retain.plan import finite, warn


def _storage(directory: str, storage):
    if storage is None:
        storage, directory = storage_for(directory)
    return storage, directory


def state_document(directory: str, state: CheckpointState, storage=LOCAL) -> dict:
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
        entries.append({"path": p, "timestamp": finite(ts[i]) if i < len(ts) else None, "exists": exists,
                        "step": step_of(p)})
    return {"directory": directory, "model_checkpoint_path": state.model_checkpoint_path,
            "all_model_checkpoint_paths": list(state.all_model_checkpoint_paths),
            "all_model_checkpoint_timestamps": [finite(t) for t in ts],
            "last_preserved_timestamp": finite(state.last_preserved_timestamp) or None, "entries": entries}


def show_state(directory: str, storage=None) -> dict:
    """The state file of DIR as :func:`state_document`."""
    storage, directory = _storage(directory, storage)
    state = read_state(directory, storage)
    if state is None:
        raise MissingError(f"{directory}: no 'checkpoint' state file here")
    return state_document(directory, state, storage)


def _lock(storage, directory: str, dry_run: bool):
    import contextlib

    return contextlib.nullcontext() if dry_run else lock_directory(storage, directory, timeout=0.0)


def rebuild_state(directory: str, *, dry_run: bool = False, storage=None) -> CheckpointState:
    """Recreate the state file from the complete checkpoints in DIR (V1 ones included),
    oldest first by step then mtime (recover_last_checkpoints uses the mtimes);
    timestamps are the index (V1 file) mtimes."""
    storage, directory = _storage(directory, storage)
    with _lock(storage, directory, dry_run), open_dir(storage, directory) as d:
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
        try:
            old = read_state(directory, storage)
        except CkptError:
            old = None
        lp = old.last_preserved_timestamp if old is not None else 0.0
        st = CheckpointState(found[-1][2], [b for _, _, b in found], [t for _, t, _ in found], lp)
        if not dry_run:
            d.replace(STATE_FILENAME, st.to_text().encode("utf-8"))
        return st


def relative_state(directory: str, *, dry_run: bool = False, storage=None) -> tuple[CheckpointState, list[str]]:
    """Rewrite absolute paths inside DIR as relative ones (also those of a moved directory that
    name a checkpoint present here). Paths outside DIR are kept, with a warning. Returns the
    new state and the paths changed."""
    storage, directory = _storage(directory, storage)
    with _lock(storage, directory, dry_run):
        state = read_state(directory, storage)
        if state is None:
            raise MissingError(f"{directory}: no 'checkpoint' state file here")
        changed = []

        def rel(p: str) -> str:
            if not (storage.isabs(p) or "://" in p):
                return p
            rec = resolve_recorded(storage, directory, p, warn=False)
            if rec.base is not None:
                changed.append(p)
                return rec.base
            if storage is LOCAL and os.path.isabs(p):
                warn(f"{p}: outside {directory}; kept as it is")
            return p

        new = CheckpointState(rel(state.model_checkpoint_path), [rel(p) for p in state.all_model_checkpoint_paths],
                              list(state.all_model_checkpoint_timestamps), state.last_preserved_timestamp)
        if changed and not dry_run:
            with open_dir(storage, directory) as d:
                d.replace(STATE_FILENAME, new.to_text().encode("utf-8"))
        return new, sorted(set(changed))


__all__ = ["rebuild_state", "relative_state", "show_state", "state_document"]
