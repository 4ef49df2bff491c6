"""Trees of runs: finding the run directories below a ROOT (``find_runs``) and pruning
each with its effective policy (``prune --recursive``: :func:`prune_tree`).

Local trees are walked through directory descriptors (``O_DIRECTORY|O_NOFOLLOW``), and
each run is pruned through the descriptor the walk opened, so a directory swapped for a
symlink meanwhile is not followed. Symlinked directories are followed only with
``follow_symlinks`` (each directory once); ``one_file_system`` stays on ROOT's device.
"""

from __future__ import annotations

import fnmatch
import stat as _stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError, UnsupportedError
from ckptool.io.dirfd import LocalDir, PathDir, os_error
from ckptool.io.layout import INDEX, file_role
from ckptool.io.policy import resolve_policy
from ckptool.io.state import STATE_FILENAME
from ckptool.io.storage import LOCAL
from ckptool.io.urls import storage_for
from ckptool.ops.retain.prune import UNSET, PruneResult, policy_values, prune_open

if TYPE_CHECKING:
    from ckptool.io.storage import Storage


def _excluded(rel: str, exclude) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(name, g) for g in exclude)


def _is_run(names: list[str], scan: bool) -> bool:
    return STATE_FILENAME in names or (scan and any((r := file_role(n)) is not None and r[1] == INDEX
                                                    for n in names))


def walk_runs(root: str, *, exclude=(), scan: bool = False, one_file_system: bool = False,
              follow_symlinks: bool = False) -> Iterator[LocalDir]:
    """The run directories below a local ROOT (ROOT included), each yielded open (closed
    when the walk moves on). Every directory is entered (a name with ``_temp`` or ``.tmp`` in
    it is an ordinary directory) but those matching an ``exclude`` glob (against the path
    relative to ROOT, or the name)."""
    import os

    top = LocalDir(root)
    seen = {(top.dev, os.fstat(top.fd).st_ino)}
    stack: list[tuple[LocalDir, str]] = [(top, ".")]
    while stack:
        d, rel = stack.pop()
        try:
            names = d.names()
            if _is_run(names, scan):
                yield d
            subs = []
            for n in names:
                sub_rel = n if rel == "." else f"{rel}/{n}"
                if _excluded(sub_rel, exclude):
                    continue
                st = d.lstat(n)
                if st is None:
                    continue
                link = _stat.S_ISLNK(st.st_mode)
                if link:
                    if not follow_symlinks:
                        continue
                    st = d.stat(n)
                    if st is None or not _stat.S_ISDIR(st.st_mode):
                        continue
                elif not _stat.S_ISDIR(st.st_mode):
                    continue
                if one_file_system and st.st_dev != top.dev:
                    continue
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                subs.append((n, sub_rel, link))
            for n, sub_rel, link in sorted(subs, reverse=True):
                try:
                    if link:
                        fd = os.open(n, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0), dir_fd=d.fd)
                        child = LocalDir(d.join(n), fd=fd)
                    else:
                        child = d.subdir(n)
                except (CkptError, OSError):
                    continue
                stack.append((child, sub_rel))
        finally:
            d.close()


def find_runs(root: str, *, exclude=(), scan: bool = False, storage=None, one_file_system: bool = False,
              follow_symlinks: bool = False) -> list[str]:
    """Directories below ROOT (ROOT included) holding checkpoints: a state file, or with ``scan``
    an ``*.index`` file; in walk order (sorted)."""
    if storage is None:
        storage, root = storage_for(root)
    if not storage.isdir(root):
        raise MissingError(f"{root}: no such directory")
    if storage is LOCAL:
        return sorted(d.path for d in walk_runs(root, exclude=exclude, scan=scan, one_file_system=one_file_system,
                                                follow_symlinks=follow_symlinks))
    return _find_remote(storage, root, exclude, scan)


def _find_remote(storage, root: str, exclude, scan: bool) -> list[str]:
    find = getattr(storage, "find", None)
    if find is None:
        raise UnsupportedError(f"{root}: this storage cannot list a tree")
    seen = set()
    for path in find(root):
        d, name = path.rsplit("/", 1)
        rel = d[len(root.rstrip("/")) + 1:] if d != root.rstrip("/") else "."
        if (rel != "." and any(
                _excluded("/".join(rel.split("/")[: i + 1]), exclude) for i in range(rel.count("/") + 1))):
            continue
        if _is_run([name], scan):
            seen.add(d)
    return sorted(seen)


@dataclass
class TreeResult:
    root: str
    runs: dict = field(default_factory=dict)  # directory -> PruneResult
    errors: dict = field(default_factory=dict)  # directory -> message
    dry_run: bool = False
    no_policy: list[str] = field(default_factory=list)  # runs left alone: no policy flag, no .ckptool.toml

    def to_json(self) -> dict:
        runs = []  # an array of per-directory objects, as du's "directories"
        for r in self.runs.values():
            doc = r.to_json()
            doc["counts"] = {"kept": len(r.kept), "deleted": len(r.deleted), "preserved": len(r.preserved)}
            doc["error"] = None
            runs.append(doc)
        runs += [{"directory": d, "error": msg} for d, msg in self.errors.items()]
        runs += [{"directory": d, "error": None, "no_policy": True} for d in self.no_policy]  # left alone
        return {"root": self.root, "dry_run": self.dry_run, "directories": runs, "total": self.total()}

    def total(self) -> dict:
        rs = list(self.runs.values())
        return {"directories": len(rs) + len(self.errors), "failed": len(self.errors),
                "kept": sum(len(r.kept) for r in rs), "deleted": sum(len(r.deleted) for r in rs),
                "preserved": sum(len(r.preserved) for r in rs), "bytes_freed": sum(r.bytes_freed for r in rs)}


def _message(exc: CkptError | OSError, d: str) -> str:
    if isinstance(exc, CkptError):
        return str(exc)
    return str(os_error(getattr(exc, "filename", None) or d, exc, "prune"))


def prune_tree(root: str, *, max_to_keep: Any = UNSET, keep_every_n_hours: Any = UNSET,
               keep_steps_every: Any = UNSET, min_age: Any = UNSET, keep: tuple[str, ...] = (),
               exclude: tuple[str, ...] = (), scan: bool = False, dry_run: bool = False, now: float | None = None,
               storage: Storage | None = None, progress: Any = None, discover_all: bool = False,
               clean_temp: bool = False, one_file_system: bool = False, follow_symlinks: bool = False,
               best: Any = None) -> TreeResult:
    """``prune --recursive``: each run directory below ROOT pruned as :func:`prune` would, with
    its effective policy (io/policy.resolve_policy: an argument given beats the nearest
    ``.ckptool.toml``, which beats the default); a directory's failure is recorded and the
    others still run. Without any policy argument, only runs with a ``.ckptool.toml`` at or
    above them (from ROOT down) are pruned; the others are listed in ``no_policy``, untouched."""
    if storage is None:
        storage, root = storage_for(root)
    if root != "/" and root.endswith("/") and "://" not in root:
        root = root.rstrip("/")
    if not storage.isdir(root):
        raise MissingError(f"{root}: no such directory")
    now = time.time() if now is None else now
    defaults, explicit = policy_values(max_to_keep, keep_every_n_hours, keep_steps_every, min_age, keep, best)
    out = TreeResult(root, dry_run=dry_run)
    want_scan = scan or discover_all
    any_policy_flag = bool(explicit)

    def one(d: LocalDir | PathDir) -> None:
        try:
            eff = resolve_policy(root, d.path, defaults, storage, explicit)
            if not any_policy_flag and not eff.files:
                out.no_policy.append(d.path)
                return
            run_scan = scan or STATE_FILENAME not in d.names()
            res = prune_open(storage, d, eff.policy, now=now, dry_run=dry_run, scan_all=run_scan,
                             clean_temp=clean_temp)
            res.sources = eff.sources
            out.runs[d.path] = res
        except (CkptError, OSError) as exc:
            out.errors[d.path] = _message(exc, d.path)

    d: LocalDir | PathDir
    if storage is LOCAL:
        runs = find_runs(root, exclude=exclude, scan=want_scan, storage=storage, one_file_system=one_file_system,
                         follow_symlinks=follow_symlinks) if progress else []
        i = 0
        for d in walk_runs(root, exclude=exclude, scan=want_scan, one_file_system=one_file_system,
                           follow_symlinks=follow_symlinks):
            if progress:
                progress(i, len(runs), d.path)
            i += 1
            one(d)
    else:
        runs = _find_remote(storage, root, exclude, want_scan)
        for i, path in enumerate(runs):
            if progress:
                progress(i, len(runs), path)
            try:
                d = PathDir(storage, path)
            except CkptError as exc:
                out.errors[path] = str(exc)
                continue
            one(d)
    out.runs = dict(sorted(out.runs.items()))
    out.no_policy.sort()
    out.errors = dict(sorted(out.errors.items()))
    return out


__all__ = ["PruneResult", "TreeResult", "find_runs", "prune_tree", "walk_runs"]
