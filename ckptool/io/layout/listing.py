"""One listing of a directory, its files grouped by the checkpoint that owns them,
by the rules of :mod:`ckptool.io.layout.checkpoints` (and nothing else)."""

from __future__ import annotations

import stat as _stat
from collections.abc import Callable, Iterator, MutableSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.format.table import FOOTER_SIZE
from ckptool.io.layout import checkpoints as L

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage

#: ckptool's own files and TF's state file: never a checkpoint's, never probed.
RESERVED = frozenset({"checkpoint", ".ckptool.lock", ".ckptool-prune-pending", ".ckptool.toml",
                      ".ckptool-clock"})


@dataclass
class FileInfo:
    name: str
    size: int
    mtime: float
    link_out: bool = False  # a symlink that leads outside the directory
    inode: tuple[int, int] | None = None  # (st_dev, st_ino): a hard-linked file is counted once
    nlink: int = 1
    is_dir: bool = False


class Complete(MutableSet[str]):
    """The complete checkpoints of a listing, each index read when first asked about (``in``),
    all of them when the set is iterated or counted: a prune reads the indexes of what it keeps,
    not of what it deletes. ``pending``: base -> its ``.index`` name, not read yet."""

    def __init__(self, known: set[str] | None = None, pending: dict[str, str] | None = None,
                 check: Callable[[str], bool] | None = None):
        self.known = set(known or ())
        self.pending = dict(pending or {})
        self.check = check

    def _settle(self, base: str) -> None:
        name = self.pending.pop(base, None)
        if name is not None and self.check is not None and self.check(name):
            self.known.add(base)

    def __contains__(self, base: object) -> bool:
        if isinstance(base, str) and base in self.pending:
            self._settle(base)
        return base in self.known

    def _all(self) -> set[str]:
        for base in sorted(self.pending):
            self._settle(base)
        return self.known

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._all()))

    def __len__(self) -> int:
        return len(self._all())

    def add(self, base: str) -> None:
        self.pending.pop(base, None)
        self.known.add(base)

    def discard(self, base: str) -> None:
        self.pending.pop(base, None)
        self.known.discard(base)

    def __repr__(self) -> str:
        return f"Complete({sorted(self._all())!r})"


@dataclass
class DirListing:
    """DIR's files by checkpoint base (temporaries apart); ``complete``: the bases whose
    ``.index`` parses as one or that are V1 tables; ``temps``: temporary files and staging
    directories, with :func:`layout.temp_owner` of each in ``temp_owner``."""

    directory: str
    files: dict[str, list[FileInfo]] = field(default_factory=dict)
    complete: MutableSet[str] = field(default_factory=set)
    v1: set[str] = field(default_factory=set)
    temps: list[FileInfo] = field(default_factory=list)
    temp_owner: dict[str, str | None] = field(default_factory=dict)
    real: str = ""
    special: list[str] = field(default_factory=list)  # names of a checkpoint's files that are no regular file

    def mtime(self, base: str) -> float | None:
        """The commit time of checkpoint ``base``: its index's (the V1 file's) mtime."""
        files = self.files.get(base, ())
        for f in files:
            if f.name == base + INDEX_SUFFIX or f.name == base:
                return f.mtime
        if base in self.v1:
            return max((f.mtime for f in files if L.file_role(f.name) == (base, L.V1_FILE)), default=None)
        return None

    def size(self, base: str) -> int:
        return sum(f.size for f in self.files.get(base, ()))

    def links_out(self, base: str) -> bool:
        return any(f.link_out for f in self.files.get(base, ()))

    def temp_bytes(self) -> int:
        return sum(f.size for f in self.temps)


def _info(d: Dir, name: str, real: str) -> FileInfo | None:
    st = d.lstat(name)
    if st is None:
        return None
    if _stat.S_ISDIR(st.st_mode):
        return FileInfo(name, 0, st.st_mtime, is_dir=True)
    if _stat.S_ISLNK(st.st_mode):
        target = d.link_target(name)
        if not target.startswith(real.rstrip("/") + "/"):
            return FileInfo(name, 0, st.st_mtime, link_out=True)
        tst = d.stat(name)
        if tst is None or not _stat.S_ISREG(tst.st_mode):
            return FileInfo(name, 0, st.st_mtime, link_out=True)
        return FileInfo(name, tst.st_size, tst.st_mtime, inode=None)
    if not _stat.S_ISREG(st.st_mode):
        return None
    inode = (st.st_dev, st.st_ino) if st.st_ino else None
    return FileInfo(name, st.st_size, st.st_mtime, inode=inode, nlink=max(1, st.st_nlink))


def _tree_size(d: Dir, name: str) -> tuple[int, float]:
    """Bytes and newest mtime below a staging directory (no symlink followed)."""
    total, newest = 0, 0.0
    try:
        sub = d.subdir(name)
    except Exception:
        return 0, 0.0
    with sub:
        for n in sub.names():
            st = sub.lstat(n)
            if st is None:
                continue
            newest = max(newest, st.st_mtime)
            if _stat.S_ISDIR(st.st_mode):
                s, m = _tree_size(sub, n)
                total, newest = total + s, max(newest, m)
            elif _stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total, newest


def _is_staging(d: Dir, name: str) -> bool:
    """``name`` (``P_temp``, ``P_temp_<hex>``) is a directory holding only the part files of a
    sharded save (:func:`ckptool.io.layout.checkpoints.is_staging_dir`); symlinks are never followed."""
    st = d.lstat(name)
    if st is None or not _stat.S_ISDIR(st.st_mode):
        return False
    from ckptool.errors import CkptError

    try:
        with d.subdir(name) as sub:
            entries = []
            for n in sub.names():
                est = sub.lstat(n)
                entries.append((n, est is not None and _stat.S_ISREG(est.st_mode)))
    except (CkptError, OSError):
        return False
    return L.is_staging_dir(entries)


def _indexed(d: Dir, storage: Storage, name: str, read_indexes: bool) -> bool:
    """Whether the ``.index`` file ``name`` makes its checkpoint complete: it parses as one
    (:func:`ckptool.io.layout.checkpoints.is_index`), or without ``read_indexes`` (``du``: sizes need
    no index's contents) a regular file at least a table's footer long, as the listing says."""
    if read_indexes:
        return L.is_index(storage, d.join(name))
    st = d.stat(name)
    return st is not None and _stat.S_ISREG(st.st_mode) and st.st_size >= FOOTER_SIZE


def scan(d: Dir, read_indexes: bool = True) -> DirListing:
    """Group the files of the open directory ``d`` (:mod:`ckptool.io.safety.dirfd`) by checkpoint;
    ``read_indexes`` False: an index's presence and size, not its contents, make a checkpoint complete;
    else each index is read when its checkpoint's completeness is first asked (:class:`Complete`)."""
    from ckptool.io.backends.local import LOCAL
    from ckptool.io.backends.urls import storage_for

    names = d.names()
    real = d.realpath()
    out = DirListing(d.path, real=real)
    complete = Complete(check=lambda name: _indexed(d, storage, name, read_indexes))
    out.complete = complete
    storage: Storage = getattr(d, "storage", None) or LOCAL
    if storage is LOCAL and "://" in (d.path or ""):
        storage = storage_for(d.path)[0]
    roles: dict[str, tuple[str, str]] = {}
    temp_like: list[str] = []
    for n in names:
        if n in RESERVED:
            continue
        if L.is_temp(n) or (L.staging_owner(n) is not None and _is_staging(d, n)):
            temp_like.append(n)
            continue
        role = L.file_role(n)
        if role is not None:
            roles[n] = role
        elif L.may_be_v1_table(n) and L.is_v1_table(storage, d.join(n)):
            roles[n] = (n, L.V1_FILE)
            out.v1.add(n)
            out.complete.add(n)
    bases = {base for base, _ in roles.values()}
    for n in temp_like:  # a temporary of a writer of P only when P is a checkpoint prefix of DIR
        owner = L.temp_owner(n)
        if owner is not None and not L.prefix_of_dir(owner, bases):
            continue  # an ordinary name (other_temp/ beside no checkpoint 'other'): never touched
        info = _info(d, n, real)
        if info is None:
            continue
        if info.is_dir:
            info.size, newest = _tree_size(d, n)
            info.mtime = max(info.mtime, newest)
        out.temps.append(info)
        out.temp_owner[n] = owner
    for n, (base, kind) in roles.items():
        if kind == L.INDEX and base not in complete.known:
            if read_indexes:
                complete.pending[base] = n  # read when first asked about (while ``d`` is open)
            elif _indexed(d, storage, n, False):
                complete.add(base)
        elif kind == L.V1_FILE and base not in out.v1:
            out.v1.add(base)
    for base in list(out.v1):
        shards = sorted(n for n, r in roles.items() if r == (base, L.V1_FILE) and n != base)
        if shards and L.is_v1_table(storage, d.join(shards[0])):
            out.complete.add(base)
    for n, (base, kind) in roles.items():
        if kind == L.META:  # a sharded V1 checkpoint's meta graph, unless P.index makes P complete
            sharded = [b for b in out.v1 if L.meta_graph_filename(b) == n]
            if sharded and base not in out.complete:
                base = sharded[0]
        info = _info(d, n, real)
        if info is None or info.is_dir or (info.link_out and kind == L.INDEX):
            if (info is None and d.lstat(n) is not None) or (info is not None and info.link_out):
                out.special.append(n)  # a FIFO, socket, device, or a link out (refuse_special decides)
            if info is None or info.is_dir:
                continue
        out.files.setdefault(base, []).append(info)
    return out


__all__ = ["RESERVED", "DirListing", "FileInfo", "scan"]
