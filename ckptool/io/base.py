"""What the rest of ckptool asks of a place that holds files: the protocols every backend
(:mod:`ckptool.io.backends`) implements and every user of files is written against.

- :class:`Storage`: a place that holds files (the local file system, an object store);
- :class:`Reader` / :class:`Writer`: one file open for positioned reads, one being written;
- :class:`Files`: the few methods the atomic write (:mod:`ckptool.io.safety.atomic`) needs,
  which a Storage has and so has a directory held by its descriptor;
- :class:`Dir`: one directory held open (by descriptor locally, by path on an object store);
- :data:`ANY`: "whatever the file holds now", the ``expect`` of a write that checks nothing;
- :class:`LockOptions`: the keywords of :meth:`Storage.lock`.

This module imports nothing of ckptool at run time, so every module of io/ may import it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from typing_extensions import Buffer, TypedDict, Unpack

    from ckptool.format.coding import AnyBuffer

    class LockOptions(TypedDict, total=False):  # the keywords of Storage.lock
        timeout: float | None
        dir_fd: int | None
        on_wait: Callable[[float], None] | None

#: The one "whatever the target holds now" of ``expect`` (the atomic write,
#: :meth:`Storage.write_bytes_atomic`, :meth:`Dir.replace`).
ANY = object()


class Reader(Protocol):
    """One file open for positioned reads (a local file, or an object's ranged GETs); a
    :class:`ckptool.format.table.PositionedReader` too."""

    path: str
    size: int

    def read(self, offset: int, size: int, /) -> bytearray: ...

    def readinto(self, offset: int, buf: AnyBuffer, /) -> None: ...

    def close(self) -> None: ...


class Writer(Protocol):
    """A new file being written: ``open(path, "xb")``, or an upload published at close."""

    def write(self, data: Buffer, /) -> int: ...

    def flush(self) -> None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


class Files(Protocol):
    """What the atomic write asks of the place it writes to (a Storage has all of it; so does
    a directory held by its descriptor: :class:`ckptool.io.safety.dirfd.FdFiles`)."""

    @property
    def atomic_rename(self) -> bool: ...

    def temp_name(self, path: str) -> str: ...

    def open_write(self, path: str) -> Writer: ...

    def fsync_file(self, f: Writer) -> None: ...

    def start_writeback(self, f: Writer, offset: int, length: int) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def dirname(self, path: str) -> str: ...

    def fsync_dir(self, path: str) -> None: ...

    def read_if_exists(self, path: str) -> bytes | None: ...


class Dir(Protocol):
    """One directory held open: :class:`ckptool.io.safety.dirfd.LocalDir` (by its descriptor,
    ``fd``; ``dev`` its device) or :class:`ckptool.io.safety.dirfd.PathDir` (by path: ``fd`` and
    ``dev`` None). Names are entries of the directory; a symlink is never followed unless said."""

    @property
    def path(self) -> str: ...

    @property
    def fd(self) -> int | None: ...

    @property
    def dev(self) -> int | None: ...

    def close(self) -> None: ...

    def __enter__(self) -> Dir: ...

    def __exit__(self, *exc: object) -> Literal[False]: ...

    def join(self, name: str) -> str: ...

    def names(self) -> list[str]: ...

    def lstat(self, name: str) -> os.stat_result | None: ...

    def stat(self, name: str) -> os.stat_result | None: ...

    def link_target(self, name: str) -> str: ...

    def realpath(self) -> str: ...

    def read(self, name: str) -> bytes | None: ...

    def unlink(self, name: str) -> None: ...

    def unlink_if(self, name: str, expect: bytes) -> bool: ...

    def subdir(self, name: str) -> Dir: ...

    def rmtree(self, name: str) -> None: ...

    def replace(self, name: str, data: bytes, expect: object = ANY) -> bool: ...


class Storage(Protocol):
    """What the library asks of a place that holds files: the local file system
    (:class:`ckptool.io.backends.local.LocalStorage`) and an object store through fsspec
    (:class:`ckptool.io.backends.remote.RemoteStorage`). ``local``: its paths are this
    machine's files (descriptors, hard links, inodes, directories of their own); only io/
    asks it, everything above calls the methods that differ."""

    sep: str
    atomic_rename: bool
    concurrent_reads: bool  # readers may be used from several threads at once to advantage
    local: bool
    # reading a file's bytes again costs no transfer (this machine's files, from the page cache):
    # a large value may be read twice rather than held (convert's object graph)
    cheap_rereads: bool

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

    def find(self, root: str, pattern: str = "*") -> list[str]:
        """Every regular file below ``root`` (recursively, no directory symlink followed) whose
        name matches the glob ``pattern``, as paths spelled from ``root``, sorted."""
        ...

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
        runs ranged GETs in parallel (:mod:`ckptool.io.backends.prefetch`). ``ranges`` may be
        a generator: it is consumed only by a storage that uses it."""
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

    # -- path identity, file kinds, directories held open, trees of runs, the lock

    def same_file(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` are one file or directory by identity (device and inode
        locally, through symlinks; the normalised URL on an object store), never a string
        compare of the spellings."""
        ...

    def kind(self, path: str) -> str | None:
        """``"file"`` (a regular file, through symlinks), ``"dir"``, ``"other"`` (a FIFO, socket,
        device, a link to one) or None when nothing is there."""
        ...

    def lock(self, directory: str, **options: Unpack[LockOptions]) -> AbstractContextManager[object]:
        """DIR's lock (:class:`ckptool.io.control.lock.DirLock` locally; the lock object of
        :mod:`ckptool.io.backends.remote_lock` on an object store)."""
        ...

    def lock_held(self, directory: str, dir_fd: int | None = None) -> bool:
        """Whether another process holds DIR's lock now, without taking it (``dir_fd``: DIR's
        descriptor, :attr:`Dir.fd`)."""
        ...

    def open_dir(self, path: str, follow: bool = True) -> Dir:
        """DIR held open (by descriptor locally, by path otherwise)."""
        ...

    def relpath(self, path: str, start: str) -> str:
        """``path`` relative to the directory ``start`` ("." when they are one)."""
        ...

    def walk_runs(self, root: str, *, exclude: Iterable[str] = (), scan: bool = False,
                  one_file_system: bool = False, follow_symlinks: bool = False) -> Iterator[Dir]:
        """The run directories below ROOT (ROOT included), each yielded open
        (:mod:`ckptool.io.layout.walk`)."""
        ...

    def listed(self, root: str, reads: Iterable[str] = (), reread: Iterable[str] = ()) -> AbstractContextManager[None]:
        """While open, ROOT's tree is answered from one listing of it and the files named by a
        glob of ``reads`` are read at once (those of ``reread`` again once their directory is
        locked): an object store (:mod:`ckptool.io.backends.remote_listing`); a local disk asks
        the file system as it goes."""
        ...

    def walk_dirs(self, top: str, unreadable: Callable[[str, str], None]) -> Iterator[str]:
        """Every directory below TOP (TOP included), in sorted order, symlinks not followed; one
        that cannot be listed or entered is given to ``unreadable(path, reason)`` instead
        (running out of file descriptors is an error, not a reason)."""
        ...


__all__ = ["ANY", "Dir", "Files", "Reader", "Storage", "Writer"]
