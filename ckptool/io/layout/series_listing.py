"""One listing of a directory as a Keras ``ModelCheckpoint`` series: its members (the names
the template matches, :mod:`ckptool.io.layout.series_names`), each member's own files, its fields,
its place in the series and whether it is whole (:mod:`ckptool.format.keras_files`).

Only regular files directly in DIR are members' files; a symlink or anything else at a
member's name is named in :attr:`SeriesListing.skipped` and never touched. A TF-format member
(tf_keras ``save_weights`` to a prefix) is the prefix's own files by the one rule of
:mod:`ckptool.io.layout.listing` (``P.index``, ``P.data-NNNNN-of-NNNNN``); whether its shards are all
there is read from its index by the ops layer.
"""

from __future__ import annotations

import io
import math
import os
import stat as _stat
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format.bundle import INDEX_SUFFIX
from ckptool.format.keras_files import COMPLETE, DAMAGED, OPEN, h5_state, keras_state, sharded_parts, worst
from ckptool.io.layout.listing import RESERVED, FileInfo
from ckptool.io.layout.series_names import KERAS, SHARDED, TF_PREFIX, Template, Value, part_index
from ckptool.io.readerfile import ReaderFile

if TYPE_CHECKING:
    from ckptool.io.base import Dir

#: A member not whole and younger than this (seconds) is a write in progress; the newest file
#: of a series younger than this is never deleted.
YOUNG = 60.0


@dataclass
class Member:
    """One save of the series: ``name`` (a file name; a TF member's prefix), its field values,
    its files (the one whose deletion unmakes it first: the file itself, a sharded member's
    JSON, a TF member's index), the newest of their times, and its state (``complete``,
    ``open``: being written or cut short, ``damaged``) with the problem found."""

    name: str
    values: dict[str, Value]
    files: list[FileInfo]
    mtime: float
    state: str = COMPLETE
    problem: str | None = None

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def step(self, template: Template) -> int | None:
        """The member's place for step rules (keep-steps-every): its ``epoch``, else ``batch``."""
        for c in template.counters:
            v = self.values.get(c)
            if isinstance(v, int):
                return v
        return None


@dataclass
class SeriesListing:
    """DIR's members of one series, oldest first: by ``{epoch}`` then ``{batch}`` when the
    template has them, then by time, then by name."""

    directory: str
    template: Template
    members: list[Member] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)  # names that read two ways: no member
    skipped: list[str] = field(default_factory=list)  # a member's name that is no regular file

    def by_name(self) -> dict[str, Member]:
        return {m.name: m for m in self.members}


def order_key(template: Template, m: Member) -> tuple[tuple[float, ...], float, str]:
    counters = tuple(float(v) if isinstance((v := m.values.get(c)), (int, float)) and not (
        isinstance(v, float) and math.isnan(v)) else -math.inf for c in template.counters)
    return counters, m.mtime, m.name


def _stat_file(d: Dir, name: str) -> FileInfo | None:
    """A regular file of DIR (a symlink, directory or device is None)."""
    st = d.lstat(name)
    if st is None or not _stat.S_ISREG(st.st_mode):
        return None
    inode = (st.st_dev, st.st_ino) if st.st_ino else None
    return FileInfo(name, st.st_size, st.st_mtime, inode=inode, nlink=max(1, st.st_nlink))


def reader(d: Dir, name: str) -> tuple[Callable[[int, int], bytes], Callable[[], None]]:
    """``(read(offset, n), close)`` of a file of DIR: through DIR's descriptor locally (no
    symlink followed, never blocking on a FIFO), through the storage otherwise."""
    from ckptool.io.safety.dirfd import PathDir

    if isinstance(d, PathDir):
        r = d.storage.open_reader(d.join(name))
        return (lambda off, n: bytes(r.read(off, min(n, max(0, r.size - off))))), r.close
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), dir_fd=d.fd)
    except OSError as exc:
        raise CkptError(f"{d.join(name)}: cannot read: {exc.strerror or exc}") from None
    return (lambda off, n: os.pread(fd, n, off)), (lambda: os.close(fd))


def _check(d: Dir, f: FileInfo, check: Callable[[Callable[[int, int], bytes], int], tuple[str, str | None]]
           ) -> tuple[str, str | None]:
    try:
        read, close = reader(d, f.name)
    except CkptError as exc:
        return DAMAGED, str(exc)
    try:
        state, why = check(read, f.size)
    except OSError as exc:
        state, why = DAMAGED, f"cannot read: {exc.strerror or exc}"
    finally:
        close()
    return state, (f"{f.name}: {why}" if why else None)


def zip_state(read: Callable[[int, int], bytes], size: int) -> tuple[str, str | None]:
    """:func:`ckptool.format.keras_files.keras_state` of a file read by ``read(offset, n)``."""
    return keras_state(io.BufferedReader(ReaderFile(read, size)))


def classify(listing: SeriesListing, now: float) -> tuple[list[Member], list[Member], list[Member]]:
    """``(intact, in progress, damaged)`` members, each oldest first: of those not whole, the
    newest by order or by time, and any younger than :data:`YOUNG`, are writes in progress."""
    members = listing.members
    newest_time = max(members, key=lambda m: (m.mtime, m.name)) if members else None
    last = members[-1] if members else None
    intact, busy, bad = [], [], []
    for m in members:
        if m.state == COMPLETE:
            intact.append(m)
        elif m is last or m is newest_time or now - m.mtime < YOUNG:
            busy.append(m)
        else:
            bad.append(m)
    return intact, busy, bad


def scan_series(d: Dir, template: Template, names: list[str] | None = None) -> SeriesListing:
    """The members of ``template`` in the open directory ``d``, each checked (a few bytes per
    file; see :mod:`ckptool.format.keras_files`)."""
    names = d.names() if names is None else names
    out = SeriesListing(d.path, template)
    if template.kind == TF_PREFIX:
        _tf_members(d, template, out)
    else:
        _file_members(d, template, names, out)
    out.members.sort(key=lambda m: order_key(template, m))
    return out


def _file_members(d: Dir, template: Template, names: list[str], out: SeriesListing) -> None:
    found: list[tuple[str, dict[str, Value]]] = []
    for n in names:
        if n in RESERVED:
            continue
        readings = template.readings(n)
        if len(readings) > 1:
            out.ambiguous.append(n)
        elif readings:
            found.append((n, readings[0]))
    claims: dict[str, int] = {}
    parts_of: dict[str, list[str]] = {}
    if template.kind == SHARDED:
        member_names = {n for n, _ in found}
        for j, _ in found:
            parts_of[j] = [n for n in names if n not in member_names and part_index(j, n) is not None]
            for p in parts_of[j]:
                claims[p] = claims.get(p, 0) + 1
    for n, values in found:
        f = _stat_file(d, n)
        if f is None:
            if d.lstat(n) is not None:
                out.skipped.append(n)
            continue
        m = Member(n, values, [f], f.mtime)
        if template.kind == SHARDED:
            _sharded(d, m, [p for p in parts_of[n] if claims[p] == 1], out)
        else:
            m.state, m.problem = _check(d, f, zip_state if template.kind == KERAS else h5_state)
        out.members.append(m)


def _sharded(d: Dir, m: Member, parts: list[str], out: SeriesListing) -> None:
    """A sharded member: the JSON (written last by Keras) and its parts."""
    infos = {}
    for p in sorted(parts, key=lambda p: part_index(m.name, p) or 0):
        info = _stat_file(d, p)
        if info is None:
            out.skipped.append(p)
            continue
        infos[p] = info
    m.files += list(infos.values())
    m.mtime = max(f.mtime for f in m.files)
    raw = d.read(m.name)
    named = sharded_parts(raw) if raw is not None else None
    if named is None:
        m.state, m.problem = OPEN, f"{m.name}: not a sharded weights index (yet): being written, or cut short"
        return
    states: list[tuple[str, str | None]] = []
    for p in named:
        if p not in infos:
            why = "names a file that is not one of its parts" if part_index(m.name, p) is None else "is missing"
            states.append((DAMAGED, f"{m.name}: its part {p!r} {why}"))
            continue
        states.append(_check(d, infos[p], h5_state))
    m.state, m.problem = worst(states)


def _tf_members(d: Dir, template: Template, out: SeriesListing) -> None:
    """TF-format members: checkpoint prefixes the template matches, their files by the one rule
    of :func:`ckptool.io.layout.listing.scan`; a prefix without a valid index is ``open``."""
    from ckptool.io.layout.listing import scan

    listing = scan(d)
    for base, files in sorted(listing.files.items()):
        readings = template.readings(base)
        if len(readings) > 1:
            out.ambiguous.append(base)
        if len(readings) != 1:
            continue
        if any(f.link_out for f in files):
            out.skipped.append(base)
            continue
        files = sorted(files, key=lambda f: (f.name != base + INDEX_SUFFIX, f.name))
        mtime = listing.mtime(base)
        m = Member(base, readings[0], list(files), mtime if mtime is not None else max(f.mtime for f in files))
        if base not in listing.complete:
            m.state, m.problem = OPEN, f"{base}: no valid {INDEX_SUFFIX} file (being written, or cut short)"
        out.members.append(m)


__all__ = ["YOUNG", "Member", "SeriesListing", "classify", "order_key", "reader", "scan_series"]
