"""The directory lock: ``DIR/.ckptool.lock``, an advisory ``flock`` that keeps a save
and a prune (or two prunes) of one directory from interleaving.

- Writers wait for it, bounded (:data:`DEFAULT_TIMEOUT`), *before* they write, so a
  save beside a running prune waits instead of writing and then failing.
- The file is opened read-only (``flock`` needs no write access) and created with
  mode 0666 less the umask, so another user who may write the directory can lock it.
- Re-entrant within a process: a ``save`` holding it may call the recording step that
  takes it again (two ``flock`` on two descriptors of one process would deadlock).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal

from ckptool.errors import CkptError, RefusedError

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage

LOCK_FILENAME = ".ckptool.lock"
DEFAULT_TIMEOUT = 30.0  # seconds a writer waits for the lock
_POLL = 0.05

_held: dict[tuple[int, int], list[int]] = {}  # (st_dev, st_ino) of the lock file -> [fd, depth]
_mutex = threading.Lock()


class DirLock:
    """``with DirLock(directory, timeout): ...``; ``dir_fd`` opens the lock file relative
    to an open directory (no path lookup)."""

    def __init__(self, directory: str, timeout: float | None = DEFAULT_TIMEOUT, dir_fd: int | None = None,
                 on_wait: Callable[[float], None] | None = None):
        self.directory = directory
        self.on_wait = on_wait  # called with the seconds waited so far, each time the lock is found held
        self.path = os.path.join(directory, LOCK_FILENAME)
        self.timeout = timeout
        self.dir_fd = dir_fd
        self._key: tuple[int, int] | None = None

    def __enter__(self) -> DirLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no advisory lock
            return self
        # O_NONBLOCK: a FIFO or device put in the lock's place must not make the open wait;
        # it is refused at once (fstat), before anything else is done.
        flags = (os.O_RDONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_NONBLOCK", 0))
        try:
            if self.dir_fd is not None:
                fd = os.open(LOCK_FILENAME, flags, 0o666, dir_fd=self.dir_fd)
            else:
                fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            why = "a symlink" if exc.errno == errno.ELOOP else exc.strerror
            raise CkptError(f"{self.path}: cannot open the lock file: {why}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise CkptError(f"{self.path}: not a regular file (a FIFO, socket or device); refusing to use it "
                            f"as the lock")
        key = (st.st_dev, st.st_ino)
        with _mutex:
            if key in _held:
                os.close(fd)
                _held[key][1] += 1
                self._key = key
                return self
        start = time.monotonic()
        deadline = None if self.timeout is None else start + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    os.close(fd)
                    raise held_refusal(self.directory, self.timeout, describe_holder(self.directory, key)) from None
                if self.on_wait is not None:
                    try:
                        self.on_wait(time.monotonic() - start)
                    except BaseException:
                        os.close(fd)
                        raise
                time.sleep(_POLL)
            except OSError as exc:
                os.close(fd)
                raise CkptError(f"{self.path}: cannot lock: {exc.strerror}") from None
        with _mutex:
            _held[key] = [fd, 1]
        self._key = key
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        if self._key is None:
            return False
        with _mutex:
            entry = _held[self._key]
            entry[1] -= 1
            if entry[1] == 0:
                del _held[self._key]
                os.close(entry[0])  # closing releases the flock
        self._key = None
        return False


PROC_LOCKS = "/proc/locks"


def _holder_pid(key: tuple[int, int]) -> int | None:
    """The PID holding the flock of the file ``(st_dev, st_ino)``, if the system says: on Linux
    ``/proc/locks`` lists each lock as ``N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE ...``;
    elsewhere, or when the holder is in another PID namespace, None."""
    try:
        with open(PROC_LOCKS, encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = (os.major(key[0]), os.minor(key[0]), key[1])
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":  # "->": a waiter, not the holder
            continue
        try:
            pid = int(parts[4])
            major, minor, ino = (int(x, 16) if i < 2 else int(x) for i, x in enumerate(parts[5].split(":")))
        except ValueError:
            continue
        if (major, minor, ino) == want and pid > 0:
            return pid
    return None


def _lock_key(directory: str) -> tuple[int, int] | None:
    try:
        st = os.stat(os.path.join(directory or ".", LOCK_FILENAME))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def lock_holder(directory: str) -> int | None:
    """The PID holding ``directory``'s lock now, if the system says (else None)."""
    key = _lock_key(directory)
    return None if key is None else _holder_pid(key)


def describe_holder(directory: str, key: tuple[int, int] | None = None) -> str:
    """Who holds DIR's lock (``key``: the lock file's device and inode, when known): ``PID 1234
    (ckptool prune runs/)``, ``PID 1234``, or ``another process``."""
    key = key if key is not None else _lock_key(directory)
    pid = None if key is None else _holder_pid(key)
    if pid is None:
        return "another process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    if argv and os.path.basename(argv[0]).startswith("python") and len(argv) > 1:
        argv = argv[1:]
    if argv:
        argv[0] = os.path.basename(argv[0])
        shown = " ".join(" ".join(argv).split())  # one line, whatever the arguments hold
        return f"PID {pid} ({shown[:77] + '...' if len(shown) > 80 else shown})"
    return f"PID {pid}"


def held_refusal(directory: str, waited: float | None, holder: str) -> RefusedError:
    """The one refusal of a directory whose lock another process holds (save, prune, rm, state,
    whoever takes it; the flock here, the lock object of an object store), naming the holder
    (:func:`describe_holder` locally): ``DIR: its lock is held by PID 1234 (python train.py);
    not waiting for it`` (``waited`` 0), or ``...; gave up after waiting 30 s``."""
    how = "not waiting for it" if not waited else f"gave up after waiting {waited:g} s"
    return RefusedError(f"{directory or '.'}: its lock is held by {holder}; {how}")


def is_locked(directory: str, dir_fd: int | None = None) -> bool:
    """Whether another process holds DIR's lock now (without waiting, without creating it)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return False
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = (os.open(LOCK_FILENAME, flags, dir_fd=dir_fd)
              if dir_fd is not None else os.open(os.path.join(directory, LOCK_FILENAME), flags))
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CkptError(f"{os.path.join(directory, LOCK_FILENAME)}: not a regular file (a FIFO, socket or "
                            f"device); refusing to use it as the lock")
        with _mutex:
            if (st.st_dev, st.st_ino) in _held:
                return False  # ours
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        return False
    finally:
        os.close(fd)


def lock_directory(storage: Storage, directory: str, *, timeout: float | None = DEFAULT_TIMEOUT,
                   dir_fd: int | None = None,
                   on_wait: Callable[[float], None] | None = None) -> AbstractContextManager[object]:
    """The lock of DIR as a context manager: the storage's own (the flock for local
    directories, none on an object store). ``on_wait(seconds)`` is called while the lock is
    held elsewhere (DirLock's)."""
    if on_wait is None:
        return storage.lock(directory, timeout=timeout, dir_fd=dir_fd)
    return storage.lock(directory, timeout=timeout, dir_fd=dir_fd, on_wait=on_wait)


def lock_open(storage: Storage, d: Dir, *, timeout: float | None = DEFAULT_TIMEOUT,
              on_wait: Callable[[float], None] | None = None) -> AbstractContextManager[object]:
    """The lock of the open directory ``d``, taken through its descriptor when it has one."""
    return lock_directory(storage, d.path, timeout=timeout, dir_fd=d.fd, on_wait=on_wait)


__all__ = ["DEFAULT_TIMEOUT", "LOCK_FILENAME", "DirLock", "describe_holder", "held_refusal", "is_locked",
           "lock_directory", "lock_holder", "lock_open"]
