"""The local file system as a :class:`ckptool.io.base.Storage`: OS paths, positioned reads,
atomic renames, path identity by device and inode, directories held by descriptor, the
``flock`` of :mod:`ckptool.io.control.lock`.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from ckptool.errors import CkptError, MissingError
from ckptool.io.base import ANY
from ckptool.io.oserrors import os_error, raise_truncated
from ckptool.io.safety import atomic

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ckptool.format.coding import AnyBuffer
    from ckptool.io.base import LockOptions, Reader, Writer
    from ckptool.io.control.lock import DirLock
    from ckptool.io.safety.dirfd import LocalDir


class RangeReader:
    """Positioned reads from one file, kept open."""

    def __init__(self, path: str):
        self.path = path
        self._fd = -1
        self._fd, self.size = open_regular(path)

    def readinto(self, offset: int, buf: AnyBuffer) -> None:
        """Fill ``buf`` (a writable buffer) from ``offset``; short files are an error."""
        view = memoryview(buf).cast("B")  # type: ignore[arg-type]  # an ndarray is a Buffer (AnyBuffer)
        want = len(view)
        done = 0
        while done < want:
            n = os.preadv(self._fd, [view[done:]], offset + done)
            if n <= 0:
                raise_truncated(self.path, offset, want, done)
            done += n

    def read(self, offset: int, size: int) -> bytearray:
        buf = bytearray(size)
        self.readinto(offset, buf)
        return buf

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def open_regular(path: str) -> tuple[int, int]:
    """``(fd, size)`` of the regular file ``path``, opened read-only. Opened with
    O_NONBLOCK, so that a FIFO or a device in its place cannot make the open wait, and
    refused unless ``fstat`` says it is a regular file (nothing is read before that)."""
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise MissingError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MissingError(f"{path}: is a directory, not a data file") from None
    except OSError as exc:
        raise os_error(path, exc, "open") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise MissingError(f"{path}: is a directory, not a data file")
        if not stat.S_ISREG(st.st_mode):
            raise CkptError(f"{path}: not a regular file (a FIFO, socket or device); refusing to read it")
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


class LocalStorage:
    """The local file system."""

    sep = os.sep
    atomic_rename = True
    concurrent_reads = True  # positioned reads from several threads at once (verify: one per core)
    local = True
    cheap_rereads = True

    def join(self, *parts: str) -> str:
        return os.path.join(*parts)

    def dirname(self, path: str) -> str:
        return os.path.dirname(path)

    def basename(self, path: str) -> str:
        return os.path.basename(path)

    def isabs(self, path: str) -> bool:
        return os.path.isabs(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isfile(self, path: str) -> bool:
        return os.path.isfile(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            raise MissingError(f"{path}: no such directory") from None
        except OSError as exc:
            raise os_error(path, exc, "list") from None

    def glob(self, directory: str, pattern: str) -> list[str]:
        """Names in ``directory`` matching a glob ``pattern`` (no recursion)."""
        try:
            names = os.listdir(directory or ".")
        except OSError:
            return []
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def find(self, root: str, pattern: str = "*") -> list[str]:
        """Every regular file below ``root`` (a symlink to one too; symlinked directories not
        entered, unreadable ones skipped) whose name matches ``pattern``, sorted."""
        out: list[str] = []
        for d, dirs, files in os.walk(root, followlinks=False):
            dirs.sort()
            out.extend(os.path.join(d, f) for f in sorted(files)
                       if fnmatch.fnmatchcase(f, pattern) and os.path.isfile(os.path.join(d, f)))
        return sorted(out)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime(self, path: str) -> float:
        return os.stat(path).st_mtime_ns / 1e9

    def read_bytes(self, path: str) -> bytes:
        """The whole of the regular file ``path`` (a FIFO or device is refused, unread)."""
        r = RangeReader(path)
        try:
            return bytes(r.read(0, r.size))
        except OSError as exc:
            raise os_error(path, exc, "read") from None
        finally:
            r.close()

    def open_reader(self, path: str) -> RangeReader:
        return RangeReader(path)

    def prefetch(self, ranges: Iterable[tuple[Reader, int, int]],
                 jobs: int | None = None) -> AbstractContextManager[None]:
        return nullcontext()  # the plan is never looked at: local reads cost nothing to plan

    def makedirs(self, path: str) -> None:
        if path:
            os.makedirs(path, exist_ok=True)

    def temp_name(self, path: str) -> str:
        """A fresh temporary name beside ``path``, as TF's ``.tempstate<N>``."""
        return atomic.tempstate_name(path)

    def open_write(self, path: str) -> Writer:
        """A new file (never an existing one) for :class:`ckptool.io.safety.atomic.AtomicFile`."""
        return open(path, "xb")

    def fsync_file(self, f: Writer) -> None:
        f.flush()
        os.fsync(f.fileno())

    def start_writeback(self, f: Writer, offset: int, length: int) -> None:
        """Have the kernel start writing ``length`` bytes at ``offset`` of ``f`` to disk now,
        so that writing and flushing overlap and the final fsync waits for the tail alone
        (half the time of writing 1 GiB then fsyncing it). On Linux, POSIX_FADV_DONTNEED
        starts the writeback of dirty pages (mm/fadvise.c); a hint, nothing where absent."""
        if hasattr(os, "posix_fadvise"):
            f.flush()
            try:
                os.posix_fadvise(f.fileno(), offset, length, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        try:
            fd = os.open(path or ".", os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        os.remove(path)

    def remove_if(self, path: str, expect: bytes) -> bool:  # under DIR's lock, which every writer takes
        if self.read_if_exists(path) != expect:
            return False
        self.remove(path)
        return True

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def lock(self, directory: str, **options: Unpack[LockOptions]) -> DirLock:
        """DIR's lock (:class:`ckptool.io.control.lock.DirLock`) as a context manager; ``options``
        are DirLock's ``timeout`` and ``dir_fd``."""
        from ckptool.io.control.lock import DirLock

        return DirLock(directory or ".", **options)

    def lock_held(self, directory: str, dir_fd: int | None = None) -> bool:
        from ckptool.io.control.lock import is_locked

        return is_locked(directory, dir_fd)

    def write_bytes_atomic(self, path: str, data: bytes, expect: object = ANY, sync: bool = True) -> bool:
        """Replace ``path`` with ``data`` atomically: :func:`ckptool.io.safety.atomic.write_bytes`
        (temp file, fsync, rename, directory fsync; ``expect`` as documented there)."""
        return atomic.write_bytes(self, path, data, sync=sync, expect=expect)

    def read_if_exists(self, path: str) -> bytes | None:
        """The regular file's bytes, None when absent (a FIFO or device is refused, unread)."""
        try:
            return self.read_bytes(path)
        except MissingError:
            return None


    def same_file(self, a: str, b: str) -> bool:
        try:
            return os.path.samefile(a or ".", b or ".")
        except (OSError, ValueError):  # one is missing (or a NUL in it): the real paths decide
            try:
                return os.path.realpath(a or ".") == os.path.realpath(b or ".")
            except ValueError:
                return False

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
        from ckptool.io.safety.dirfd import LocalDir

        return LocalDir(path, follow)

    def relpath(self, path: str, start: str) -> str:
        return os.path.relpath(path or ".", start or ".")

    def walk_runs(self, root: str, *, exclude: Iterable[str] = (), scan: bool = False,
                  one_file_system: bool = False, follow_symlinks: bool = False) -> Iterator[LocalDir]:
        from ckptool.io.layout.walk import walk_local

        return walk_local(root, exclude=exclude, scan=scan, one_file_system=one_file_system,
                          follow_symlinks=follow_symlinks)

    def walk_dirs(self, top: str, unreadable: Callable[[str, str], None]) -> Iterator[str]:
        from ckptool.io.layout.walk import walk_local_dirs

        return walk_local_dirs(top, unreadable)

    def listed(self, root: str, reads: Iterable[str] = (), reread: Iterable[str] = ()) -> AbstractContextManager[None]:
        return nullcontext()  # a local file system is asked as the command goes


LOCAL = LocalStorage()

__all__ = ["LOCAL", "LocalStorage", "RangeReader", "open_regular"]
