"""One listing of a prefix, answering for everything below it for one command.

A fleet command (``du``, ``prune --recursive``, ``verify --recursive``) asks, for every run
below ROOT, which directories and files exist, their sizes and times, and reads a few small
files (state files, ``.ckptool.toml``, indexes). Asked one by one of an object store, that is
a listing per directory and a HEAD per file: tens of requests a run. :class:`Listing` is the
store's flat listing of ROOT (S3's ListObjectsV2 without a delimiter, 1,000 keys a request;
GCS's objects.list likewise: fsspec's ``find``) kept while the command runs
(:meth:`ckptool.io.backends.remote.RemoteStorage.listed`): ``exists``, ``isfile``, ``isdir``,
``listdir``, ``size`` and ``mtime`` of a path below ROOT are answered from it without a
request, a file read once is kept (``read`` is asked once per command: the root's
``.ckptool.toml`` is not fetched again for every run below it), and the small files the
command names are fetched at once, in parallel (:func:`fetch_all`, the bounded concurrency
of :mod:`ckptool.io.backends.prefetch`).

What the command itself writes or deletes below ROOT is no longer answered from the listing
(:meth:`Listing.touch`: that path, and the listings of the directories above it, go to the
store again); the lock object's bytes are never answered from it, and taking a lock on a directory
drops what was read of the files it names (the state file is read again under the lock), unless
the command planned before it (``prune --recursive``'s runs: the state file's version came with the
listing, and the conditional write compares against it). The conditional writes otherwise read what
they compare against from the store, as without a listing.
"""

from __future__ import annotations

import bisect
import fnmatch
import posixpath
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from ckptool.io.backends.fsspec_private import strip_protocol
from ckptool.io.backends.prefetch import DEFAULT_JOBS
from ckptool.io.backends.remote_files import request_errors
from ckptool.io.control.lock import LOCK_FILENAME

#: A file read through the listing is kept when at most this size (state files, policies,
#: the indexes of small checkpoints); a larger one is read from the store each time.
KEEP_MAX = 4 << 20
#: Bytes kept at most for one command (past it, reads go to the store as without a listing).
KEEP_TOTAL = 256 << 20
#: Small files fetched at once: the ranged reads' bound (prefetch.DEFAULT_JOBS GETs of up to
#: 8 MiB) scaled to what these hold (at most KEEP_MAX each, most a few hundred bytes): a
#: request's latency, not its bytes, is what they cost.
SMALL_JOBS = 4 * DEFAULT_JOBS


class Listing:
    """Every object below ``root`` (a URL, no trailing slash) as one listing found it."""

    def __init__(self, root: str, files: dict[str, dict[str, Any]]):
        self.root = root
        self.files = files  # url -> the listing's info (size, time)
        self.urls = sorted(files)
        self.children: dict[str, set[str]] = {}
        for url in files:
            self._add(url)
        self.contents: dict[str, bytes] = {}
        self.kept_bytes = 0
        self.touched: set[str] = set()  # files written or deleted since the listing
        self.written: set[str] = set()  # of them, those this command wrote whole last
        self.touched_dirs: set[str] = set()  # directories holding one of them
        self.stale: set[str] = set()  # directories the store answers for again, their files too (relisted)
        self.reread: tuple[str, ...] = ()  # names read again once their directory is locked
        #: of them, those read again under the lock: their bytes and the store's version token of them,
        #: which the next conditional write of the file compares against instead of reading it a third time
        self.versions: dict[str, tuple[bytes | None, Any]] = {}
        self.depth = 0  # commands nested in the one that listed (du runs prune's plan) share it
        #: lookups of paths above ROOT (the ``.ckptool.toml`` files up to the bucket's root), asked once
        #: per command: the command writes nothing there
        self.outside: dict[str, dict[str, Any] | None] = {}
        self.lock = threading.Lock()

    def _add(self, url: str) -> None:
        while url != self.root and url.startswith(self.root + "/"):
            parent, name = url.rsplit("/", 1)
            kids = self.children.setdefault(parent, set())
            if name in kids:
                return
            kids.add(name)
            url = parent

    def below(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")

    def answers_file(self, path: str) -> bool:
        """Whether the listing answers for the file ``path`` (below ROOT, untouched, not in a
        directory listed again)."""
        return (path.startswith(self.root + "/") and path not in self.touched
                and (not self.stale or path.rsplit("/", 1)[0] not in self.stale))

    def answers_read(self, path: str) -> bool:
        """Whether the file's bytes may come from the listing's reads: the lock's never do
        (who holds it is asked of the store at the time)."""
        return self.answers_file(path) and posixpath.basename(path) != LOCK_FILENAME

    def answers_dir(self, path: str) -> bool:
        """Whether the listing answers for the directory ``path`` (ROOT itself only when something
        is below it: an empty listing says nothing of a file named ROOT)."""
        return (self.below(path) and path not in self.touched_dirs and path not in self.stale
                and (path != self.root or path in self.children))

    def info(self, path: str) -> dict[str, Any] | None:
        return self.files.get(path)

    def isdir(self, path: str) -> bool:
        return path in self.children

    def names(self, path: str) -> list[str] | None:
        """The names in directory ``path``; None when nothing is below it."""
        kids = self.children.get(path)
        return None if kids is None else sorted(kids)

    def below_files(self, top: str) -> list[tuple[str, dict[str, Any]]]:
        """Every file below ``top`` with its info, sorted (a range of the sorted names)."""
        prefix = top.rstrip("/") + "/"
        out = []
        for u in self.urls[bisect.bisect_left(self.urls, prefix):]:
            if not u.startswith(prefix):
                break
            out.append((u, self.files[u]))
        return out

    def answers_outside(self, path: str) -> bool:
        """Whether ``path`` (above ROOT, or beside it) is one the listing remembers lookups of."""
        return not self.below(path) and path not in self.touched

    def content(self, path: str) -> bytes | None:
        with self.lock:
            return self.contents.get(path)

    def keep(self, path: str, data: bytes) -> None:
        with self.lock:
            if (len(data) <= KEEP_MAX and self.kept_bytes + len(data) <= KEEP_TOTAL and path not in self.touched
                    and path not in self.contents):
                self.contents[path] = data
                self.kept_bytes += len(data)

    def touch(self, path: str) -> None:
        """``path`` is being written or deleted: the store answers for it from now on."""
        with self.lock:
            self.touched.add(path)
            self.written.discard(path)
            self.versions.pop(path, None)
            data = self.contents.pop(path, None)
            if data is not None:
                self.kept_bytes -= len(data)
            d = path
            while "/" in d and self.below(d):
                d = d.rsplit("/", 1)[0]
                self.touched_dirs.add(d)

    def rereads(self, path: str) -> bool:
        """Whether ``path`` is a file named by ``reread`` (its directory's state file)."""
        return any(fnmatch.fnmatchcase(posixpath.basename(path), g) for g in self.reread)

    def forget_contents(self, directory: str) -> None:
        """A lock on ``directory`` was just taken: what was read of its files named by a glob of
        ``reread`` (its state file) is read again."""
        prefix = directory.rstrip("/") + "/"
        with self.lock:
            for p in [p for p in self.contents if p.startswith(prefix) and "/" not in p[len(prefix):]
                      and any(fnmatch.fnmatchcase(p[len(prefix):], g) for g in self.reread)]:
                self.kept_bytes -= len(self.contents.pop(p))


def list_prefix(fs: Any, root: str, strip: Callable[[Any, str], str]) -> dict[str, dict[str, Any]]:
    """Every object below ``root`` as URLs spelled from ``root``: one flat listing (``find``)."""
    found = fs.find(root, detail=True)
    own = strip(fs, root).rstrip("/")
    base = root.rstrip("/")
    out = {}
    for name, info in found.items():
        name = str(name).rstrip("/")
        if name.startswith(own + "/") and info.get("type", "file") == "file":
            out[base + "/" + name[len(own) + 1:]] = info
    return out


def fetch_all(listing: Listing, fs: Any, paths: Iterable[str], jobs: int | None = None,
              version: Callable[[dict[str, Any], bytes], Any] | None = None) -> None:
    """Read ``paths`` (files of the listing) into it, ``jobs`` GETs in flight (an async backend's
    own batches, else as many threads); a file that cannot be read now is left to be read (and
    its error raised) where it is used. ``version(info, bytes)``: the store's version token of a
    file the listing named (S3's ETag, GCS's generation), kept beside the bytes of those files
    ``reread`` names (the state files): the listing came before the GET, so the token names the
    bytes read or an older version, and a conditional write at it fails if the file changed since."""
    todo, budget = [], KEEP_TOTAL - listing.kept_bytes  # never fetch what could not be kept
    for p in paths:
        size = int(listing.files.get(p, {}).get("size") or 0)
        if listing.answers_read(p) and listing.content(p) is None and size <= min(KEEP_MAX, budget):
            budget -= size
            if size:
                todo.append(p)
            else:
                listing.keep(p, b"")
    if not todo:
        return
    jobs = max(1, min(jobs or SMALL_JOBS, len(todo)))
    try:
        if getattr(fs, "async_impl", False):  # one event loop, "bytes=0-" GETs: no HEAD for the size
            got = fs.cat_ranges(todo, [0] * len(todo), [None] * len(todo), on_error="return", batch_size=jobs)
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                got = list(pool.map(lambda p: _or_error(fs.cat_file, p), todo))
    except Exception:  # noqa: BLE001 - each file is read (and its error reported) where it is used
        return
    for p, data in zip(todo, got):
        if isinstance(data, (bytes, bytearray)):
            listing.keep(p, bytes(data))
            token = version(listing.files[p], bytes(data)) if version is not None and listing.rereads(p) else None
            if token is not None and listing.content(p) is not None:
                with listing.lock:
                    listing.versions[p] = (bytes(data), token)


def _or_error(fetch: Callable[..., Any], path: str) -> Any:
    try:
        return fetch(path, start=0)
    except Exception as exc:  # noqa: BLE001 - returned, as fsspec's on_error="return" does
        return exc


#: What :meth:`ListedStorage.listed_info` returns for a path the listing does not answer for.
UNLISTED: dict[str, Any] = {}


class ListedStorage:
    """Mixed into :class:`ckptool.io.backends.remote.RemoteStorage` (it has ``fs`` and ``read_bytes``):
    :meth:`listed`, and the listing's answers for its other methods."""

    fs: Any
    _snap: Listing | None = None  # while a command runs over a tree

    def read_bytes(self, path: str) -> bytes:
        raise NotImplementedError

    @contextmanager
    def listed(self, root: str, reads: Iterable[str] = (), reread: Iterable[str] = ()) -> Iterator[None]:
        """While open, what lies below ROOT is answered from one flat listing of it, and the files
        whose names match a glob of ``reads`` are fetched at once, in parallel; those matching
        ``reread`` are read again once their directory is locked. Nested: the outer listing serves."""
        root = root.rstrip("/")
        prev = self._snap
        if prev is not None and prev.below(root):
            prev.depth += 1
            try:
                yield
            finally:
                prev.depth -= 1
            return
        with request_errors(root, "list", "no such directory"):
            snap = Listing(root, list_prefix(self.fs, root, strip_protocol))
        self._snap, snap.reread = snap, tuple(reread)
        try:
            patterns = tuple(reads)
            fetch_all(snap, self.fs, [u for u in snap.files if any(
                fnmatch.fnmatchcase(u.rsplit("/", 1)[-1], g) for g in patterns)], version=self.listed_version)
            yield
        finally:
            self._snap = prev

    def listed_version(self, info: dict[str, Any], data: bytes) -> Any:
        """The store's version token of a listed file (None: none known)."""
        return None

    def fetch_listed(self, paths: Iterable[str]) -> None:
        """Fetch the files ``paths`` of the listing at once, in parallel (a command that knows
        which of them it will read: the indexes of what ``prune --recursive`` keeps)."""
        if self._snap is not None:
            fetch_all(self._snap, self.fs, [p for p in paths if p in self._snap.files])

    def forget_reads(self, directory: str) -> None:
        """``directory`` is asked of the store again, its files and their bytes too (the state file
        with its version): a plan made from the listing found stale (``prune --recursive``'s
        planned-first run whose state file changed since), made again from what is there now."""
        if self._snap is not None:
            self._snap.forget_contents(directory)
            top = directory.rstrip("/")
            with self._snap.lock:
                self._snap.stale.add(top)
                # a copy (one step under the GIL): the other runs' state writes pop theirs meanwhile, unlocked
                for p in [p for p in list(self._snap.versions) if p.rsplit("/", 1)[0] == top]:
                    self._snap.versions.pop(p, None)

    def version_known(self, path: str) -> bool:
        """Whether the bytes of ``path`` the command read came with the store's version token
        (a conditional write of it needs no read first)."""
        snap = self._snap
        return snap is not None and path in snap.versions and snap.content(path) is not None

    def _snap_file(self, path: str) -> Listing | None:
        """The listing when it answers for the file ``path`` (its bytes included)."""
        snap = self._snap
        return snap if snap is not None and snap.answers_read(path) else None

    def _snap_meta(self, path: str) -> Listing | None:
        """The listing when it answers for the size and time of the file ``path``."""
        snap = self._snap
        return snap if snap is not None and snap.answers_file(path) else None

    def _snap_outside(self, path: str) -> Listing | None:
        """The listing when it remembers what the store said of ``path`` outside ROOT."""
        snap, p = self._snap, path.rstrip("/")
        return snap if snap is not None and snap.answers_outside(p) else None

    def _snap_dir(self, path: str) -> Listing | None:
        snap = self._snap
        return snap if snap is not None and snap.answers_dir(path.rstrip("/")) else None

    def listed_info(self, path: str) -> dict[str, Any] | None:
        """``path``'s info as the listing knows it (a directory's too), None when absent, or
        :data:`UNLISTED` when the listing does not answer for it."""
        snap, p = self._snap, path.rstrip("/")
        if snap is None or not snap.below(p):
            return UNLISTED
        if snap.answers_file(p):
            if snap.info(p) is not None:
                return snap.info(p)
        elif p != snap.root:  # written or deleted since, or the lock: the store answers
            return UNLISTED
        if not snap.answers_dir(p):
            return UNLISTED
        return {"name": path, "type": "directory", "size": 0} if snap.isdir(p) else None

    def listed_exists(self, path: str) -> bool | None:
        """Whether the file ``path`` is there as the listing knows it, or as this command last
        wrote it (None: ask the store)."""
        snap = self._snap
        if snap is not None and path in snap.written:
            return True
        return None if snap is None or not snap.answers_file(path) else snap.info(path) is not None

    def note_written(self, path: str) -> bool:
        """This command has just written the whole file ``path``."""
        if self._snap is not None and self._snap.below(path):
            self._snap.written.add(path)
        return True

    def forget_listed(self, path: str) -> None:
        """``path`` is being written or deleted (the store answers for it from now on)."""
        if self._snap is not None:  # below ROOT or above it (a lookup remembered there)
            self._snap.touch(path)


__all__ = ["KEEP_MAX", "KEEP_TOTAL", "SMALL_JOBS", "UNLISTED", "ListedStorage", "Listing", "fetch_all", "list_prefix"]
