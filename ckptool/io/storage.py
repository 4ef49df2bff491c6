"""Where checkpoint files live: the local file system (and, through fsspec, object stores).

The library reaches files only through a :class:`Storage`, so the same code
reads a local directory and an ``s3://`` bucket. Local paths use the OS
directly (positioned reads, atomic renames); other URLs go to fsspec.
"""

from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, NoReturn, Protocol

from ckptool.errors import CkptError, MissingError
from ckptool.format.table import PositionedReader
from ckptool.io import atomic
from ckptool.io.atomic import ANY  # write_bytes_atomic's "whatever the file holds now"
from ckptool.io.localcaps import LocalCapabilities  # the deletion capabilities (issue 27)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from contextlib import AbstractContextManager

    from typing_extensions import Buffer, TypedDict, Unpack

    from ckptool.format.coding import AnyBuffer
    from ckptool.io.dirfd import LocalDir, PathDir
    from ckptool.io.lock import DirLock

    class LockOptions(TypedDict, total=False):  # DirLock's keywords
        timeout: float | None
        dir_fd: int | None
        on_wait: Callable[[float], None] | None


class Reader(PositionedReader, Protocol):
    """One file open for positioned reads: :class:`RangeReader`, or an object's ranged GETs."""

    path: str

    def read(self, offset: int, size: int, /) -> bytearray: ...

    def readinto(self, offset: int, buf: AnyBuffer, /) -> None: ...

    def close(self) -> None: ...


class Writer(Protocol):
    """A new file being written: ``open(path, "xb")``, or an upload published at close."""

    def write(self, data: Buffer, /) -> int: ...

    def flush(self) -> None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class Storage(Protocol):
    """What the library asks of a place that holds files: :class:`LocalStorage`, and
    :class:`ckptool.io.remote.RemoteStorage` over fsspec. A local storage also has
    ``lstat`` and ``lock`` (callers test ``hasattr``); a remote one has ``find``."""

    sep: str
    atomic_rename: bool
    concurrent_reads: bool  # readers may be used from several threads at once to advantage

    def join(self, *parts: str) -> str: ...

    def dirname(self, path: str) -> str: ...

    def basename(self, path: str) -> str: ...

    def isabs(self, path: str) -> bool: ...

    def realpath(self, path: str) -> str: ...

    def exists(self, path: str) -> bool: ...

    def isfile(self, path: str) -> bool: ...

    def isdir(self, path: str) -> bool: ...

    def listdir(self, path: str) -> list[str]: ...

    def glob(self, directory: str, pattern: str) -> list[str]: ...

    def size(self, path: str) -> int: ...

    def mtime(self, path: str) -> float: ...

    def read_bytes(self, path: str) -> bytes: ...

    def read_if_exists(self, path: str) -> bytes | None: ...

    def open_reader(self, path: str) -> Reader: ...

    def prefetch(self, ranges: Iterable[tuple[Reader, int, int]],
                 jobs: int | None = None) -> AbstractContextManager[None]:
        """While the returned context is open, the reads ``(reader, offset, size)`` (in the order
        they will be made, through those readers' ``readinto``/``read``) may be fetched ahead,
        ``jobs`` requests at a time; memory stays bounded by the requests in flight. Local
        storage does nothing (positioned reads are already at disk speed); an object store
        runs ranged GETs in parallel (:mod:`ckptool.io.prefetch`). ``ranges`` may be a
        generator: it is consumed only by a storage that uses it."""
        ...

    def makedirs(self, path: str) -> None: ...

    def temp_name(self, path: str) -> str: ...

    def open_write(self, path: str) -> Writer: ...

    def fsync_file(self, f: Writer) -> None: ...

    def start_writeback(self, f: Writer, offset: int, length: int) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def remove_if(self, path: str, expect: bytes) -> bool:
        """Delete ``path`` only if it still holds ``expect`` (on an object store the store's
        conditional delete); False, nothing deleted, otherwise."""
        ...

    def write_bytes_atomic(self, path: str, data: bytes, expect: object = ANY) -> bool: ...

    # -- deletion capabilities (issue 27, helper "deletion"): path identity, file kinds, the lock

    def same_dir(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` are one directory by identity (device and inode locally,
        through symlinks; the normalised URL on an object store), never a string compare."""
        ...

    def path_key(self, path: str) -> str:
        """A key equal for two spellings of one path (the real path locally)."""
        ...

    def kind(self, path: str) -> str | None:
        """``"file"`` (a regular file, through symlinks), ``"dir"``, ``"other"`` (a FIFO, socket,
        device, a link to one) or None when nothing is there."""
        ...

    def lock(self, directory: str, **options: Unpack[LockOptions]) -> AbstractContextManager[object]:
        """DIR's advisory lock (:class:`ckptool.io.lock.DirLock` locally; none on an object store)."""
        ...

    def lock_held(self, directory: str, dir_fd: int | None = None) -> bool:
        """Whether another process holds DIR's lock now, without taking it (``dir_fd``: DIR's
        descriptor, locally)."""
        ...

    def open_dir(self, path: str, follow: bool = True) -> LocalDir | PathDir:
        """DIR held open (by descriptor locally, :class:`ckptool.io.dirfd.PathDir` otherwise)."""
        ...

    def relpath(self, path: str, start: str) -> str:
        """``path`` relative to the directory ``start`` ("." when they are one)."""
        ...

    def walk_runs(self, root: str, *, exclude: Iterable[str] = (), scan: bool = False,
                  one_file_system: bool = False, follow_symlinks: bool = False) -> Iterator[LocalDir | PathDir]:
        """The run directories below ROOT (ROOT included), each yielded open (:mod:`ckptool.io.walk`)."""
        ...


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
        raise atomic.os_error(path, exc, "open") from None
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


def raise_truncated(path: str, offset: int, want: int, got: int) -> NoReturn:
    from ckptool.errors import CorruptError

    raise CorruptError(
        f"{path}: truncated: read {got} of {want} bytes at offset {offset} (file too short)"
    )


class LocalStorage(LocalCapabilities):
    """The local file system."""

    sep = os.sep
    atomic_rename = True
    concurrent_reads = True  # positioned reads from several threads at once (verify: one per core)

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
            raise atomic.os_error(path, exc, "list") from None

    def glob(self, directory: str, pattern: str) -> list[str]:
        """Names in ``directory`` matching a glob ``pattern`` (no recursion)."""
        try:
            names = os.listdir(directory or ".")
        except OSError:
            return []
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

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
            raise atomic.os_error(path, exc, "read") from None
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
        """A new file (never an existing one) for :class:`ckptool.io.atomic.AtomicFile`."""
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

    # Used by prune/state/du (ckptool/manage.py); a remote Storage may lack them.
    def lstat(self, path: str) -> os.stat_result | None:
        """``os.lstat`` (symlinks not followed); None when the path does not exist."""
        try:
            return os.lstat(path)
        except FileNotFoundError:
            return None

    def realpath(self, path: str) -> str:
        return os.path.realpath(path)

    def lock(self, directory: str, **options: Unpack[LockOptions]) -> DirLock:
        """DIR's lock (:class:`ckptool.io.lock.DirLock`) as a context manager; ``options``
        are DirLock's ``timeout`` and ``dir_fd``."""
        from ckptool.io.lock import DirLock

        return DirLock(directory or ".", **options)

    def lock_held(self, directory: str, dir_fd: int | None = None) -> bool:
        from ckptool.io.lock import is_locked

        return is_locked(directory, dir_fd)

    def write_bytes_atomic(self, path: str, data: bytes, expect: object = ANY, sync: bool = True) -> bool:
        """Replace ``path`` with ``data`` atomically: :func:`ckptool.io.atomic.write_bytes`
        (temp file, fsync, rename, directory fsync; ``expect`` as documented there)."""
        return atomic.write_bytes(self, path, data, sync=sync, expect=expect)

    def read_if_exists(self, path: str) -> bytes | None:
        """The regular file's bytes, None when absent (a FIFO or device is refused, unread)."""
        try:
            return self.read_bytes(path)
        except MissingError:
            return None


LOCAL = LocalStorage()


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")
