"""The one way ckptool puts a file on disk: written beside its target, then renamed into place.

:class:`AtomicFile` writes under a temporary name beside the target
(``storage.temp_name``: TF's ``TARGET.tempstate<N>``), fsyncs it (unless
``sync=False``), renames it over the target and fsyncs the directory.
:func:`publish` does that for a group of files, in order, the last one last:
a checkpoint's data shards, then its index, so that once the index exists the
checkpoint is whole. On any failure (an exception, KeyboardInterrupt, a
SIGTERM turned into SystemExit by the CLI) every temporary is removed; and
every live temporary is in a registry (:func:`live_temporaries`) that the
CLI's signal handler sweeps (:func:`remove_live_temporaries`).

A storage without atomic renames (an object store: ``storage.atomic_rename``
is False) writes under the target name directly: the object appears only when
its writer is closed (one PUT, or a completed multipart upload), and a
discarded one never appears.

Errors of the disk (ENOSPC, EIO, EACCES) become :class:`CkptError` naming the
target, never the temporary (:func:`ckptool.io.oserrors.os_error`, the one wrapper of an
OSError).

The files need not be a whole :class:`~ckptool.io.base.Storage`: anything with the
few methods of :class:`~ckptool.io.base.Files` will do. ``ckptool.io.safety.dirfd.LocalDir.replace``
(the state file, prune's journal) passes one bound to an open directory's descriptor, so
that it too is written here, by the same code.

The overwrite rule that comes before a write is :func:`ckptool.io.safety.destination.check_destination`.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.io.base import ANY, Files
from ckptool.io.oserrors import os_error

if TYPE_CHECKING:
    from ckptool.format.coding import AnyBuffer
    from ckptool.io.base import Storage, Writer


#: Temporaries written now, by this process (name -> where): what a signal handler removes.
_LIVE: dict[str, Files] = {}
_LIVE_LOCK = threading.Lock()


def live_temporaries() -> list[str]:
    """The temporary files this process is writing now (not yet published or removed)."""
    with _LIVE_LOCK:
        return list(_LIVE)


def remove_live_temporaries() -> int:
    """Remove every live temporary (for a signal handler or an exit path), and the directories
    :func:`make_output_dir` made that are still empty; how many temporaries went."""
    with _LIVE_LOCK:
        live = list(_LIVE.items())
        _LIVE.clear()
    gone = 0
    for name, files in live:
        try:
            files.remove(name)
            gone += 1
        except (OSError, CkptError):
            pass
    with _LIVE_LOCK:  # and the directories made for outputs that never came, while empty
        for d in sorted(_MADE_DIRS, key=len, reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                continue
            _MADE_DIRS.discard(d)
    return gone


def _register(name: str, files: Files) -> None:
    with _LIVE_LOCK:
        _LIVE[name] = files


def _unregister(name: str) -> None:
    with _LIVE_LOCK:
        _LIVE.pop(name, None)


#: Directories this process created for outputs (:func:`make_output_dir`): an abandoned write
#: removes them again while they are empty, so an interrupted write leaves no empty directory.
_MADE_DIRS: set[str] = set()


def make_output_dir(storage: Storage, directory: str) -> None:
    """``storage.makedirs(directory)`` for an output, remembering the directories it creates
    (where directories are real: a local storage). Every writer makes its
    output's directory through here; :meth:`AtomicFile.discard` and :func:`publish`'s failure
    path then remove the ones still empty (:func:`_drop_empty_dirs`)."""
    if not storage.local:  # an object store: no directories to leave behind
        storage.makedirs(directory)
        return
    missing = []
    d = directory
    while d and not storage.isdir(d):
        missing.append(d)
        parent = storage.dirname(d)
        if parent == d:
            break
        d = parent
    storage.makedirs(directory)
    if missing:
        with _LIVE_LOCK:
            _MADE_DIRS.update(missing)


def _drop_empty_dirs(storage: Files, target: str) -> None:
    """Remove the directories :func:`make_output_dir` made for ``target``, innermost first,
    while they are empty (a directory holding anything, another write's file included, stays)."""
    d = storage.dirname(target)
    while True:
        with _LIVE_LOCK:
            if d not in _MADE_DIRS:
                return
            try:
                os.rmdir(d)
            except OSError:
                return
            _MADE_DIRS.discard(d)
        d = storage.dirname(d)


def _keep_dirs(files: Sequence[AtomicFile]) -> None:
    """Published files live in their directories now: those are outputs, not leftovers."""
    with _LIVE_LOCK:
        for f in files:
            d = f.storage.dirname(f.target)
            while d in _MADE_DIRS:
                _MADE_DIRS.discard(d)
                d = f.storage.dirname(d)


def tempstate_name(path: str) -> str:
    """A fresh temporary name beside ``path``: TF's ``TARGET.tempstate<N>`` (N, 64 random bits),
    what every Storage's ``temp_name`` gives (``layout.temp_owner`` knows it)."""
    return f"{path}.tempstate{uuid.uuid4().int & ((1 << 64) - 1)}"


class AtomicFile:
    """One file being written for ``target``; see the module docstring.

    ``write``, then either :meth:`seal` and :meth:`publish` (or :func:`publish`
    for a group), or :meth:`discard`. As a context manager it publishes on a
    clean exit and discards on an error.
    """

    def __init__(self, storage: Files, target: str, *, sync: bool = True, link_from: str | None = None):
        self.storage = storage
        self.target = target
        self.sync = sync
        self.atomic = bool(storage.atomic_rename)
        self.name = storage.temp_name(target) if self.atomic else target
        self.written = 0
        self.published = False
        self._sealed = False
        self.file: Writer | None = None
        if self.atomic:
            _register(self.name, storage)
        try:
            if link_from is not None:
                os.link(link_from, self.name)
                self._sealed = True  # a second name of a durable file: nothing to write or sync
            else:
                self.file = storage.open_write(self.name)
        except OSError as exc:
            self.discard()
            raise os_error(target, exc, "create") from None
        except BaseException:
            self.discard()
            raise

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            publish([self])
        else:
            self.discard()

    def writer(self) -> Writer:
        """The file being written (a linked file has none: it is sealed from the start)."""
        if self.file is None:
            raise CkptError(f"{self.target}: a linked file is not written")
        return self.file

    def write(self, data: AnyBuffer) -> None:
        try:
            self.writer().write(data)  # type: ignore[arg-type]  # an ndarray is a Buffer (AnyBuffer)
        except OSError as exc:
            raise os_error(self.target, exc, "write") from None
        self.written += memoryview(data).nbytes  # type: ignore[arg-type]  # as above

    def start_writeback(self, offset: int, length: int) -> None:
        self.storage.start_writeback(self.writer(), offset, length)

    def seal(self) -> None:
        """fsync (when syncing) and close: the bytes are final. On an object store the close
        publishes the object."""
        if self._sealed:
            return
        try:
            if self.sync:
                self.storage.fsync_file(self.writer())
            self.writer().close()
        except OSError as exc:
            raise os_error(self.target, exc, "write") from None
        self._sealed = True
        if not self.atomic:
            self.published = True

    def publish(self) -> None:
        """Rename into place (after :meth:`seal`); the directory is not fsynced here."""
        self.seal()
        if self.published:
            return
        try:
            self.storage.rename(self.name, self.target)
        except OSError as exc:
            raise os_error(self.target, exc, "rename into place") from None
        self.published = True
        _unregister(self.name)

    def discard(self) -> None:
        """Drop what was written (idempotent): close and remove the temporary, or abandon the
        upload. A published file is not touched."""
        if self.published:
            return
        f = self.file
        if not self.atomic:
            discard = getattr(f, "discard", None)
            if discard is not None:
                discard()
            return
        if f is not None:
            try:
                f.close()
            except Exception:
                pass
        try:
            self.storage.remove(self.name)
        except (OSError, CkptError):
            pass
        _unregister(self.name)
        _drop_empty_dirs(self.storage, self.target)


def publish(files: Sequence[AtomicFile], *, sync: bool | None = None,
            check: Callable[[], bool] | None = None) -> bool:
    """Seal every file, then rename them into place in order, the last one last; fsync the
    directories after. ``check`` (optional) is called once all are sealed, before any rename:
    False publishes nothing (the temporaries are removed) and returns False.

    On any failure nothing stays under a temporary name, and the files this call renamed
    into place are removed again when the last one did not make it (no data file under its
    final name without its index)."""
    before = [f.published for f in files]
    try:
        for f in files:
            f.seal()
        if check is not None and not check():
            for f in files:
                f.discard()
            return False
        for f in files:
            f.publish()
    except BaseException:
        for f in files:
            f.discard()
        if files and not files[-1].published:  # what this call put in place goes again
            for f, was in zip(files, before):
                if f.published and not was:
                    try:
                        f.storage.remove(f.target)
                    except (OSError, CkptError):
                        pass
                    _drop_empty_dirs(f.storage, f.target)
        raise
    _keep_dirs(files)
    syncing = any(f.sync for f in files) if sync is None else sync
    if syncing:
        for d in dict.fromkeys(f.storage.dirname(f.target) for f in files if f.atomic):
            files[0].storage.fsync_dir(d)
    return True


def write_bytes(storage: Files, target: str, data: AnyBuffer, *, sync: bool = True, expect: object = ANY) -> bool:
    """Replace ``target`` with ``data`` atomically. With ``expect`` (bytes, or None for
    "absent"), only if ``target`` still holds exactly that once the new file is ready; False,
    nothing changed, otherwise. (The check narrows, not closes, the window in which a writer
    that takes no lock, TF, may land between it and the rename.)"""
    f = AtomicFile(storage, target, sync=sync)
    try:
        f.write(data)
    except BaseException:
        f.discard()
        raise
    check = None if expect is ANY else (lambda: storage.read_if_exists(target) == expect)
    return publish([f], check=check)


def link_or_copy(storage: Storage, src: str, target: str, *, sync: bool = True) -> AtomicFile:
    """An :class:`AtomicFile` for ``target`` holding ``src``'s bytes: a hard link where the
    storage is local and linking works, else a copy (ranged reads on an object store). To be
    published with :func:`publish`; removed on any failure."""
    if storage.local:
        try:
            return AtomicFile(storage, target, sync=sync, link_from=src)
        except CkptError:
            pass  # another file system, or no hard links: copy
    reader = storage.open_reader(src)  # errors name the source
    try:
        f = AtomicFile(storage, target, sync=sync)
        try:
            off = 0
            while off < reader.size:
                n = min(8 << 20, reader.size - off)
                f.write(reader.read(off, n))
                off += n
        except BaseException:
            f.discard()
            raise
    finally:
        reader.close()
    return f


__all__ = ["AtomicFile", "publish", "make_output_dir", "write_bytes", "link_or_copy", "live_temporaries",
           "remove_live_temporaries", "tempstate_name"]
