"""One open directory, reached by its descriptor: what prune lists, reads and deletes
goes through it, so a directory swapped for a symlink after the walk cannot redirect a
delete outside the tree (``O_DIRECTORY|O_NOFOLLOW``, ``dir_fd=``). Remote storages have
no descriptors: :class:`PathDir` gives them the same interface by path.
"""

from __future__ import annotations

import os
import stat as _stat
import uuid
from typing import TYPE_CHECKING, Any, Literal

from ckptool.errors import CkptError, MissingError
from ckptool.io.base import ANY
from ckptool.io.oserrors import os_error
from ckptool.io.safety import atomic

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage, Writer

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class LocalDir:
    """A local directory held open. ``follow``: the path itself may be a symlink (the
    directory the user named); subdirectories are opened with ``O_NOFOLLOW``."""

    def __init__(self, path: str, follow: bool = True, fd: int | None = None):
        self.path = path
        if fd is None:
            try:
                fd = os.open(path or ".", os.O_RDONLY | _DIRECTORY | (0 if follow else _NOFOLLOW))
            except FileNotFoundError:
                raise MissingError(f"{path}: no such directory") from None
            except OSError as exc:
                raise os_error(path, exc, "open the directory") from None
        self.fd = fd
        self.dev = os.fstat(fd).st_dev

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> LocalDir:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def join(self, name: str) -> str:
        return os.path.join(self.path, name) if self.path else name

    def names(self) -> list[str]:
        try:
            return sorted(os.listdir(self.fd))
        except OSError as exc:
            raise os_error(self.path, exc, "list") from None

    def lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_error(self.join(name), exc, "stat") from None

    def stat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.fd)
        except OSError:
            return None

    def link_target(self, name: str) -> str:
        return os.path.realpath(self.join(name))

    def realpath(self) -> str:
        return os.path.realpath(self.path or ".")

    def read(self, name: str) -> bytes | None:
        """A regular file's bytes (None when absent); never blocks on a FIFO."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=self.fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise os_error(self.join(name), exc, "read") from None
        try:
            if not _stat.S_ISREG(os.fstat(fd).st_mode):
                raise CkptError(f"{self.join(name)}: not a regular file")
            chunks: list[bytes] = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
        finally:
            os.close(fd)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def unlink_if(self, name: str, expect: bytes) -> bool:
        """Delete ``name`` only if it still holds ``expect`` (the caller holds DIR's lock, which
        every writer of a state file takes); False, nothing deleted, otherwise."""
        if self.read(name) != expect:
            return False
        self.unlink(name)
        return True

    def subdir(self, name: str) -> LocalDir:
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW, dir_fd=self.fd)
        except OSError as exc:
            raise os_error(self.join(name), exc, "open the directory") from None
        return LocalDir(self.join(name), fd=fd)

    def rmtree(self, name: str) -> None:
        """Delete the directory ``name`` and all below it, never following a symlink."""
        with self.subdir(name) as sub:
            for n in sub.names():
                st = sub.lstat(n)
                if st is not None and _stat.S_ISDIR(st.st_mode):
                    sub.rmtree(n)
                else:
                    sub.unlink(n)
        os.rmdir(name, dir_fd=self.fd)

    def replace(self, name: str, data: bytes, expect: object = ANY) -> bool:
        """Replace ``name`` with ``data`` atomically, all relative to this directory: the one
        atomic write (:func:`ckptool.io.safety.atomic.write_bytes`) over :class:`FdFiles` (temp file
        ``NAME.tmp<hex>``, fsync, rename, directory fsync). With ``expect`` (bytes, or None for
        "absent"): only if ``name`` still holds that; False, nothing changed, otherwise.
        Errors name ``name``, never the temporary."""
        return atomic.write_bytes(FdFiles(self), self.join(name), data, expect=expect)


class FdFiles:
    """A :class:`LocalDir` as the :class:`ckptool.io.base.Files` that ``AtomicFile`` writes
    to: every path is one of the directory's entries (``LocalDir.join(name)``), reached by
    the descriptor (``dir_fd=``, ``O_NOFOLLOW``), never by walking the path again."""

    atomic_rename = True

    def __init__(self, d: LocalDir):
        self.d = d

    def _name(self, path: str) -> str:
        return os.path.basename(path)

    def temp_name(self, path: str) -> str:
        """``NAME.tmp<hex>``: the temporary of a small file (``layout.temp_owner`` knows it)."""
        return f"{path}.tmp{uuid.uuid4().hex}"

    def open_write(self, path: str) -> Writer:
        fd = os.open(self._name(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666,
                     dir_fd=self.d.fd)
        return os.fdopen(fd, "wb")

    def fsync_file(self, f: Writer) -> None:
        f.flush()
        os.fsync(f.fileno())

    def start_writeback(self, f: Writer, offset: int, length: int) -> None:
        pass  # small files: the fsync alone

    def rename(self, src: str, dst: str) -> None:
        os.replace(self._name(src), self._name(dst), src_dir_fd=self.d.fd, dst_dir_fd=self.d.fd)

    def remove(self, path: str) -> None:
        os.unlink(self._name(path), dir_fd=self.d.fd)

    def dirname(self, path: str) -> str:
        return os.path.dirname(path)

    def fsync_dir(self, path: str) -> None:
        try:
            os.fsync(self.d.fd)
        except OSError:
            pass

    def read_if_exists(self, path: str) -> bytes | None:
        return self.d.read(self._name(path))


class PathDir:
    """The same interface over a Storage by path (object stores: no descriptors)."""

    fd = None
    dev = None

    def __init__(self, storage: Storage, path: str):
        self.storage, self.path = storage, path
        if not storage.isdir(path):
            raise MissingError(f"{path}: no such directory")

    def close(self) -> None:
        pass

    def __enter__(self) -> PathDir:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False

    def join(self, name: str) -> str:
        return self.storage.join(self.path, name) if self.path else name

    def names(self) -> list[str]:
        return self.storage.listdir(self.path)

    def lstat(self, name: str) -> os.stat_result | None:
        p = self.join(name)
        if self.storage.isdir(p):
            return os.stat_result((_stat.S_IFDIR, 0, 0, 1, 0, 0, 0, 0, 0, 0))
        try:
            size, mtime = self.storage.size(p), self.storage.mtime(p)
        except (OSError, CkptError):
            return None
        return os.stat_result((_stat.S_IFREG | 0o644, 0, 0, 1, 0, 0, size, mtime, mtime, mtime))

    stat = lstat

    def link_target(self, name: str) -> str:
        return self.join(name)

    def realpath(self) -> str:
        return self.path

    def read(self, name: str) -> bytes | None:
        return self.storage.read_if_exists(self.join(name))

    def subdir(self, name: str) -> PathDir:
        return PathDir(self.storage, self.join(name))

    def unlink(self, name: str) -> None:
        self.storage.remove(self.join(name))

    def unlink_if(self, name: str, expect: bytes) -> bool:
        return self.storage.remove_if(self.join(name), expect)

    def unlink_many(self, names: list[str], release: Any = None) -> dict[str, BaseException | None] | None:
        """Delete ``names`` at once where the storage can (an object store's batch delete): name ->
        None or the error; None when it cannot (the caller unlinks them one by one). ``release``:
        the lock held on this directory, released with them where the store can (``remove_many``)."""
        many = getattr(self.storage, "remove_many", None)
        if many is None:
            return None
        got = many([self.join(n) for n in names], release)
        return {n: got[self.join(n)] for n in names}

    def rmtree(self, name: str) -> None:
        for n in self.storage.listdir(self.join(name)):
            p = self.storage.join(self.join(name), n)
            if self.storage.isdir(p):
                PathDir(self.storage, self.join(name)).rmtree(n)
            else:
                self.storage.remove(p)

    def replace(self, name: str, data: bytes, expect: object = ANY) -> bool:
        return self.storage.write_bytes_atomic(self.join(name), data, expect)


def open_dir(storage: Storage, path: str, follow: bool = True) -> Dir:
    """DIR held open: by descriptor when local, by path otherwise (the storage's capability)."""
    return storage.open_dir(path, follow)


__all__ = ["FdFiles", "LocalDir", "PathDir", "open_dir"]
