"""Trees of runs: the run directories below a ROOT, yielded open. A storage capability
(:meth:`ckptool.io.base.Storage.walk_runs`): a local tree is walked through directory
descriptors (``O_DIRECTORY|O_NOFOLLOW``), so a directory swapped for a symlink meanwhile is not
followed; symlinked directories only with ``follow_symlinks`` (each directory once);
``one_file_system`` stays on ROOT's device. An object store is listed once (``find``).

Every directory is entered: a name with ``_temp`` or ``.tmp`` in it is an ordinary directory
(the temporary-file rule is exact: :func:`ckptool.io.layout.checkpoints.temp_owner`); only those matching
an ``exclude`` glob (against the path relative to ROOT, or the name) are skipped.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat as _stat
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.io.layout.names import INDEX, STATE_FILENAME, file_role
from ckptool.io.layout.series_names import is_series_file
from ckptool.io.oserrors import os_error
from ckptool.io.safety.dirfd import LocalDir, PathDir

if TYPE_CHECKING:
    from ckptool.io.base import Storage



#: The small files a command over a tree of runs reads of each (state files, policies,
#: indexes): an object store fetches them at once, in parallel, beside its one listing
#: (:meth:`ckptool.io.base.Storage.listed`).
TREE_READS = (STATE_FILENAME, ".ckptool.toml", "*" + INDEX_SUFFIX)
#: Of them, those a command that reads no index needs (``du``: the listing gives the sizes).
TREE_STATE_READS = (STATE_FILENAME, ".ckptool.toml")
#: Of them, what a command reads again once it holds the run's lock: the state file (an
#: index, once written, is not rewritten in place).
TREE_REREAD = (STATE_FILENAME,)


def excluded(rel: str, exclude: Iterable[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(name, g) for g in exclude)


def is_run(names: Iterable[str], scan: bool) -> bool:
    """A run directory: a state file, or with ``scan`` any ``*.index``; or files a Keras
    ModelCheckpoint series may hold (``.keras``, ``.weights.h5``, ``.h5``, ``.weights.json``)."""
    names = list(names)
    return STATE_FILENAME in names or (scan and any((r := file_role(n)) is not None and r[1] == INDEX
                                                    for n in names)) or any(is_series_file(n) for n in names)


def walk_local(root: str, *, exclude: Iterable[str] = (), scan: bool = False, one_file_system: bool = False,
               follow_symlinks: bool = False) -> Iterator[LocalDir]:
    """The run directories below a local ROOT (ROOT included), each yielded open (closed when
    the walk moves on)."""
    exclude = tuple(exclude)
    top = LocalDir(root)
    seen = {(top.dev, os.fstat(top.fd).st_ino)}
    stack: list[tuple[LocalDir, str]] = [(top, ".")]
    while stack:
        d, rel = stack.pop()
        try:
            names = d.names()
            if is_run(names, scan):
                yield d
            subs = []
            for n in names:
                sub_rel = n if rel == "." else f"{rel}/{n}"
                if excluded(sub_rel, exclude):
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


def walk_local_dirs(top: str, unreadable: Callable[[str, str], None]) -> Iterator[str]:
    """Every directory below a local TOP (TOP included), depth first in sorted order, no symlink
    followed; one that cannot be listed or entered goes to ``unreadable(path, reason)`` (out
    of descriptors is an error). A loop over a stack, not a recursion: any depth works."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                subs = [e.path for e in it if _is_real_dir(e)]
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                raise os_error(str(exc.filename or d), exc, "list") from None
            unreadable(str(exc.filename or d), exc.strerror or str(exc))
            continue
        stack.extend(sorted(subs, reverse=True))
        if not os.access(d, os.R_OK | os.X_OK):  # listed, but its files cannot be opened
            unreadable(d, os.strerror(errno.EACCES))
            continue
        yield d


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    """A directory entered by the walk: a directory, not a symlink to one."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def run_paths(files: Iterable[str], root: str, *, exclude: Iterable[str] = (), scan: bool = False) -> list[str]:
    """The run directories among ``files`` (every file below ROOT, as URLs): one listing."""
    exclude = tuple(exclude)
    seen = set()
    top = root.rstrip("/")
    for path in files:
        d, name = path.rsplit("/", 1)
        rel = d[len(top) + 1:] if d != top else "."
        if rel != "." and any(excluded("/".join(rel.split("/")[: i + 1]), exclude) for i in range(rel.count("/") + 1)):
            continue
        if is_run([name], scan):
            seen.add(d)
    return sorted(seen)


def walk_paths(storage: Storage, files: Iterable[str], root: str, *, exclude: Iterable[str] = (),
               scan: bool = False) -> Iterator[PathDir]:
    """The run directories among ``files`` held by path (:class:`PathDir`); one that vanished
    meanwhile is skipped."""
    for path in run_paths(files, root, exclude=exclude, scan=scan):
        try:
            yield PathDir(storage, path)
        except CkptError:
            continue


__all__ = ["TREE_READS", "TREE_REREAD", "TREE_STATE_READS", "excluded", "is_run", "run_paths", "walk_local",
           "walk_local_dirs", "walk_paths"]
