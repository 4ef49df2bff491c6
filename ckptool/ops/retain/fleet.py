"""Trees of runs: finding the run directories below a ROOT (``find_runs``) and pruning
each with its effective policy (``prune --recursive``: :func:`prune_tree`).

Local trees are walked through directory descriptors (``O_DIRECTORY|O_NOFOLLOW``), and
each run is pruned through the descriptor the walk opened, so a directory swapped for a
symlink meanwhile is not followed. Symlinked directories are followed only with
``follow_symlinks`` (each directory once); ``one_file_system`` stays on ROOT's device.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.policy import read_policy, resolve_policy
from ckptool.io.control.state import STATE_FILENAME
from ckptool.io.layout.checkpoints import resolve_recorded
from ckptool.io.layout.keptdir import is_kept_dir
from ckptool.io.layout.walk import TREE_REREAD, TREE_STATE_READS
from ckptool.io.oserrors import os_error
from ckptool.ops.read.ordered import Ordered
from ckptool.ops.retain.deletion import read_dir_state
from ckptool.ops.retain.outcome import PruneResult
from ckptool.ops.retain.policy_args import UNSET, policy_values
from ckptool.ops.retain.prune import prune_open

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage


def walk_runs(root: str, *, exclude: tuple[str, ...] = (), scan: bool = False, one_file_system: bool = False,
              follow_symlinks: bool = False, storage: Storage | None = None) -> Iterator[Dir]:
    """The run directories below ROOT (ROOT included), each yielded open: the storage's walk
    (:mod:`ckptool.io.layout.walk`; every directory is entered, ``*_temp*`` ones too)."""
    if storage is None:
        storage, root = storage_for(root)
    return storage.walk_runs(root, exclude=exclude, scan=scan, one_file_system=one_file_system,
                             follow_symlinks=follow_symlinks)


def find_runs(root: str, *, exclude: tuple[str, ...] = (), scan: bool = False, storage: Storage | None = None,
              one_file_system: bool = False, follow_symlinks: bool = False) -> list[str]:
    """Directories below ROOT (ROOT included) holding checkpoints: a state file, or with ``scan``
    an ``*.index`` file; in walk order (sorted)."""
    if storage is None:
        storage, root = storage_for(root)
    if not storage.isdir(root):
        raise MissingError(f"{root}: no such directory")
    found = []
    for d in walk_runs(root, exclude=exclude, scan=scan, one_file_system=one_file_system,
                       follow_symlinks=follow_symlinks, storage=storage):
        found.append(d.path)  # the walk closes it when it moves on
    return sorted(found)


@dataclass
class TreeResult:
    root: str
    runs: dict[str, PruneResult] = field(default_factory=dict)  # directory -> PruneResult
    errors: dict[str, str] = field(default_factory=dict)  # directory -> message
    dry_run: bool = False
    no_policy: list[str] = field(default_factory=list)  # runs left alone: no policy flag, no .ckptool.toml
    kept_dirs: list[str] = field(default_factory=list)  # DIR/kept/ of a run: no .ckptool.toml of its own, left alone

    def to_json(self) -> dict[str, Any]:
        runs: list[dict[str, Any]] = []  # an array of per-directory objects, as du's "directories"
        for r in self.runs.values():
            doc = r.to_json()
            doc["counts"] = {"kept": len(r.kept), "deleted": len(r.deleted), "preserved": len(r.preserved)}
            doc["error"] = None
            runs.append(doc)
        runs += [{"directory": d, "error": msg} for d, msg in self.errors.items()]
        runs += [{"directory": d, "error": None, "no_policy": True} for d in self.no_policy]  # left alone
        return {"root": self.root, "dry_run": self.dry_run, "directories": runs, "total": self.total()}

    def total(self) -> dict[str, int]:
        rs = list(self.runs.values())
        return {"directories": len(rs) + len(self.errors), "failed": len(self.errors),
                "kept": sum(len(r.kept) for r in rs), "deleted": sum(len(r.deleted) for r in rs),
                "preserved": sum(len(r.preserved) for r in rs), "bytes_freed": sum(r.bytes_freed for r in rs)}


#: Runs whose likely index reads an object store fetches at once (:func:`_likely_indexes`).
CHUNK = 256
#: Runs an object store's prune works on at once: each is a few requests one after another (its
#: state file, the indexes it keeps, the lock, the state's write, the deletions), so 30 ms a request
#: makes a run ~0.15 s; sixteen at a time keep the store's connections busy (remote_files.POOL is 64).
RUN_JOBS = 16


def _likely_indexes(storage: Storage, d: Dir, policy: dict[str, Any], scan: bool) -> list[str]:
    """The indexes a prune of ``d`` will most likely read, fetched ahead a chunk of runs at once:
    those of the newest ``max_to_keep`` entries of its state file and its latest (what it keeps,
    whose health it checks); every index of a run pruned by ``--scan``. A guess only: what else
    the plan asks (a damaged one's successor, a pin) is read when asked, and what it deletes never."""
    names = d.names()
    if scan or STATE_FILENAME not in names:
        return [d.join(n) for n in names if n.endswith(INDEX_SUFFIX)]
    try:
        _, state = read_dir_state(d)
    except (CkptError, OSError):
        return []  # the prune reports it
    if state is None:
        return []
    paths = list(state.all_model_checkpoint_paths)
    keep = policy.get("max_to_keep") or len(paths)
    bases = {resolve_recorded(storage, d.path, p, warn=False).base for p in paths[-keep:]}
    bases.add(resolve_recorded(storage, d.path, state.model_checkpoint_path, warn=False).base)
    return [d.join(b + INDEX_SUFFIX) for b in sorted(b for b in bases if b)]


def _chunked(walk: Iterator[Dir], ahead_ok: bool, policies: Any, prune_all: Any) -> None:
    """Each run of ``walk`` through ``policies(chunk)`` then ``prune_all(chunk, policies)``: one at a
    time for a local walk (it closes each directory when it moves on); on an object store (``ahead_ok``)
    :data:`CHUNK` runs at a time, a chunk's policies (and the reads they start) while the one before
    is pruned."""
    ahead: tuple[list[tuple[int, Dir]], dict[int, Any]] | None = None
    batch: list[tuple[int, Dir]] = []
    for i, d in enumerate(walk):
        batch.append((i, d))
        if not ahead_ok:
            prune_all(batch, policies(batch))
            batch = []
        elif len(batch) >= CHUNK:
            nxt = (batch, policies(batch))
            if ahead is not None:
                prune_all(*ahead)
            ahead, batch = nxt, []
    last = (batch, policies(batch))
    for got in (ahead, last):
        if got is not None:
            prune_all(*got)


def _message(exc: CkptError | OSError, d: str) -> str:
    if isinstance(exc, CkptError):
        return str(exc)
    return str(os_error(getattr(exc, "filename", None) or d, exc, "prune"))


def prune_tree(root: str, *, max_to_keep: Any = UNSET, keep_every_n_hours: Any = UNSET,
               keep_steps_every: Any = UNSET, min_age: Any = UNSET, keep: tuple[str, ...] = (),
               exclude: tuple[str, ...] = (), scan: bool = False, dry_run: bool = False, now: float | None = None,
               storage: Storage | None = None, progress: Any = None, discover_all: bool = False,
               clean_temp: bool = False, one_file_system: bool = False, follow_symlinks: bool = False,
               best: Any = None, verify: bool = False, series: str | None = None,
               read_indexes: bool = True) -> TreeResult:
    """``prune --recursive``: each run directory below ROOT pruned as :func:`prune` would, with
    its effective policy (io/control/policy.resolve_policy: an argument given beats the nearest
    ``.ckptool.toml``, which beats the default); a directory's failure is recorded and the
    others still run. Without any policy argument, only runs with a ``.ckptool.toml`` at or
    above them (from ROOT down) are pruned; the others are listed in ``no_policy``, untouched.
    A run's ``kept/`` is no run of its own: neither flags nor an inherited file prune it, only a
    ``kept/.ckptool.toml`` (alone); else it is listed in ``kept_dirs``, untouched. ``read_indexes``
    False (``du``'s dry run): no index is read (:func:`ckptool.ops.retain.prune.run`)."""
    if storage is None:
        storage, root = storage_for(root)
    if root != "/" and root.endswith("/") and "://" not in root:
        root = root.rstrip("/")
    # an object store: one listing, the state files and policies at once; the indexes of what each run
    # keeps are fetched a chunk of runs at a time (_likely_indexes), those of what it deletes never
    with storage.listed(root, TREE_STATE_READS, TREE_REREAD):
        return _prune_tree(root, storage, max_to_keep=max_to_keep, keep_every_n_hours=keep_every_n_hours,
                           keep_steps_every=keep_steps_every, min_age=min_age, keep=keep, exclude=exclude,
                           scan=scan, dry_run=dry_run, now=now, progress=progress, discover_all=discover_all,
                           clean_temp=clean_temp, one_file_system=one_file_system,
                           follow_symlinks=follow_symlinks, best=best, verify=verify, series=series,
                           read_indexes=read_indexes)


def _prune_tree(root: str, storage: Storage, *, max_to_keep: Any, keep_every_n_hours: Any, keep_steps_every: Any,
                min_age: Any, keep: tuple[str, ...], exclude: tuple[str, ...], scan: bool, dry_run: bool,
                now: float | None, progress: Any, discover_all: bool, clean_temp: bool, one_file_system: bool,
                follow_symlinks: bool, best: Any, verify: bool, series: str | None,
                read_indexes: bool = True) -> TreeResult:
    if not storage.isdir(root):
        raise MissingError(f"{root}: no such directory")
    now = time.time() if now is None else now
    defaults, explicit = policy_values(max_to_keep, keep_every_n_hours, keep_steps_every, min_age, keep, best, series)
    out = TreeResult(root, dry_run=dry_run)
    want_scan = scan or discover_all
    any_policy_flag = bool(explicit)

    def policy_of(d: Dir) -> Any:
        """The run's effective policy, or None when it is left alone (recorded in ``out``)."""
        if is_kept_dir(storage, d.path):  # part of its run: pruned only by a policy of its own
            if read_policy(d.path, storage) is None:
                out.kept_dirs.append(d.path)
                return None
            eff = resolve_policy(d.path, d.path, {**defaults, "max_to_keep": None}, storage)
        else:
            eff = resolve_policy(root, d.path, defaults, storage, explicit)
        if not want_scan and not eff.policy.get("series") and STATE_FILENAME not in d.names():
            return None  # Keras files only (io.layout.walk.is_run): a run only for a series policy
        if not any_policy_flag and not eff.files:
            out.no_policy.append(d.path)
            return None
        return eff

    def one(d: Dir, eff: Any) -> None:
        try:
            run_scan = scan or STATE_FILENAME not in d.names()
            res = prune_open(storage, d, eff.policy, now=now, dry_run=dry_run, scan_all=run_scan,
                             clean_temp=clean_temp, verify=verify, read_indexes=read_indexes)
            res.sources = eff.sources
            out.runs[d.path] = res
        except (CkptError, OSError) as exc:
            out.errors[d.path] = _message(exc, d.path)

    fetch = getattr(storage, "fetch_listed", None)
    runs = find_runs(root, exclude=exclude, scan=want_scan, storage=storage, one_file_system=one_file_system,
                     follow_symlinks=follow_symlinks) if progress else []

    def policies(dirs: list[tuple[int, Dir]]) -> dict[int, Any]:
        """Each run's policy; then, on an object store, its likely index reads fetched at once, in
        the background (the chunk before is pruned meanwhile)."""
        effs: dict[int, Any] = {}
        for i, d in dirs:
            try:
                effs[i] = policy_of(d)
            except (CkptError, OSError) as exc:
                out.errors[d.path] = _message(exc, d.path)
        if fetch is not None and read_indexes:
            effs[-1] = pool.submit(fetch, [p for i, d in dirs if effs.get(i) is not None
                                           for p in _likely_indexes(storage, d, effs[i].policy, scan)])
        return effs

    def prune_all(dirs: list[tuple[int, Dir]], effs: dict[int, Any]) -> None:
        """``dirs`` pruned, answered in walk order: one by one on a local disk, RUN_JOBS at a time on a store."""
        if -1 in effs:
            effs.pop(-1).result()  # its reads are in (a failed one is read where it is used)
        done = {i: runs_pool.submit(one, d, effs[i]) for i, d in dirs if effs.get(i) is not None} \
            if runs_pool is not None else None
        for i, d in dirs:
            if progress:
                progress(i, len(runs), d.path)
            if done is None:
                if effs.get(i) is not None:
                    one(d, effs[i])
            elif i in done:  # in order: a run's warnings said and its exception raised here, as unparallel
                done[i].result()

    with ThreadPoolExecutor(max_workers=1) as pool, Ordered(RUN_JOBS) as jobs:
        runs_pool = jobs if fetch is not None else None
        _chunked(walk_runs(root, exclude=exclude, scan=want_scan, one_file_system=one_file_system,
                           follow_symlinks=follow_symlinks, storage=storage), fetch is not None, policies, prune_all)
    out.runs = dict(sorted(out.runs.items()))
    out.no_policy.sort()
    out.errors = dict(sorted(out.errors.items()))
    return out


__all__ = ["PruneResult", "TreeResult", "find_runs", "prune_tree", "walk_runs"]
