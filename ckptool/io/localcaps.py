"""The deletion capabilities of :class:`ckptool.io.storage.Storage` for the local file
system (mixed into :class:`ckptool.io.storage.LocalStorage`): path identity by device and
inode, file kinds (a FIFO or device is "other"), directories held by descriptor, the
descriptor walk of a tree of runs."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckptool.io.dirfd import LocalDir


class LocalCapabilities:
    """Path identity, kinds, directories and walks on the local file system."""

    def same_dir(self, a: str, b: str) -> bool:
        try:
            return os.path.samefile(a or ".", b or ".")
        except OSError:
            return self.path_key(a) == self.path_key(b)

    def path_key(self, path: str) -> str:
        return os.path.realpath(path or ".")

    def kind(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return "other" if os.path.islink(path) else None
        except ValueError:  # a NUL in the path: nothing can be there
            return None
        except OSError as exc:
            return "other" if exc.errno == errno.ELOOP else None  # as isfile: unknown is absent
        return "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"

    def open_dir(self, path: str, follow: bool = True) -> LocalDir:
        from ckptool.io.dirfd import LocalDir

        return LocalDir(path, follow)

    def relpath(self, path: str, start: str) -> str:
        return os.path.relpath(path or ".", start or ".")

    def walk_runs(self, root: str, *, exclude: Iterable[str] = (), scan: bool = False,
                  one_file_system: bool = False, follow_symlinks: bool = False) -> Iterator[LocalDir]:
        from ckptool.io.walk import walk_local

        return walk_local(root, exclude=exclude, scan=scan, one_file_system=one_file_system,
                          follow_symlinks=follow_symlinks)


__all__ = ["LocalCapabilities"]
