"""``du``: where the space goes, per run directory below a ROOT."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.json_numbers import json_timestamp
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.state import STATE_FILENAME
from ckptool.io.layout.checkpoints import step_of
from ckptool.io.layout.keptdir import is_kept_dir, kept_path
from ckptool.io.layout.listing import scan
from ckptool.io.layout.walk import TREE_STATE_READS
from ckptool.io.safety.dirfd import open_dir
from ckptool.ops.retain.deletion import latest_base, newest_on_disk, read_dir_state
from ckptool.ops.retain.fleet import prune_tree
from ckptool.ops.retain.policy_args import UNSET
from ckptool.ops.retain.prune_plan import state_entries

if TYPE_CHECKING:
    from ckptool.io.base import Storage


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
    temp_files: int = 0
    temp_bytes: int = 0
    kept_checkpoints: int = 0  # of them, in DIR/kept/ (part of the run)
    kept_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"directory": self.directory, "checkpoints": self.checkpoints, "bytes": self.bytes,
                "latest": self.latest, "latest_step": self.latest_step, "latest_age_seconds": self.latest_age,
                "would_free": self.would_free, "temp_files": self.temp_files, "temp_bytes": self.temp_bytes,
                "kept_checkpoints": self.kept_checkpoints, "kept_bytes": self.kept_bytes, "error": self.error}


def du(root: str, *, max_to_keep: Any = UNSET, keep_every_n_hours: Any = UNSET, keep_steps_every: Any = UNSET,
       min_age: Any = UNSET, exclude: tuple[str, ...] = (), now: float | None = None,
       storage: Storage | None = None) -> list[RunUsage]:
    """Per run directory below ROOT: complete checkpoints (V1 included), the bytes of their
    files (each file counted once, hard links included), temporary files of writers apart,
    the latest and its age (from the timestamp retention uses: the state file's where it
    records them, else the file's mtime), and what prune would free with the effective policy (a
    hard-linked file only when its last link would go). A run's ``kept/`` is counted in its row
    (``kept_checkpoints``, ``kept_bytes``), never a row of its own. Sorted by bytes, largest first."""
    if storage is None:
        storage, root = storage_for(root)
    with storage.listed(root, TREE_STATE_READS):  # an object store: one listing, the state files at once
        return _du(root, storage, max_to_keep, keep_every_n_hours, keep_steps_every, min_age, exclude, now)


def _du(root: str, storage: Storage, max_to_keep: Any, keep_every_n_hours: Any, keep_steps_every: Any,
        min_age: Any, exclude: tuple[str, ...], now: float | None) -> list[RunUsage]:
    now = time.time() if now is None else now
    plan = prune_tree(root, max_to_keep=max_to_keep, keep_every_n_hours=keep_every_n_hours,
                      keep_steps_every=keep_steps_every, min_age=min_age, exclude=exclude,
                      dry_run=True, now=now, storage=storage, discover_all=True, read_indexes=False)
    seen_inodes: set[Any] = set()
    out = []
    kept_dirs = [d for d in list(plan.runs) + list(plan.errors) + plan.kept_dirs if is_kept_dir(storage, d)]
    for d in list(plan.runs) + list(plan.errors) + list(plan.no_policy):  # no policy: nothing would go
        if d in kept_dirs:
            continue  # counted in its run's row
        r = plan.runs.get(d)
        try:
            stamps: dict[str, float] = {}
            if r is not None and r.listing is not None:
                listing, latest, stamps = r.listing, r.latest, r.timestamps
            else:
                with open_dir(storage, d) as h:
                    listing = scan(h, read_indexes=False)
                    try:
                        _, state = read_dir_state(h)
                    except CkptError:
                        state = None
                latest = latest_base(storage, d, state)
                if state is not None and len(state.all_model_checkpoint_timestamps) == len(
                        state.all_model_checkpoint_paths):  # a run with no policy: the state's own times
                    stamps = {c.base: c.timestamp for c in state_entries(storage, d, state)
                              if c.base and c.timestamp is not None}
        except CkptError as exc:
            out.append(RunUsage(d, 0, 0, None, None, None, None, str(exc)))
            continue
        if not listing.complete:  # a Keras ModelCheckpoint series (ckptool.ops.retain.series_prune)
            from ckptool.ops.retain.series_prune import series_usage

            row = series_usage(storage, d, r, now)
            if row is not None:
                out.append(RunUsage(d, error=plan.errors.get(d), **row))
                continue
            if not listing.files and not listing.temps and not storage.isfile(storage.join(d, STATE_FILENAME)):
                continue  # Keras files but no series and no checkpoint: no run
        total = _bytes(d, listing, seen_inodes)
        kept_dir = kept_path(storage, d)
        kept_n = kept_total = 0
        kept_free: int | None = 0
        if kept_dir in kept_dirs or storage.isdir(kept_dir):
            try:
                with open_dir(storage, kept_dir) as h:
                    klisting = scan(h, read_indexes=False)
                kept_n, kept_total = len(klisting.complete), _bytes(kept_dir, klisting, seen_inodes)
            except CkptError:
                pass
            kr = plan.runs.get(kept_dir)
            kept_free = kr.bytes_freed if kr is not None else None if kept_dir in plan.errors else 0
        if latest is None or latest not in listing.complete:  # none, or not whole: the newest that is
            latest = newest_on_disk(listing)
        # the age retention sees: the state file's timestamp where it has them, else the .index mtime
        ts = json_timestamp(stamps.get(latest, listing.mtime(latest)) if latest else None)
        age = None if ts is None else max(0.0, now - ts)
        free = r.bytes_freed if r is not None else 0 if d in plan.no_policy else None
        out.append(RunUsage(d, len(listing.complete) + kept_n, total + kept_total,
                            storage.join(d, latest) if latest else None, step_of(latest) if latest else None, age,
                            None if free is None or kept_free is None else free + kept_free, plan.errors.get(d),
                            len(listing.temps), listing.temp_bytes(), kept_n, kept_total))
    out.sort(key=lambda u: (-u.bytes, u.directory))
    return out


def _bytes(d: str, listing: Any, seen_inodes: set[Any]) -> int:
    """The bytes of the complete checkpoints of a listing, each file once (hard links too)."""
    total = 0
    for base in listing.complete:
        for f in listing.files.get(base, ()):
            key = f.inode or (d, f.name)
            if f.link_out or key in seen_inodes:
                continue
            seen_inodes.add(key)
            total += f.size
    return total


__all__ = ["RunUsage", "du"]
