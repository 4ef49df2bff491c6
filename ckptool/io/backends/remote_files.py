"""Remote files: ranged reads and buffered writes of one object through fsspec, and the
translation of backend exceptions into ckptool's (:mod:`ckptool.io.backends.remote` holds the storage).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from ckptool.errors import CkptError, MissingError, UnsupportedError
from ckptool.io.oserrors import raise_truncated

if TYPE_CHECKING:
    from collections.abc import Iterable

    from typing_extensions import Buffer

    from ckptool.format.coding import AnyBuffer
    from ckptool.io.backends.prefetch import Prefetcher, PrefetchStats

#: pip extra per protocol (pyproject.toml's optional dependencies).
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
#: Bytes per ranged GET when a large read is split (bounds the extra copy).
READ_CHUNK = 64 << 20
#: Read-ahead for sequential reads (``inspect --verify`` walking a shard): a read that
#: starts where the last one ended fetches a window that doubles from the first size
#: to the second; a lone read (one tensor) fetches exactly its range.
READAHEAD_MIN = 256 << 10
READAHEAD_MAX = 8 << 20
#: An object up to this size whose first read is at its end (a table's footer, read
#: before the whole index) is fetched whole by that read: one GET instead of two.
WHOLE_MAX = 4 << 20
#: A file being written is kept in memory up to this size and PUT in one request;
#: past it, it streams to the store as a multipart upload completed at close.
PUT_LIMIT = 16 << 20


NO_PARENT = "cannot write: no such bucket (or parent directory)"


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


def default_options(protocol: str) -> dict[str, Any]:
    """Options ckptool passes to the filesystem (fsspec's config adds its own on top)."""
    opts: dict[str, Any] = {}
    if protocol in ("s3", "s3a"):
        # Listings are not cached: another process may add or remove checkpoints at any time.
        opts["use_listings_cache"] = False
        opts["config_kwargs"] = {"max_pool_connections": POOL}  # botocore's 10 would cap the reads in flight
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and not botocore_reads_endpoint_env():
            opts["client_kwargs"] = {"endpoint_url": endpoint}
    elif protocol in ("gs", "gcs"):
        opts["use_listings_cache"] = False
    return opts


#: Connections to an S3 endpoint: the small reads of a fleet command keep up to 32 in flight
#: (``remote_listing.SMALL_JOBS``), the ranged prefetch 8 per stream.
POOL = 64


def s3_session(opts: dict[str, Any]) -> Any:
    """The aiobotocore session an s3fs filesystem of ``opts`` creates, but reading the times of its
    answers (each listed object's ``LastModified``, each GET's ``Last-Modified``) with the standard
    library's ISO 8601 and RFC 1123 parsers rather than dateutil's (a fleet's listing and small reads
    spent a tenth of their time there); any other spelling goes to botocore's own parser. None where
    aiobotocore cannot be told (the filesystem makes its own session, as without this)."""
    try:
        import inspect

        from aiobotocore.session import AioSession
        from s3fs import S3FileSystem

        own = set(inspect.signature(S3FileSystem.__init__).parameters) | {  # what s3fs hands fsspec
            "use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache"}
        session = AioSession(**{k: v for k, v in opts.items() if k not in own})  # as s3fs makes it
        session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_timestamp)
    except Exception:  # noqa: BLE001 - an aiobotocore without these: s3fs's own session
        return None
    return session


def _timestamp(value: Any) -> Any:
    import datetime

    if isinstance(value, str):
        try:
            if value.endswith("Z") and "T" in value:
                return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=datetime.timezone.utc)
            if value.endswith(" GMT"):
                from email.utils import parsedate_to_datetime

                return parsedate_to_datetime(value)
        except (ValueError, TypeError, IndexError):
            pass
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def botocore_reads_endpoint_env() -> bool:
    """botocore 1.31 (2023) added AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>."""
    try:
        import botocore

        major, minor = (int(x) for x in botocore.__version__.split(".")[:2])
    except ImportError:
        return False
    except ValueError:
        return True
    return (major, minor) >= (1, 31)


def missing_backend(protocol: str, exc: Exception) -> UnsupportedError:
    extra = EXTRAS.get(protocol)
    if extra:
        how = f"pip install 'ckptool[{extra}]'"
    elif protocol == "memory":
        how = "pip install fsspec"
    else:
        how = f"pip install fsspec and its {protocol}:// backend"
    return UnsupportedError(f"{protocol}:// paths need a backend that is not installed ({how}): {exc}")


@contextmanager
def request_errors(path: str, what: str, missing: str | None = None) -> Iterator[None]:
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
        raise RemoteError(f"{path}: cannot {what}: permission denied ({short_error(exc)})") from None
    except ImportError as exc:
        raise missing_backend(protocol_of(path) or "?", exc) from None
    except Exception as exc:  # botocore/aiohttp/google errors: one line, naming the URL
        raise RemoteError(f"{path}: cannot {what}: {type(exc).__name__}: {short_error(exc)}") from None


def info_mtime(info: dict[str, Any]) -> float | None:
    """The modification time in an fsspec info dict (each backend spells it its own way)."""
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
    return None


def short_error(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class RemoteReader:
    """Ranged reads from one object: each read is one (or, when large, a few) ranged GETs."""

    def __init__(self, fs: Any, path: str, info: dict[str, Any] | None = None, data: bytes | None = None):
        self.fs = fs
        self.path = path
        if info is None:  # else: what the storage was told a moment ago (size, type)
            with request_errors(path, "open"):
                info = fs.info(path)
        if info.get("type") == "directory":
            raise MissingError(f"{path}: is a directory, not a data file")
        self.size = int(info.get("size") or 0)
        self.requests = 0
        self.bytes_fetched = 0
        self._lock = threading.Lock()
        self._win = data if data is not None and len(data) == self.size else b""  # read-ahead
        # window: bytes from _win_start (a whole object the storage already holds, when given)
        self._win_start = 0
        self._next = -1  # where the last read ended
        self._ahead = 0
        self.plan: Prefetcher | None = None  # set while a prefetch plan covers this object

    def get(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` in one ranged GET (a prefetch plan's worker threads call it)."""
        with request_errors(self.path, f"read {end - start} bytes at offset {start}"):
            data: bytes = self.fs.cat_file(self.path, start=start, end=end)
        with self._lock:
            self.requests += 1
            self.bytes_fetched += len(data)
        return data

    def _get_locked(self, start: int, end: int) -> bytes:
        with request_errors(self.path, f"read {end - start} bytes at offset {start}"):
            data: bytes = self.fs.cat_file(self.path, start=start, end=end)
        self.requests += 1
        self.bytes_fetched += len(data)
        return data

    def readinto(self, offset: int, buf: AnyBuffer) -> None:
        """Fill ``buf`` from ``offset``; a short object is a CorruptError."""
        view = memoryview(buf).cast("B")  # type: ignore[arg-type]  # an ndarray is a Buffer (AnyBuffer)
        want = len(view)
        plan = self.plan
        if plan is not None and plan.readinto(self, offset, view):
            return
        with self._lock:
            start = offset - self._win_start
            if want and 0 <= start and start + want <= len(self._win):
                view[:] = self._win[start: start + want]
                self._next = offset + want
                return
            if (want and not self.requests and offset + want == self.size <= WHOLE_MAX
                    and self.size > want):
                # a small object read from its end first (a table's footer): the rest follows
                # at once (read_table reads the whole index next), so one GET takes it all
                self._win, self._win_start = self._get_locked(0, self.size), 0
                if len(self._win) == self.size:
                    view[:] = self._win[offset:offset + want]
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
                    with request_errors(self.path, f"read {n} bytes at offset {offset}"):
                        data = self.fs.cat_file(self.path, start=offset, end=offset + n)
                    self.requests += 1
                    self.bytes_fetched += len(data)
                    self._win, self._win_start = data, offset
                    if len(data) < want:
                        raise_truncated(self.path, offset, want, len(data))
                    view[:] = data[:want]
                    return
        self._fetch(offset, view)

    def _fetch(self, offset: int, view: memoryview) -> None:
        want = len(view)
        done = 0
        while done < want:
            n = min(READ_CHUNK, want - done)
            start = offset + done
            if start + n > self.size:
                n = max(0, self.size - start)
                if n == 0:
                    raise_truncated(self.path, offset, want, done)
            with request_errors(self.path, f"read {n} bytes at offset {start}"):
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


@contextmanager
def prefetching(ranges: Iterable[tuple[Any, int, int]], jobs: int | None,
                on_stats: Callable[[PrefetchStats], None] | None = None) -> Iterator[None]:
    """While open, the planned ``(RemoteReader, offset, size)`` reads are fetched ahead, ``jobs``
    ranged GETs in flight (see :mod:`ckptool.io.backends.prefetch`); ``on_stats`` gets the counts at the end."""
    from ckptool.io.backends.prefetch import DEFAULT_JOBS, Prefetcher

    plan = [(r, off, n) for r, off, n in ranges if isinstance(r, RemoteReader)]
    pf = Prefetcher(plan, lambda r, start, end: r.get(start, end), jobs or DEFAULT_JOBS)
    readers = {id(r): r for r, _, _ in plan}
    saved = {k: r.plan for k, r in readers.items()}
    for r in readers.values():
        r.plan = pf
    try:
        yield
    finally:
        pf.close()
        for k, r in readers.items():
            r.plan = saved[k]
        if on_stats is not None:
            on_stats(pf.stats)


class RemoteWriter:
    """A file being written to an object store; it exists under its name only once closed.

    Small files are buffered and sent with one PUT at :meth:`close`; a file
    past :data:`PUT_LIMIT` streams through the backend's uncommitted upload
    (S3 multipart, GCS resumable), completed at :meth:`close`.
    :meth:`discard` drops it without anything being published.
    """

    def __init__(self, fs: Any, path: str, protocol: str):
        self.fs = fs
        self.path = path
        self.name = path
        self._buf = bytearray()
        self._stream: Any = None  # the backend's file, once the upload streams
        self._limit = None if protocol == "memory" else PUT_LIMIT  # memory: it is RAM anyway
        self.closed = False

    def write(self, data: Buffer) -> int:
        if self.closed:
            raise ValueError(f"{self.path}: write to a closed file")
        view = memoryview(data).cast("B")
        if self._stream is None:
            self._buf += view
            if self._limit is not None and len(self._buf) > self._limit:
                with request_errors(self.path, "start an upload", NO_PARENT):
                    self._stream = self.fs.open(self.path, "wb", autocommit=False)
                    self._stream.write(self._buf)
                self._buf = bytearray()
        else:
            with request_errors(self.path, "upload"):
                self._stream.write(view)
        return len(view)

    def tell(self) -> int:
        return len(self._buf) if self._stream is None else self._stream.tell()

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError(f"{self.path}: an object being uploaded has no file descriptor")

    def close(self) -> None:
        """Publish the object (one PUT, or complete the upload)."""
        if self.closed:
            return
        self.closed = True
        with request_errors(self.path, "write", NO_PARENT):
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

    def __enter__(self) -> RemoteWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        if exc_type is None:
            self.close()
        else:
            self.discard()
        return False
