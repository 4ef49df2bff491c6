"""What a storage reached by path only (an object store through fsspec) answers for path
identity, file kinds, directories and trees of runs (:class:`ckptool.io.base.Storage`): no
symlinks, so a path's identity is its normalised spelling; directories are held by path
(:class:`ckptool.io.safety.dirfd.PathDir`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.safety.dirfd import PathDir


class PathCapabilities:
    """Mixed into a path-only storage (it has ``isfile``, ``isdir``, ``exists`` and ``find``)."""

    local = False
    cheap_rereads = False  # each read is a transfer

    def same_file(self, a: str, b: str) -> bool:
        return a.rstrip("/") == b.rstrip("/")

    def kind(self, path: str) -> str | None:
        me: Storage = self  # type: ignore[assignment]  # a mixin of a Storage
        if me.isfile(path):
            return "file"
        if me.isdir(path):
            return "dir"
        return "other" if me.exists(path) else None

    def open_dir(self, path: str, follow: bool = True) -> PathDir:
        from ckptool.io.safety.dirfd import PathDir

        me: Storage = self  # type: ignore[assignment]
        return PathDir(me, path)

    def walk_runs(self, root: str, *, exclude: Iterable[str] = (), scan: bool = False,
                  one_file_system: bool = False, follow_symlinks: bool = False) -> Iterator[PathDir]:
        """One listing of every file below ROOT (the store's ``find``); no symlinks, one store."""
        from ckptool.io.layout.walk import walk_paths

        me: Any = self  # a mixin of a storage that has find()
        return walk_paths(me, me.find(root), root, exclude=exclude, scan=scan)

    def walk_dirs(self, top: str, unreadable: Callable[[str, str], None]) -> Iterator[str]:
        """From one listing of every file below TOP: the directories that hold one (an object
        store has no empty directories, and none it cannot list)."""
        me: Any = self  # a mixin of a storage that has find() and dirname()
        yield from sorted({me.dirname(p) for p in me.find(top)} | {top})

    def relpath(self, path: str, start: str) -> str:
        p, s = path.rstrip("/"), start.rstrip("/")
        if p == s:
            return "."
        return p[len(s) + 1:] if p.startswith(s + "/") else p


__all__ = ["PathCapabilities"]
