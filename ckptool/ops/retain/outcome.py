"""What a prune did, as it reports it (:class:`PruneResult`, the ``--json`` document):
:func:`describe` turns a plan and what the engine managed into paths and reasons.

A checkpoint moved into ``DIR/kept/`` is shown by its new path (``moved`` pairs old and
new); one linked there while still one of the newest ``max_to_keep`` keeps its DIR path
(``linked``); a state entry whose files were already gone is ``already_gone``, never
``deleted``; a damaged checkpoint kept is in ``damaged`` (prune exits 1 for it); the newest
intact one kept in place of a damaged one is ``preserved`` for reason ``last intact``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.format.json_numbers import json_timestamp
from ckptool.io.layout.checkpoints import checkpoint_exists
from ckptool.io.layout.keptdir import kept_path
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.kept import LINK, MOVE

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.layout.listing import DirListing
    from ckptool.ops.retain.prune_plan import Plan


@dataclass
class PruneResult:
    directory: str
    kept: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    preserved: list[str] = field(default_factory=list)
    reasons: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # refused: outside DIR or a symlink out
    missing: list[str] = field(default_factory=list)  # listed in the state, not on disk
    failed: list[dict[str, Any]] = field(default_factory=list)  # {"path", "error"}: files that could not be deleted
    temp_deleted: list[str] = field(default_factory=list)  # --clean-temp
    bytes_freed: int = 0
    dry_run: bool = False
    last_preserved_timestamp: float = 0.0
    policy: dict[str, Any] = field(default_factory=dict)
    listing: DirListing | None = field(default=None, repr=False, compare=False)
    latest: str | None = field(default=None, repr=False, compare=False)
    #: base -> the timestamp retention used (the state file's where it has them, else the mtime): du's age
    timestamps: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    best: dict[str, Any] | None = None  # --keep-best: the metric's values (metrics.BestPins.to_json()), when asked
    sources: dict[str, str] = field(default_factory=dict, repr=False, compare=False)  # setting -> flag/file/default
    #: {"from", "to"} (and, when placed by this run, "how": "hard link"/"copy" and "bytes_copied")
    moved: list[dict[str, Any]] = field(default_factory=list)  # into DIR/kept/, gone from DIR
    linked: list[dict[str, Any]] = field(default_factory=list)  # also in DIR/kept/, still in DIR
    damaged: list[dict[str, str]] = field(default_factory=list)  # {"path", "problem"}: kept, but damaged
    already_gone: list[str] = field(default_factory=list)  # state entries whose files were gone before

    def to_json(self) -> dict[str, Any]:
        doc = {"kept": list(self.kept), "deleted": list(self.deleted), "preserved": list(self.preserved),
               "directory": self.directory, "reasons": dict(self.reasons), "skipped": list(self.skipped),
               "missing": list(self.missing), "failed": list(self.failed), "temp_deleted": list(self.temp_deleted),
               "bytes_freed": self.bytes_freed, "dry_run": self.dry_run,
               "last_preserved_timestamp": json_timestamp(self.last_preserved_timestamp) or None,
               "policy": dict(self.policy),
               "moved": list(self.moved), "linked": list(self.linked), "damaged": list(self.damaged),
               "already_gone": list(self.already_gone)}
        if self.best is not None:
            doc["best"] = self.best
        if self.sources:  # where each setting came from: "flag", "default" or a .ckptool.toml's path
            doc["policy_sources"] = dict(self.sources)
        return doc


def describe(res: PruneResult, storage: Storage, plan: Plan, listing: DirListing,
             placed: dict[str, str] | None = None, left: set[str] | frozenset[str] = frozenset(),
             fresh: Mapping[str, tuple[str, int]] | None = None) -> None:
    """Fill ``res`` from ``plan``: before the run (``placed`` None: the plan's paths), or after it
    with ``placed`` (base -> its name in kept/, for those kept/ now holds), ``left`` (the
    checkpoints a file of which could not be deleted) and ``fresh`` (those given names in kept/
    by this run -> (how: "hard link" or "copy", bytes copied), as the engine placed them:
    ``linked`` names only them, so that a cron run that changes nothing says nothing; each
    entry of ``moved`` and ``linked`` placed now says ``how`` and ``bytes_copied``)."""
    directory, d = res.directory, plan.decision
    fresh = fresh or {}

    def disp(b: str) -> str:
        return storage.join(directory, b) if directory else b

    def in_kept(b: str) -> str:
        return kept_path(storage, directory, (placed or {}).get(b, b))

    def here(b: str) -> bool:
        return bool(listing.files.get(b))

    moved = {b for b, how in plan.moves.items() if how == MOVE and (placed is None or b in placed)}
    linked = {b for b, how in plan.moves.items() if how == LINK and (
        b in fresh if placed is not None else not checkpoint_exists(storage, kept_path(storage, directory, b)))}

    def shown(b: str) -> str:
        return in_kept(b) if b in moved else disp(b)

    last_intact = {e.name for e in d.kept if d.reasons.get(e.name) == [R.LAST_INTACT]}
    res.kept = [shown(e.name) for e in d.kept if e.name not in last_intact]
    res.preserved = [shown(e.name) for e in d.preserved if here(e.name)] + [disp(b) for b in sorted(last_intact)]
    res.deleted = [disp(e.name) for e in d.deleted if here(e.name) and e.name not in left]
    gone = [e.name for e in d.deleted + d.preserved if not here(e.name)] + sorted(plan.gone)
    res.already_gone = [disp(b) for b in dict.fromkeys(gone)
                        if not checkpoint_exists(storage, kept_path(storage, directory, b))]  # not: moved by us
    res.reasons = {shown(k): v for k, v in d.reasons.items() if here(k) and k not in {e.name for e in d.deleted}}
    def pair(b: str) -> dict[str, Any]:
        out: dict[str, Any] = {"from": disp(b), "to": in_kept(b)}
        if b in fresh:
            out["how"], out["bytes_copied"] = fresh[b]
        return out

    res.moved = [pair(b) for b in sorted(moved)]
    res.linked = [pair(b) for b in sorted(linked)]
    res.damaged = [{"path": disp(b), "problem": p} for b, p in sorted(plan.damaged.items())]
    doomed = [f for e in d.deleted if e.name not in left for f in listing.files.get(e.name, ())]
    res.bytes_freed = freed_bytes(doomed)


def freed_bytes(files: Any) -> int:
    """Bytes freed by deleting ``files``: a hard-linked file counts only when its last link goes."""
    by: dict[Any, Any] = {}
    for f in files:
        key = f.inode if f.inode is not None else id(f)
        slot = by.setdefault(key, [f, 0])
        slot[1] += 1
    return sum(f.size for f, n in by.values() if n >= f.nlink)


__all__ = ["PruneResult", "describe", "freed_bytes"]
