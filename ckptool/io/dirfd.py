"""One open directory, reached by its descriptor: what prune lists, reads and deletes
goes through it, so a directory swapped for a symlink after the walk cannot redirect a
delete outside the tree (``O_DIRECTORY|O_NOFOLLOW``, ``dir_fd=``). Remote storages have
no descriptors: :class:`PathDir` gives them the same interface by path.
"""

from __future__ import annotations

import os
import stat as _stat
import uuid
from typing import TYPE_CHECKING, Literal

from ckptool.errors import CkptError, MissingError

if TYPE_CHECKING:
    from ckptool.io.storage import Storage

ANY = object()  # replace's "whatever the file holds now"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def os_error(path: str, exc: OSError, doing: str) -> CkptError:
    """An OSError as a CkptError naming ``path`` (never a temporary's name)."""
    if isinstance(exc, FileNotFoundError):
        return MissingError(f"{path}: no such file or directory")
    return CkptError(f"{path}: cannot {doing}: {exc.strerror or exc}")


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
        """Replace ``name`` with ``data`` atomically (temp file, fsync, rename, directory
        fsync), all relative to this directory. With ``expect`` (bytes, or None for
        "absent"): only if ``name`` still holds that; False, nothing changed, otherwise.
        Errors name ``name``, never the temporary."""
        tmp = f"{name}.tmp{uuid.uuid4().hex}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=self.fd)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if expect is not ANY and self.read(name) != expect:
                os.unlink(tmp, dir_fd=self.fd)
                return False
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException as exc:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise os_error(self.join(name), exc, "write") from exc
            raise
        try:
            os.fsync(self.fd)
        except OSError:
            pass
        return True


class PathDir:
    """The same interface over a Storage by path (object stores: no descriptors)."""

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

    def rmtree(self, name: str) -> None:
        for n in self.storage.listdir(self.join(name)):
            p = self.storage.join(self.join(name), n)
            if self.storage.isdir(p):
                PathDir(self.storage, self.join(name)).rmtree(n)
            else:
                self.storage.remove(p)

    def replace(self, name: str, data: bytes, expect: object = ANY) -> bool:
        from ckptool.io.atomic import ANY as STORAGE_ANY

        return self.storage.write_bytes_atomic(self.join(name), data, STORAGE_ANY if expect is ANY else expect)


def open_dir(storage: Storage, path: str, follow: bool = True) -> LocalDir | PathDir:
    """DIR held open: by descriptor when local, by path otherwise (the storage's capability)."""
    return storage.open_dir(path, follow)


__all__ = ["ANY", "LocalDir", "PathDir", "open_dir", "os_error"]
