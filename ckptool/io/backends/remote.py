"""Checkpoints on object storage (``s3://``, ``gs://``, ``memory://`` ...) through fsspec.

:class:`RemoteStorage` is the :class:`ckptool.io.backends.local.LocalStorage` interface over an fsspec
filesystem; :func:`storage_for_url` hands one out per protocol (``ckptool.io.backends.urls.storage_for``).

- Paths stay full URLs (``s3://bucket/run/ckpt-5``); join/dirname/basename work on the part
  after ``scheme://`` as POSIX paths.
- Reads are ranged (:class:`RemoteReader`): listing reads the index alone, a tensor its bytes.
- No atomic rename (``atomic_rename = False``): writers write the final names, data objects
  first and the index last, each uploaded when closed (:meth:`RemoteWriter.discard` abandons).
- While a command walks a tree (:meth:`RemoteStorage.listed`), one flat listing answers for
  every path below it (:mod:`ckptool.io.backends.remote_listing`).
- The lock is an object written only if absent (:mod:`ckptool.io.backends.remote_lock`); the state file
  is replaced and deleted by conditional writes (:mod:`ckptool.io.backends.remote_cas`).
- An S3-compatible endpoint comes from ``AWS_ENDPOINT_URL`` (botocore >= 1.31 reads it; for
  older ones it is passed to s3fs here) or from fsspec's configuration.
"""

from __future__ import annotations

import fnmatch
import posixpath
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError, UnsupportedError
from ckptool.io.backends import remote_cas
from ckptool.io.backends.fsspec_private import strip_protocol
from ckptool.io.backends.path_only import PathCapabilities
from ckptool.io.backends.remote_files import (
    NO_PARENT,
    RemoteError,
    RemoteReader,
    RemoteWriter,
    default_options,
    info_mtime,
    missing_backend,
    prefetching,
    protocol_of,
    request_errors,
    s3_session,
    split_url,
)
from ckptool.io.backends.remote_listing import UNLISTED, ListedStorage
from ckptool.io.backends.remote_lock import NOTE_MAX, RemoteLock, held, held_elsewhere
from ckptool.io.base import ANY
from ckptool.io.safety.atomic import tempstate_name

if TYPE_CHECKING:
    from ckptool.io.backends.prefetch import PrefetchStats
    from ckptool.io.base import Reader, Writer

#: Seconds for which size/mtime may answer from the directory listing that just named
#: the file (prune lists a directory, then asks each file's size and mtime: one LIST
#: instead of two HEADs per file). exists/isfile/reads always ask the store.
LISTED_TTL = 2.0

_LOCK = threading.Lock()
_FILESYSTEMS: dict[tuple[str, str], Any] = {}  # (protocol, options) -> fsspec filesystem
_STORAGES: dict[tuple[str, str], RemoteStorage] = {}


def filesystem(protocol: str, **options: Any) -> Any:
    """The fsspec filesystem for ``protocol`` and ``options``, one instance per combination."""
    protocol = protocol.lower()
    opts = {**default_options(protocol), **options}
    key = (protocol, repr(sorted(opts.items())))
    with _LOCK:
        fs = _FILESYSTEMS.get(key)
        if fs is not None:
            return fs
        try:
            import fsspec
        except ImportError as exc:
            raise missing_backend(protocol, exc) from None
        if protocol in ("s3", "s3a") and "session" not in opts:
            session = s3_session(opts)
            if session is not None:
                opts["session"] = session
        try:
            fs = fsspec.filesystem(protocol, **opts)
        except ImportError as exc:
            raise missing_backend(protocol, exc) from None
        except ValueError as exc:
            raise UnsupportedError(f"{protocol}://: not a file system fsspec knows ({exc})") from None
        _FILESYSTEMS[key] = fs
        return fs


def storage_for_url(url: str, **options: Any) -> RemoteStorage:
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


class RemoteStorage(PathCapabilities, ListedStorage):
    """An fsspec filesystem as a ckptool Storage; paths are full URLs."""

    sep = "/"
    atomic_rename = False
    concurrent_reads = False  # one read-ahead window per object: threads would defeat it

    def __init__(self, fs: Any, protocol: str):
        self.fs = fs
        self.protocol = protocol
        self.scheme = protocol + "://"
        self._listed: dict[str, tuple[float, dict[str, Any]]] = {}  # url -> (monotonic time, ls entry)
        self.last_prefetch: PrefetchStats | None = None
        self._dirs: dict[str, tuple[float, bool]] = {}  # url -> (monotonic time, isdir)

    def __repr__(self) -> str:
        return f"<ckptool RemoteStorage {self.scheme}>"

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

    def _info(self, path: str) -> dict[str, Any] | None:
        """The object's info dict, or None when nothing is there (a file's is kept for
        LISTED_TTL seconds, for the reader opened right after ``isfile``)."""
        listed = self.listed_info(path)
        if listed is not UNLISTED:
            return listed
        outside = self._snap_outside(path)  # above ROOT: asked once while the command runs
        if outside is not None and path in outside.outside:
            return outside.outside[path]
        with request_errors(path, "look up"):
            try:
                info: dict[str, Any] | None = self._named(path) if outside is not None else self.fs.info(path)
            except FileNotFoundError:
                info = None
        if outside is not None:
            outside.outside[path] = info
        if info is not None and info.get("type") == "file":
            self._listed[path] = (time.monotonic(), info)
        return info

    def _named(self, path: str) -> dict[str, Any] | None:
        """The object ``path``, or a prefix of that name (a directory), in one listing request of the
        names in its parent that begin so: for what a command asks once above ROOT (a policy file,
        mostly absent), where ``fs.info`` asks twice when nothing is there (a HEAD, then a listing)."""
        parent, name = posixpath.split(path.rstrip("/"))
        found = self.fs.find(parent, maxdepth=1, withdirs=True, detail=True, prefix=name)
        info: dict[str, Any] | None = found.get(strip_protocol(self.fs, path).rstrip("/"))
        return info

    def exists(self, path: str) -> bool:
        return self._info(path) is not None

    def isfile(self, path: str) -> bool:
        info = self._info(path)
        return info is not None and info.get("type") == "file"

    def isdir(self, path: str) -> bool:
        """A prefix with objects below it? Kept LISTED_TTL seconds (locating asks twice)."""
        snap = self._snap_dir(path)
        if snap is not None:
            return snap.isdir(path.rstrip("/"))
        hit = self._dirs.get(path)
        if hit is not None and time.monotonic() - hit[0] < LISTED_TTL:
            return hit[1]
        with request_errors(path, "look up"):
            got = bool(self.fs.isdir(path))
        self._dirs[path] = (time.monotonic(), got)
        return got

    def _ls(self, path: str) -> list[dict[str, Any]]:
        with request_errors(path, "list", "no such directory"):
            entries = self.fs.ls(path, detail=True)
        _, rest = self._split(path)
        own = strip_protocol(self.fs, path).rstrip("/")
        out = [e for e in entries if str(e.get("name", "")).rstrip("/") not in ("", own)]
        if not out and not rest.strip("/") == "" and not self.isdir(path):
            raise MissingError(f"{path}: no such directory")
        return out

    def listdir(self, path: str) -> list[str]:
        snap = self._snap_dir(path)
        if snap is not None:
            kids = snap.names(path.rstrip("/"))
            if kids is None:
                raise MissingError(f"{path}: no such directory")
            return kids
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

    def find(self, root: str, pattern: str = "*") -> list[str]:
        """Every file below ``root`` (recursively) whose name matches ``pattern``, as a URL
        spelled from ``root``; one paginated listing of the prefix."""
        snap = self._snap_dir(root)
        if snap is not None:
            return [u for u, _ in snap.below_files(root) if fnmatch.fnmatchcase(u.rsplit("/", 1)[-1], pattern)]
        with request_errors(root, "list", "no such directory"):
            found = self.fs.find(root, detail=True)
        own = strip_protocol(self.fs, root).rstrip("/")
        base = root.rstrip("/")
        now = time.monotonic()
        out = []
        for name, info in sorted(found.items()):
            name = str(name).rstrip("/")
            if not name.startswith(own + "/") or info.get("type", "file") != "file":
                continue
            url = base + "/" + name[len(own) + 1:]
            self._listed[url] = (now, info)
            if fnmatch.fnmatchcase(url.rsplit("/", 1)[-1], pattern):
                out.append(url)
        return out

    def _forget(self, path: str) -> None:
        self.forget_listed(path)
        self._listed.pop(path, None)
        self._dirs.clear()  # a write or delete may make or empty a directory

    def glob(self, directory: str, pattern: str) -> list[str]:
        """Names in ``directory`` matching a glob ``pattern`` (no recursion); one listing."""
        try:
            names = self.listdir(directory or self.scheme)
        except MissingError:
            return []
        return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))

    def _file_info(self, path: str) -> dict[str, Any]:
        snap = self._snap_meta(path)
        if snap is not None:
            got = snap.info(path)
            if got is None:
                raise MissingError(f"{path}: no such file")
            return got
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
        got = info_mtime(self._file_info(path))
        if got is not None:
            return got
        with request_errors(path, "look up"):
            return float(self.fs.modified(path).timestamp())

    def read_bytes(self, path: str) -> bytes:
        """The object's bytes; below a listing, read once (kept while the command runs)."""
        snap = self._snap_file(path)
        if snap is not None:
            data = snap.content(path)
            if data is not None:
                return data
            if snap.rereads(path) and remote_cas.supported(self.protocol):  # under the lock: with its version
                data, token = remote_cas.read(self, path)
                if data is None:
                    raise MissingError(f"{path}: no such file")
                snap.versions[path] = (data, token)
                snap.keep(path, data)
                return data
            with request_errors(path, "read"):  # "bytes=0-": one GET, no HEAD for the size first
                data = bytes(self.fs.cat_file(path, start=0)) if int(self._file_info(path)["size"]) else b""
            snap.keep(path, data)
            return data
        outside = self._snap_outside(path)
        if outside is not None and outside.content(path) is not None:
            return outside.content(path) or b""
        known = outside.outside.get(path) if outside is not None else None  # looked up: its size known
        with request_errors(path, "read"):  # then "bytes=0-": one GET, no HEAD for the size first
            data = bytes(self.fs.cat_file(path, start=0)) if known is None or int(known.get("size") or 0) else b""
        if outside is not None and path in outside.outside:  # a file looked up above ROOT: read once
            outside.keep(path, data)
        return data

    def open_reader(self, path: str) -> RemoteReader:
        snap = self._snap_file(path)
        if snap is not None:  # the listing's size; the bytes too when they were read
            return RemoteReader(self.fs, path, self._file_info(path), snap.content(path))
        hit = self._listed.get(path)
        fresh = hit is not None and time.monotonic() - hit[0] < LISTED_TTL
        return RemoteReader(self.fs, path, hit[1] if hit is not None and fresh else None)

    def prefetch(self, ranges: Iterable[tuple[Reader, int, int]],
                 jobs: int | None = None) -> AbstractContextManager[None]:
        """Fetch the planned reads ahead, ``jobs`` ranged GETs of up to 8 MiB in flight
        (:mod:`ckptool.io.backends.prefetch`); the counts of the last plan stay in ``last_prefetch``."""
        return prefetching(ranges, jobs, lambda stats: setattr(self, "last_prefetch", stats))

    def makedirs(self, path: str) -> None:
        # Object stores have no directories: a key's "folders" exist once it does.
        # Only a bucket (or a local-like backend's folder) may need making.
        if not path or path.endswith("://"):
            return
        if self.protocol == "memory":
            with request_errors(path, "make directory"):
                self.fs.makedirs(path, exist_ok=True)

    def temp_name(self, path: str) -> str:
        """A fresh temporary name beside ``path`` (for code that still renames)."""
        return tempstate_name(path)

    def open_write(self, path: str) -> RemoteWriter:
        self._forget(path)
        return RemoteWriter(self.fs, path, self.protocol)

    def fsync_file(self, f: Writer) -> None:
        pass  # durability comes with the PUT

    def start_writeback(self, f: Writer, offset: int, length: int) -> None:
        pass

    def fsync_dir(self, path: str) -> None:
        pass

    def rename(self, src: str, dst: str) -> None:
        """Copy then delete (not atomic; writers avoid it: ``atomic_rename`` is False)."""
        if src == dst:
            return
        self._forget(src)
        self._forget(dst)
        with request_errors(src, f"rename to {dst}"):
            self.fs.copy(src, dst)
            self.fs.rm_file(src)

    def remove(self, path: str) -> None:
        there = self.listed_exists(path)  # the listing's answer (or our own write's), else the store's
        self._forget(path)
        if not (self.isfile(path) if there is None else there):
            raise MissingError(f"{path}: no such file")
        with request_errors(path, "delete"):
            self.fs.rm_file(path)

    def remove_many(self, paths: list[str], release: Any = None) -> dict[str, BaseException | None]:
        """Delete several files, by the store's batch delete where it has one (S3: one request a
        thousand keys), else one by one: path -> None when it went, or the error (MissingError
        for one that was not there). ``release``: the lock this process holds on their directory,
        released in the same batch request (:meth:`RemoteLock.release_along`) where it can be."""
        out: dict[str, BaseException | None] = {}
        there = []
        for p in paths:
            known = self.listed_exists(p)
            if not (self.isfile(p) if known is None else known):
                out[p] = MissingError(f"{p}: no such file")
            else:
                there.append(p)
        for p in there:
            self._forget(p)
        # a batch with the lock that fails raises: the lock is left to expire with the journal it carries
        failed = None if release is None else release.release_along(there)
        try:
            if failed is None:  # no lock released along (none, or not here): a batch without it where there is one
                failed = remote_cas.delete_many(self, there)
        except CkptError as exc:  # the request failed on the wire: none known gone, each reported (and journaled)
            return {**out, **{p: exc for p in there}}
        for p in there:
            if failed is None:
                try:
                    with request_errors(p, "delete"):
                        self.fs.rm_file(p)
                    out[p] = None
                except CkptError as exc:
                    out[p] = exc
            else:
                out[p] = RemoteError(f"{p}: cannot delete: {failed[p]}") if p in failed else None
        return out

    def write_bytes_atomic(self, path: str, data: bytes, expect: object = ANY) -> bool:
        """One PUT, atomic on an object store; with ``expect`` (bytes read before, None: absent) a
        conditional one (:mod:`ckptool.io.backends.remote_cas`): False when the object changed since."""
        known = self._snap.versions.pop(path, None) if self._snap is not None else None
        self._forget(path)
        if expect is ANY:
            with request_errors(path, "write", NO_PARENT):
                self.fs.pipe_file(path, bytes(data))
            return self.note_written(path)
        raw, token = self._versioned(path, "replacing it", known)
        return raw == expect and remote_cas.put(self, path, bytes(data), token) is not None

    def remove_if(self, path: str, expect: bytes) -> bool:  # the store's conditional delete
        raw, token = self._versioned(path, "deleting it")
        return raw == expect and remote_cas.delete(self, path, token)

    def _versioned(self, path: str, what: str, known: tuple[bytes | None, Any] | None = None
                   ) -> tuple[bytes | None, Any]:
        """The object's bytes and version for a conditional write, where there is one: ``known``,
        those read under the lock when this is the first write since (the version names those
        bytes or an older one, so a change since still fails the write), else read now."""
        if known is None and self._snap is not None:
            known = self._snap.versions.pop(path, None)
        self._forget(path)
        if not remote_cas.supported(self.protocol):
            raise remote_cas.refuse(self.protocol, path, what)
        return known if known is not None else remote_cas.read(self, path)

    def lock(self, directory: str, **options: Any) -> RemoteLock:  # the object DIR/.ckptool.lock
        """The lock object; with ``note`` (a JSON value: prune's journal, planned before the lock
        from bytes read with their version) the lock's body carries it, and what was read stays."""
        if self._snap is not None and options.get("note") is None:  # what is read under the lock is read again
            self._snap.forget_contents(directory)
        return RemoteLock(self, directory, **options)

    @property
    def lock_note_max(self) -> int:
        """The bytes of JSON a lock object may carry as its note (0: none; :meth:`lock`)."""
        return NOTE_MAX if remote_cas.supported(self.protocol) else 0

    def listed_version(self, info: dict[str, Any], data: bytes) -> Any:
        return remote_cas.listed_version(self.protocol, info, data) if remote_cas.supported(self.protocol) else None

    def held_lock(self, directory: str) -> RemoteLock | None:
        """The lock object this process holds on ``directory`` (None: none)."""
        return held(self, directory)

    def lock_held(self, directory: str, dir_fd: int | None = None) -> bool:
        return held_elsewhere(self, directory)  # a live lock object of another holder

    def read_if_exists(self, path: str) -> bytes | None:
        snap = self._snap_file(path)
        if snap is not None:  # the listing's file, read once
            return self.read_bytes(path) if snap.info(path) is not None else None
        self._forget(path)
        try:
            return self.read_bytes(path)
        except MissingError:
            return None


__all__ = ["RemoteStorage", "RemoteReader", "RemoteWriter", "RemoteError", "storage_for_url", "filesystem",
           "clear_cache"]
