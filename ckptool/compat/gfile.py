"""``tf.io.gfile`` (and ``tf.compat.v1.gfile``) as TF 2.21 answers it, for local paths and the
object stores ckptool reads (``s3://``, ``gs://`` ...): what loaders and conversion scripts
use to find and read configs and vocabularies.

Local paths are listed in the order the directory yields them (``readdir``), as TF lists
them; ``glob`` matches one path component at a time (``*`` never crosses ``/``, hidden files
match) and returns the matches level by level in that order. Errors are TF's:
``NotFoundError("PATH; No such file or directory")`` when a missing file is first read,
``NotFoundError("Could not find directory PATH")`` from ``listdir``,
``FailedPreconditionError("PATH is not a directory")`` from ``makedirs``. Writing through
``GFile`` is offered for local files only. A scheme TF has no file system for (``ftp://``,
``hdfs://``, ``http(s)://``, ``foo://``) is TF's ``UnimplementedError`` (``isdir``: False), and
nothing is asked of the network (:mod:`ckptool.compat.schemes`).
"""

from __future__ import annotations

import errno
import fnmatch
import io
import os
from collections.abc import Iterator
from typing import Any

from ckptool.compat import errors
from ckptool.compat.offered import NotOfferedError
from ckptool.compat.reader import as_path
from ckptool.compat.schemes import served, tf_storage, unimplemented
from ckptool.compat.tflog import deprecated
from ckptool.errors import CkptError

_MODES = ("r", "w", "a", "r+", "w+", "a+")
_GLOB = "*?["


def _path(value: Any) -> str:
    return as_path(os.fspath(value) if isinstance(value, os.PathLike) else value)


def _remote(path: str) -> bool:
    """A URL: served by a storage (TF's answer on a scheme with no file system: :mod:`.schemes`)."""
    return "://" in path


def _os_error(path: str, exc: OSError) -> errors.OpError:
    cls = {errno.ENOENT: errors.NotFoundError, errno.EACCES: errors.PermissionDeniedError,
           errno.EISDIR: errors.FailedPreconditionError, errno.ENOTDIR: errors.FailedPreconditionError,
           errno.EEXIST: errors.AlreadyExistsError}.get(exc.errno or 0, errors.UnknownError)
    return cls(None, None, f"{path}; {exc.strerror}")


def exists(path: Any) -> bool:
    """Whether a file or directory exists at ``path``."""
    p = _path(path)
    if not _remote(p):
        return os.path.exists(p)
    storage, local = tf_storage(p)
    return storage.exists(local) or storage.isdir(local)


def isdir(path: Any) -> bool:
    """Whether ``path`` is a directory."""
    p = _path(path)
    if not _remote(p):
        return os.path.isdir(p)
    if not served(p):
        return False
    storage, local = tf_storage(p)
    try:
        return storage.isdir(local)
    except (OSError, CkptError):
        return False


def listdir(path: Any) -> list[str]:
    """The names in directory ``path`` (no ``.`` or ``..``), in the order the directory lists them."""
    p = _path(path)
    if not isdir(p):
        raise errors.NotFoundError(None, None, f"Could not find directory {p}")
    if not _remote(p):
        return os.listdir(p)
    storage, local = tf_storage(p)
    return [n.rstrip("/") for n in storage.listdir(local)]


def join(path: Any, *paths: Any) -> str:
    """``os.path.join`` for local paths, ``/``-joined for URLs."""
    p = _path(path)
    return os.path.join(p, *map(_path, paths)) if not _remote(p) else "/".join([p.rstrip("/"), *map(_path, paths)])


def glob(pattern: Any) -> list[str]:
    """The paths matching ``pattern`` (or, for a list of patterns, each one's in turn)."""
    if isinstance(pattern, (list, tuple)):
        return [m for p in pattern for m in glob(p)]
    p = _path(pattern)
    if not served(p):
        raise unimplemented(p)
    if not any(c in p for c in _GLOB):
        return [p] if exists(p) else []
    parts = p.split("/")
    first = next(i for i, part in enumerate(parts) if any(c in part for c in _GLOB))
    found = ["/".join(parts[:first]) or "."]  # TF names matches in the current directory ./NAME
    for depth, part in enumerate(parts[first:]):
        last = depth == len(parts) - first - 1
        nxt = []
        for d in found:
            try:
                names = listdir(d)
            except (errors.OpError, OSError, CkptError):
                continue
            for n in names:
                if fnmatch.fnmatchcase(n, part):
                    child = f"{d}/{n}" if d != "/" else f"/{n}"
                    if last or isdir(child):
                        nxt.append(child)
        found = nxt
    return found


def makedirs(path: Any) -> None:
    """Make directory ``path`` and its parents; no error when it exists."""
    p = _path(path)
    if _remote(p):
        storage, local = tf_storage(p)
        storage.makedirs(local)
        return
    try:
        os.makedirs(p, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = p
        while blocker and not os.path.exists(blocker):
            blocker = os.path.dirname(blocker)
        raise errors.FailedPreconditionError(None, None, f"{blocker} is not a directory") from None
    except OSError as exc:
        raise _os_error(p, exc) from None


def walk(top: Any, topdown: bool = True, onerror: Any = None) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(dirname, subdirs, files)`` for ``top`` and each directory below it."""
    t = _path(top)
    try:
        names = listdir(t)
    except errors.NotFoundError as exc:
        if onerror:
            onerror(exc)
        return
    subdirs = [n for n in names if isdir(join(t, n))]
    files = [n for n in names if n not in subdirs]
    here = (t, subdirs, files)
    if topdown:
        yield here
    for s in subdirs:
        yield from walk(join(t, s), topdown, onerror)
    if not topdown:
        yield here


class GFile:
    """``tf.io.gfile.GFile``: a file opened lazily (on first read or write); text modes
    read and write UTF-8 ``str``, ``b`` modes ``bytes``."""

    def __init__(self, name: Any, mode: str = "r") -> None:
        self._name = _path(name)
        self._mode = mode
        self._binary = "b" in mode
        plain = mode.replace("b", "")
        if plain not in _MODES:
            raise errors.InvalidArgumentError(None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self._plain = plain
        self._f: Any = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def mode(self) -> str:
        return self._mode

    def _file(self) -> Any:
        if self._f is None:
            if _remote(self._name):
                storage, local = tf_storage(self._name)
                if self._plain != "r":
                    raise NotOfferedError(f"writing {self._name} through tf.io.gfile is not offered by "
                                          "ckptool.compat.tf (local files only)")
                try:
                    self._f = io.BytesIO(storage.read_bytes(local))
                except (OSError, CkptError):
                    raise errors.NotFoundError(None, None, f"{self._name}; No such file or directory") from None
            else:
                try:
                    self._f = open(self._name, self._plain.replace("+", "") + "b" + ("+" if "+" in self._plain else ""))
                except OSError as exc:
                    raise _os_error(self._name, exc) from None
        return self._f

    def _value(self, data: bytes) -> Any:
        return data if self._binary else data.decode("utf-8")

    def size(self) -> int:
        return os.path.getsize(self._name) if not _remote(self._name) else len(self._file().getbuffer())

    def read(self, n: int = -1) -> Any:
        return self._value(self._file().read(-1 if n is None else n))

    def readline(self) -> Any:
        return self._value(self._file().readline())

    def readlines(self) -> list[Any]:
        return [self._value(line) for line in self._file().readlines()]

    def __iter__(self) -> GFile:
        return self

    def __next__(self) -> Any:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__

    def tell(self) -> int:
        return int(self._file().tell())

    def seek(self, offset: int | None = None, whence: int = 0, position: int | None = None) -> None:
        self._file().seek(position if offset is None else offset, whence)

    def write(self, file_content: Any) -> None:
        data = file_content.encode("utf-8") if isinstance(file_content, str) else bytes(file_content)
        self._file().write(data)

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def seekable(self) -> bool:
        return True

    def __enter__(self) -> GFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FastGFile(GFile):
    """``tf.compat.v1.gfile.FastGFile``: GFile, with TF's deprecation notice."""

    @deprecated("tensorflow.python.platform.gfile", "Use tf.gfile.GFile.")
    def __init__(self, name: Any, mode: str = "r") -> None:
        super().__init__(name, mode)
