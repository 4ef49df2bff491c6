"""``DIR/kept/``: the checkpoint directory that holds what prune keeps out of a running
trainer's reach (README, "Kept means kept"), and the one way a file gets a second name
there (:func:`place_file`).

TF's CheckpointManager and Saver delete from the list they hold in memory, by a glob of
``DIR/<prefix>*``: a file of ``DIR/kept/`` is never one of theirs. A local file is hard-linked
there (the same inode: nothing copied, and once linked no delete in DIR can take it), through
the directories' descriptors; across file systems, and on an object store (no hard links), it
is copied (ranged reads, one PUT or multipart upload; server-side bytes are not assumed).
A name already in ``kept/`` is never overwritten. A copy is the same file only once its bytes
are compared (:func:`same_file`): the same size is no proof (a checkpoint saved again under its
name has data files of the same size).
"""

from __future__ import annotations

import errno
import math
import os
import stat as _stat
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format.json_doc import dump_json, load_json
from ckptool.io.control.state import STATE_FILENAME
from ckptool.io.oserrors import os_error
from ckptool.io.safety.atomic import link_or_copy, publish, tempstate_name
from ckptool.io.safety.dirfd import LocalDir, PathDir

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Reader, Storage

KEPT_DIRNAME = "kept"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_COPY_CHUNK = 8 << 20


def is_kept_dir(storage: Storage, path: str) -> bool:
    """Whether ``path`` is a run's ``kept/`` directory: named ``kept``, inside a directory that
    has a ``checkpoint`` state file (a run named ``kept`` beside no run is an ordinary one)."""
    p = path.rstrip("/")
    if storage.basename(p) != KEPT_DIRNAME:
        return False
    parent = storage.dirname(p)
    return storage.isfile(storage.join(parent, STATE_FILENAME) if parent else STATE_FILENAME)


def kept_path(storage: Storage, directory: str, name: str = "") -> str:
    """``DIR/kept`` (or ``DIR/kept/NAME``) as a path to show."""
    k = storage.join(directory, KEPT_DIRNAME) if directory else KEPT_DIRNAME
    return storage.join(k, name) if name else k


def open_kept(storage: Storage, d: Dir, create: bool) -> Dir | None:
    """``DIR/kept`` held open (made when ``create``); None when it is not there and not
    made. Anything but a directory there (a file, a symlink) is refused: one CkptError."""
    where = d.join(KEPT_DIRNAME)
    if isinstance(d, LocalDir):
        st = d.lstat(KEPT_DIRNAME)
        if st is None:
            if not create:
                return None
            try:
                os.mkdir(KEPT_DIRNAME, 0o777, dir_fd=d.fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise os_error(where, exc, "make the directory") from None
            st = d.lstat(KEPT_DIRNAME)
        if st is None or not _stat.S_ISDIR(st.st_mode):
            raise CkptError(f"{where}: not a directory (a file or a symlink); refusing to keep checkpoints there")
        return d.subdir(KEPT_DIRNAME)
    if storage.isdir(where):
        return PathDir(storage, where)
    if storage.exists(where):
        raise CkptError(f"{where}: not a directory; refusing to keep checkpoints there")
    if not create:
        return None
    storage.makedirs(where)
    return _RemoteKept(storage, where)


class _RemoteKept(PathDir):
    """``kept/`` on an object store before its first object: a prefix with nothing under it yet."""

    def __init__(self, storage: Storage, path: str):  # no isdir check: object stores have no empty dirs
        self.storage, self.path = storage, path

    def names(self) -> list[str]:
        return self.storage.listdir(self.path) if self.storage.isdir(self.path) else []


def place_file(d: Dir, kept: Dir, name: str, kept_name: str, *,
               follow: bool = False, sync: bool = True) -> str:
    """Give ``d/name`` the second name ``kept/kept_name``: ``"link"`` (a hard link) or ``"copy"``
    (across file systems, or on an object store). FileExistsError when ``kept_name`` exists;
    FileNotFoundError when ``name`` has gone. ``follow``: ``name`` is a symlink inside DIR
    (the file it names gets the second name)."""
    if isinstance(d, LocalDir) and isinstance(kept, LocalDir):
        try:
            os.link(name, kept_name, src_dir_fd=d.fd, dst_dir_fd=kept.fd, follow_symlinks=follow)
            return "link"
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EMLINK, errno.EOPNOTSUPP):
                raise
        _copy_local(d, kept, name, kept_name, sync)
        return "copy"
    storage = kept.storage if isinstance(kept, PathDir) else None
    if storage is None:  # pragma: no cover - a local DIR has a local kept/
        raise CkptError(f"{kept.path}: not on the same storage as {d.path}")
    target = kept.join(kept_name)
    if storage.exists(target):
        raise FileExistsError(errno.EEXIST, "exists", target)
    src = d.join(name)
    if not storage.isfile(src):
        raise FileNotFoundError(errno.ENOENT, "no such file", src)
    publish([link_or_copy(storage, src, target, sync=sync)])
    return "copy"


def _copy_local(d: LocalDir, kept: LocalDir, name: str, kept_name: str, sync: bool) -> None:
    """A copy through the descriptors: ``kept/NAME.tempstate<N>``, fsync, then linked to its
    name (never over an existing one) and the temporary unlinked."""
    tmp = tempstate_name(kept_name)
    src = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=d.fd)
    try:
        dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=kept.fd)
        try:
            try:
                while True:
                    chunk = os.read(src, _COPY_CHUNK)
                    if not chunk:
                        break
                    os.write(dst, chunk)
                if sync:
                    os.fsync(dst)
            finally:
                os.close(dst)
            os.link(tmp, kept_name, src_dir_fd=kept.fd, dst_dir_fd=kept.fd, follow_symlinks=False)
        finally:
            try:
                os.unlink(tmp, dir_fd=kept.fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(src)


def same_file(d: Dir, name: str, kept: Dir, kept_name: str, *, deep: bool = True) -> bool:
    """Whether ``kept/kept_name`` holds ``d/name``: the same inode locally; else (a copy) the same
    size and the same bytes, compared chunk by chunk (:func:`same_bytes`). Not ``deep``: only an
    ``.index``'s bytes are compared (its CRCs name its data: enough to tell which checkpoint a
    name of kept/ holds, never to prove that a data file there holds that checkpoint's bytes)."""
    a, b = d.lstat(name), kept.lstat(kept_name)
    if a is not None and _stat.S_ISLNK(a.st_mode):
        a = d.stat(name)
    if a is None or b is None or not _stat.S_ISREG(b.st_mode):
        return False
    if isinstance(d, LocalDir) and a.st_ino and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    if a.st_size != b.st_size:
        return False
    if not deep and not kept_name.endswith(".index"):
        return True
    return same_bytes(d, name, kept, kept_name, a.st_size)


def same_bytes(d: Dir, name: str, kept: Dir, kept_name: str, size: int) -> bool:
    """Whether the first ``size`` bytes of ``d/name`` and ``kept/kept_name`` are the same and
    neither file is longer, read :data:`_COPY_CHUNK` at a time (memory bounded; a file that
    goes while read is not the same)."""
    try:
        with _Ranged(d, name, follow=True) as a, _Ranged(kept, kept_name, follow=False) as b:
            off = 0
            while off < size:
                n = min(_COPY_CHUNK, size - off)
                if a.read(off, n) != b.read(off, n):
                    return False
                off += n
            return a.read(size, 1) == b"" and b.read(size, 1) == b""
    except (OSError, CkptError):
        return False


class _Ranged:
    """A file of a directory read by offset: through the directory's descriptor locally (``follow``:
    a symlink inside DIR is read through), by ranged reads on an object store."""

    def __init__(self, d: Dir, name: str, follow: bool):
        self.fd: int | None = None
        self.reader: Reader | None = None
        if isinstance(d, LocalDir):
            self.fd = os.open(name, os.O_RDONLY | (0 if follow else _NOFOLLOW), dir_fd=d.fd)
        elif isinstance(d, PathDir):
            self.reader = d.storage.open_reader(d.join(name))
        else:  # pragma: no cover - every Dir is one of the two
            raise CkptError(f"{d.join(name)}: cannot be read by offset")

    def read(self, off: int, n: int) -> bytes:
        if self.fd is not None:
            out = b""
            while len(out) < n:
                chunk = os.pread(self.fd, n - len(out), off + len(out))
                if not chunk:
                    break
                out += chunk
            return out
        if self.reader is None or off >= self.reader.size:
            return b""
        return bytes(self.reader.read(off, min(n, self.reader.size - off)))

    def __enter__(self) -> _Ranged:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
        if self.reader is not None:
            self.reader.close()


#: ``DIR/kept/.ckptool-clock``: TF1 Saver's every-N-hours clock for DIR, carried across prune runs
#: (a Saver rewrites DIR's state file at every save, without timestamps: the clock cannot live there).
CLOCK_FILENAME = ".ckptool-clock"
_CLOCK_KEY = "tf1_last_preserved_timestamp"
_CLOCK_MAX_BYTES = 4096


def read_clock(storage: Storage, d: Dir) -> tuple[float, str | None] | None:
    """The TF1 every-N-hours clock ``DIR/kept/`` carries for DIR: (the time the next keep is N
    hours after, as :func:`ckptool.ops.retain.retention.sweep` keeps it; DIR's latest checkpoint
    when it was written); None when there is none or the file is not one (the clock then starts
    again from the oldest checkpoint, as on a first run)."""
    try:
        kept = open_kept(storage, d, create=False)
        if kept is None:
            return None
        with kept:
            st = kept.lstat(CLOCK_FILENAME)  # a file over the bound is not read at all
            raw = kept.read(CLOCK_FILENAME) if st is not None and st.st_size <= _CLOCK_MAX_BYTES else None
        where = kept.join(CLOCK_FILENAME)
        doc = load_json(raw, where, max_bytes=_CLOCK_MAX_BYTES, what="a clock file") if raw else None
    except (OSError, CkptError):
        return None
    t = doc.get(_CLOCK_KEY) if isinstance(doc, dict) else None
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t):
        return None
    latest = doc.get("latest") if isinstance(doc, dict) else None
    return float(t), latest if isinstance(latest, str) else None


def write_clock(storage: Storage, d: Dir, t: float, latest: str | None) -> None:
    """Carry the TF1 every-N-hours clock ``t`` in ``DIR/kept/`` (made when absent), atomically, with
    DIR's latest checkpoint (a Saver started again no longer lists it: its clock starts again)."""
    kept = open_kept(storage, d, create=True)
    if kept is None:  # pragma: no cover - create=True makes it
        return
    with kept:
        where = kept.join(CLOCK_FILENAME)
        kept.replace(CLOCK_FILENAME, dump_json({_CLOCK_KEY: t, "latest": latest}, where, indent=None))


def fsync_dir(kept: Dir) -> None:
    """Make the new names in ``kept/`` durable (local directories only)."""
    if isinstance(kept, LocalDir):
        try:
            os.fsync(kept.fd)
        except OSError:
            pass


__all__ = ["CLOCK_FILENAME", "KEPT_DIRNAME", "fsync_dir", "is_kept_dir", "kept_path", "open_kept", "place_file",
           "read_clock", "same_bytes", "same_file", "write_clock"]
