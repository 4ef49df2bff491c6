"""Checkpoints on object storage (``s3://``, ``gs://``, ``memory://`` ...) through fsspec.

:class:`RemoteStorage` is the :class:`ckptool.io.storage.LocalStorage` interface
over an fsspec filesystem; :func:`storage_for_url` hands one out per protocol
(``ckptool.io.storage.storage_for`` calls it for every URL but ``file://``).

- Paths stay full URLs (``s3://bucket/run/ckpt-5``); join/dirname/basename
  work on the part after ``scheme://`` as POSIX paths.
- Reads are ranged: :class:`RemoteReader` fetches exactly the bytes asked
  (``fs.cat_file(path, start, end)``), so listing reads the index alone and a
  tensor costs its own byte range, never its whole shard.
- An object store has no atomic rename (``atomic_rename = False``): writers
  write the final names directly, data objects first and the index last. A
  file being written is uploaded only when it is closed (one PUT, or a
  multipart upload completed at close), so until then nothing exists under
  its name; :meth:`RemoteWriter.discard` abandons it.
- No advisory lock and no symlinks (no ``lock``/``lstat``): prune's callers
  fall back to size/mtime.
- The endpoint of an S3-compatible store comes from ``AWS_ENDPOINT_URL``
  (botocore >= 1.31 reads it; for older ones it is passed to s3fs here) or
  from fsspec's configuration (``~/.config/fsspec/*.json``, ``FSSPEC_S3_*``).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import threading
import time
import uuid
from contextlib import contextmanager

from ckptool.errors import CkptError, MissingError, UnsupportedError
from ckptool.io.storage import ANY, raise_truncated

#: pip extra per protocol (pyproject.toml's optional dependencies).
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
#: Bytes per ranged GET when a large read is split (bounds the extra copy).
READ_CHUNK = 64 << 20
#: Seconds for which size/mtime may answer from the directory listing that just named
#: the file (prune lists a directory, then asks each file's size and mtime: one LIST
#: instead of two HEADs per file). exists/isfile/reads always ask the store.
LISTED_TTL = 2.0
#: Read-ahead for sequential reads (``inspect --verify`` walking a shard): a read that
#: starts where the last one ended fetches a window that doubles from the first size
#: to the second; a lone read (one tensor) fetches exactly its range.
READAHEAD_MIN = 256 << 10
READAHEAD_MAX = 8 << 20
#: A file being written is kept in memory up to this size and PUT in one request;
#: past it, it streams to the store as a multipart upload completed at close.
PUT_LIMIT = 16 << 20


_NO_PARENT = "cannot write: no such bucket (or parent directory)"


class RemoteError(CkptError, OSError):
    """The object store refused or failed a request (credentials, network, permissions)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def split_url(url: str) -> tuple[str, str]:
    """``("s3://", "bucket/key")``; a path with no scheme gives ``("", path)``."""
    i = url.find("://")
    if i < 0:
        return "", url
    return url[: i + 3], url[i + 3:]


def protocol_of(url: str) -> str:
    scheme, _ = split_url(url)
    return scheme[:-3].lower() if scheme else ""


_LOCK = threading.Lock()
_FILESYSTEMS: dict[tuple, object] = {}
_STORAGES: dict[tuple, "RemoteStorage"] = {}


def _missing_backend(protocol: str, exc: Exception) -> UnsupportedError:
    extra = EXTRAS.get(protocol)
    if extra:
        how = f"pip install 'ckptool[{extra}]'"
    elif protocol == "memory":
        how = "pip install fsspec"
    else:
        how = f"pip install fsspec and its {protocol}:// backend"
    return UnsupportedError(f"{protocol}:// paths need a backend that is not installed ({how}): {exc}")


def _default_options(protocol: str) -> dict:
    """Options ckptool passes to the filesystem (fsspec's config adds its own on top)."""
    opts: dict = {}
    if protocol in ("s3", "s3a"):
        # Listings are not cached: another process may add or remove checkpoints at any time.
        opts["use_listings_cache"] = False
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and not _botocore_reads_endpoint_env():
            opts["client_kwargs"] = {"endpoint_url": endpoint}
    elif protocol in ("gs", "gcs"):
        opts["use_listings_cache"] = False
    return opts


def _botocore_reads_endpoint_env() -> bool:
    """botocore 1.31 (2023) added AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>."""
    try:
        import botocore
    except ImportError:
        return False
    try:
        major, minor = (int(x) for x in botocore.__version__.split(".")[:2])
    except ValueError:
        return True
    return (major, minor) >= (1, 31)


def filesystem(protocol: str, **options):
    """The fsspec filesystem for ``protocol`` and ``options``, one instance per combination."""
    protocol = protocol.lower()
    opts = {**_default_options(protocol), **options}
    key = (protocol, repr(sorted(opts.items())))
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is not None:
            return fs
        try:
            import fsspec
        except ImportError as exc:
            raise _missing_backend(protocol, exc) from None
        try:
            fs = fsspec.filesystem(protocol, **opts)
        except ImportError as exc:
            raise _missing_backend(protocol, exc) from None
        except ValueError as exc:
            raise UnsupportedError(f"{protocol}://: not a file system fsspec knows ({exc})") from None
        _FILESYSTEMS[key] = fs
        return fs


def storage_for_url(url: str, **options) -> "RemoteStorage":
    """The storage serving ``url`` (cached per protocol and options)."""
    protocol = protocol_of(url)
    if not protocol:
        raise CkptError(f"{url}: not a URL")
    key = (protocol, repr(sorted(options.items())))
    with _LOCK:
        st = _STORAGES.get(key)
    if st is None:
        st = RemoteStorage(filesystem(protocol, **options), protocol)
        with _LOCK:
            st = _STORAGES.setdefault(key, st)
    return st


def clear_cache() -> None:
    """Forget the cached filesystems (tests; credentials or endpoint changed)."""
    with _LOCK:
        _FILESYSTEMS.clear()
        _STORAGES.clear()


@contextmanager
def _requests(path: str, what: str, missing: str | None = None):
    """Backend exceptions as ckptool's: MissingError for an absent object, RemoteError else."""
    try:
        yield
    except CkptError:
        raise
    except FileNotFoundError:
        raise MissingError(f"{path}: {missing or 'no such file'}") from None
    except IsADirectoryError:
        raise MissingError(f"{path}: is a directory") from None
    except PermissionError as exc:
        raise RemoteError(f"{path}: cannot {what}: permission denied ({_short(exc)})") from None
    except ImportError as exc:
        raise _missing_backend(protocol_of(path) or "?", exc) from None
    except Exception as exc:  # botocore/aiohttp/google errors: one line, naming the URL
        raise RemoteError(f"{path}: cannot {what}: {type(exc).__name__}: {_short(exc)}") from None


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class RemoteReader:
    """Ranged reads from one object: each read is one (or, when large, a few) ranged GETs."""

    def __init__(self, fs, path: str):
        self.fs = fs
        self.path = path
        with _requests(path, "open"):
            info = fs.info(path)
        if info.get("type") == "directory":
            raise MissingError(f"{path}: is a directory, not a data file")
        self.size = int(info.get("size") or 0)
        self.requests = 0
        self.bytes_fetched = 0
        self._lock = threading.Lock()
        self._win = b""  # read-ahead window: bytes from _win_start
        self._win_start = 0
        self._next = -1  # where the last read ended
        self._ahead = 0

    def readinto(self, offset: int, buf) -> None:
        """Fill ``buf`` from ``offset``; a short object is a CorruptError."""
        view = memoryview(buf).cast("B")
        want = len(view)
        with self._lock:
            start = offset - self._win_start
            if want and 0 <= start and start + want <= len(self._win):
                view[:] = self._win[start: start + want]
                self._next = offset + want
                return
            sequential = offset == self._next
            self._next = offset + want
            if not sequential or want >= READAHEAD_MAX:
                self._ahead = 0
            else:
                self._ahead = min(READAHEAD_MAX, max(READAHEAD_MIN, self._ahead * 2))
                n = min(max(want, self._ahead), self.size - offset)
                if n > want:
                    with _requests(self.path, f"read {n} bytes at offset {offset}"):
                        data = self.fs.cat_file(self.path, start=offset, end=offset + n)
                    self.requests += 1
                    self.bytes_fetched += len(data)
                    self._win, self._win_start = data, offset
                    if len(data) < want:
                        raise_truncated(self.path, offset, want, len(data))
                    view[:] = data[:want]
                    return
        self._fetch(offset, view)

    def _fetch(self, offset: int, view) -> None:
        want = len(view)
        done = 0
        while done < want:
            n = min(READ_CHUNK, want - done)
            start = offset + done
            if start + n > self.size:
                n = max(0, self.size - start)
                if n == 0:
                    raise_truncated(self.path, offset, want, done)
            with _requests(self.path, f"read {n} bytes at offset {start}"):
                data = self.fs.cat_file(self.path, start=start, end=start + n)
            self.requests += 1
            self.bytes_fetched += len(data)
            if not data:
                raise_truncated(self.path, offset, want, done)
            got = min(len(data), want - done)
            view[done: done + got] = data[:got]
            done += got

    def read(self, offset: int, size: int) -> bytearray:
        buf = bytearray(size)
        self.readinto(offset, buf)
        return buf

    def close(self) -> None:
        pass


class RemoteWriter:
    """A file being written to an object store; it exists under its name only once closed.

    Small files are buffered and sent with one PUT at :meth:`close`; a file
    past :data:`PUT_LIMIT` streams through the backend's uncommitted upload
    (S3 multipart, GCS resumable), completed at :meth:`close`.
    :meth:`discard` drops it without anything being published.
    """

    def __init__(self, fs, path: str, protocol: str):
        self.fs = fs
        self.path = path
        self.name = path
        self._buf = bytearray()
        self._stream = None
        self._limit = None if protocol == "memory" else PUT_LIMIT  # memory: it is RAM anyway
        self.closed = False

    def write(self, data) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed file")
        view = memoryview(data).cast("B")
        if self._stream is None:
            self._buf += view
            if self._limit is not None and len(self._buf) > self._limit:
                with _requests(self.path, "start an upload", _NO_PARENT):
                    self._stream = self.fs.open(self.path, "wb", autocommit=False)
                    self._stream.write(self._buf)
                self._buf = bytearray()
        else:
            with _requests(self.path, "upload"):
                self._stream.write(view)
        return len(view)

    def tell(self) -> int:
        return len(self._buf) if self._stream is None else self._stream.tell()

    def flush(self) -> None:
        pass

    def fileno(self):
        raise OSError(f"{self.path}: an object being uploaded has no file descriptor")

    def close(self) -> None:
        """Publish the object (one PUT, or complete the upload)."""
        if self.closed:
            return
        self.closed = True
        with _requests(self.path, "write", _NO_PARENT):
            if self._stream is None:
                self.fs.pipe_file(self.path, bytes(self._buf))
                self._buf = bytearray()
            else:
                self._stream.close()
                self._stream.commit()

    def discard(self) -> None:
        """Abandon the upload; nothing appears under the name (idempotent)."""
        if self.closed:
            return
        self.closed = True
        self._buf = bytearray()
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                pass
            try:
                self._stream.discard()
            except Exception:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.discard()
        return False


class RemoteStorage:
    """An fsspec filesystem as a ckptool Storage; paths are full URLs."""

    sep = "/"
    atomic_rename = False

    def __init__(self, fs, protocol: str):
        self.fs = fs
        self.protocol = protocol
        self.scheme = protocol + "://"
        self._listed: dict[str, tuple[float, dict]] = {}  # url -> (monotonic time, ls entry)

    def __repr__(self) -> str:
        return f"<ckptool RemoteStorage {self.scheme}>"

    # -- names ---------------------------------------------------------------

    def _split(self, path: str) -> tuple[str, str]:
        scheme, rest = split_url(path)
        return scheme or self.scheme, rest

    def join(self, *parts: str) -> str:
        out = ""
        for p in parts:
            if not out or "://" in p:
                out = p
            elif p.startswith("/"):
                out = self._split(out)[0] + p.lstrip("/")
            elif out.endswith("://") or out.endswith("/"):
                out = out + p
            else:
                out = out + "/" + p
        return out

    def dirname(self, path: str) -> str:
        scheme, rest = self._split(path)
        return scheme + posixpath.dirname(rest)

    def basename(self, path: str) -> str:
        return posixpath.basename(self._split(path)[1])

    def isabs(self, path: str) -> bool:
        return "://" in path or path.startswith("/")

    def realpath(self, path: str) -> str:
        return path  # no symlinks in an object store

    # -- queries -------------------------------------------------------------

    def _info(self, path: str):
        """The object's info dict, or None when nothing is there."""
        with _requests(path, "look up"):
            try:
                return self.fs.info(path)
            except FileNotFoundError:
                return None

    def exists(self, path: str) -> bool:
        return self._info(path) is not None

    def isfile(self, path: str) -> bool:
        info = self._info(path)
        return info is not None and info.get("type") == "file"

    def isdir(self, path: str) -> bool:
        with _requests(path, "look up"):
            return bool(self.fs.isdir(path))

    def _ls(self, path: str) -> list[dict]:
        with _requests(path, "list", "no such directory"):
            entries = self.fs.ls(path, detail=True)
        _, rest = self._split(path)
        own = self.fs._strip_protocol(path).rstrip("/")
        out = []
        for e in entries:
            name = str(e.get("name", "")).rstrip("/")
            if not name or name == own:
                continue
            out.append(e)
        if not out and not rest.strip("/") == "" and not self.isdir(path):
            raise MissingError(f"{path}: no such directory")
        return out

    def listdir(self, path: str) -> list[str]:
        entries = self._ls(path)
        now = time.monotonic()
        names = set()
        listed = self._listed
        if len(listed) > 100_000:
            listed.clear()
        for e in entries:
            name = posixpath.basename(str(e["name"]).rstrip("/"))
            names.add(name)
            if e.get("type") == "file":
                listed[self.join(path, name)] = (now, e)
        return sorted(names)

    def find(self, root: str) -> list[str]:
        """Every file below ``root`` (recursively) as a URL spelled from ``root``; one
        paginated listing of the prefix on an object store."""
        with _requests(root, "list", "no such directory"):
            found = self.fs.find(root, detail=True)
        own = self.fs._strip_protocol(root).rstrip("/")
        base = root.rstrip("/")
        now = time.monotonic()
        out = []
        for name, info in sorted(found.items()):
            name = str(name).rstrip("/")
            if not name.startswith(own + "/") or info.get("type", "file") != "file":
                continue
            url = base + "/" + name[len(own) + 1:]
            self._listed[url] = (now, info)
            out.append(url)
        return out

    def _forget(self, path: str) -> None:
        self._listed.pop(path, None)

    def glob(self, directory: str, pattern: str) -> list[str]:
        """Names in ``directory`` matching a glob ``pattern`` (no recursion); one listing."""
        try:
            names = self.listdir(directory or self.scheme)
        except MissingError:
            return []
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def _file_info(self, path: str) -> dict:
        hit = self._listed.get(path)
        if hit is not None and time.monotonic() - hit[0] < LISTED_TTL:
            return hit[1]
        info = self._info(path)
        if info is None:
            raise MissingError(f"{path}: no such file")
        return info

    def size(self, path: str) -> int:
        return int(self._file_info(path).get("size") or 0)

    def mtime(self, path: str) -> float:
        info = self._file_info(path)
        for k in ("LastModified", "mtime", "updated", "modified", "created", "last_modified"):
            v = info.get(k)
            if v is None:
                continue
            if hasattr(v, "timestamp"):
                return float(v.timestamp())
            if isinstance(v, (int, float)):
                return float(v)
            if isinstance(v, str):
                from datetime import datetime

                try:
                    return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
                except ValueError:
                    continue
        with _requests(path, "look up"):
            return float(self.fs.modified(path).timestamp())

    # -- reading -------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        with _requests(path, "read"):
            return bytes(self.fs.cat_file(path))

    def open_reader(self, path: str) -> RemoteReader:
        return RemoteReader(self.fs, path)

    # -- writing -------------------------------------------------------------

    def makedirs(self, path: str) -> None:
        # Object stores have no directories: a key's "folders" exist once it does.
        # Only a bucket (or a local-like backend's folder) may need making.
        if not path or path.endswith("://"):
            return
        if self.protocol == "memory":
            with _requests(path, "make directory"):
                self.fs.makedirs(path, exist_ok=True)

    def temp_name(self, path: str) -> str:
        """A fresh temporary name beside ``path`` (for code that still renames)."""
        return f"{path}.tempstate{uuid.uuid4().int & ((1 << 64) - 1)}"

    def open_write(self, path: str) -> RemoteWriter:
        self._forget(path)
        return RemoteWriter(self.fs, path, self.protocol)

    def fsync_file(self, f) -> None:
        pass  # durability comes with the PUT

    def start_writeback(self, f, offset: int, length: int) -> None:
        pass

    def rename(self, src: str, dst: str) -> None:
        """Copy then delete (not atomic; writers avoid it: ``atomic_rename`` is False)."""
        if src == dst:
            return
        self._forget(src)
        self._forget(dst)
        with _requests(src, f"rename to {dst}"):
            self.fs.copy(src, dst)
            self.fs.rm_file(src)

    def fsync_dir(self, path: str) -> None:
        pass

    def remove(self, path: str) -> None:
        self._forget(path)
        if not self.isfile(path):
            raise MissingError(f"{path}: no such file")
        with _requests(path, "delete"):
            self.fs.rm_file(path)

    def write_bytes_atomic(self, path: str, data: bytes, expect=ANY) -> bool:
        """Replace ``path`` with ``data``: one PUT, which is atomic on an object store.
        ``expect``: as for local files, checked just before the PUT."""
        if expect is not ANY and self.read_if_exists(path) != expect:
            return False
        self._forget(path)
        with _requests(path, "write", _NO_PARENT):
            self.fs.pipe_file(path, bytes(data))
        return True

    def read_if_exists(self, path: str) -> bytes | None:
        self._forget(path)
        try:
            return self.read_bytes(path)
        except MissingError:
            return None


__all__ = ["RemoteStorage", "RemoteReader", "RemoteWriter", "RemoteError", "storage_for_url",
           "filesystem", "clear_cache"]
