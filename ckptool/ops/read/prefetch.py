"""The one path by which streaming operations tell storage what they will read.

An operation that reads many tensors one after the other (verify, statistics,
convert, average, diff, save ``--from``, ``rewrite-names --compact``) opens
:func:`prefetch` (by tensor names) or :func:`prefetch_entries` (by index
entries) around its loop, naming the tensors in the order it will read them.
The storage then fetches ahead (:meth:`ckptool.io.base.Storage.prefetch`):
on an object store, ``jobs`` ranged GETs of several MiB in flight, adjacent
tensors coalesced, memory bounded by the requests in flight, each byte fetched
once; on local files, nothing (the plan is never even built). The reads
themselves are unchanged: ``read``, ``read_raw``, the chunk readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.io.backends.prefetch import DEFAULT_JOBS

if TYPE_CHECKING:
    from ckptool.format.bundle import Entry
    from ckptool.io.base import Reader
    from ckptool.ops.read.v2 import BundleCheckpoint


def _bundle(ck: object) -> BundleCheckpoint | None:
    from ckptool.ops.read.v2 import BundleCheckpoint

    return ck if isinstance(ck, BundleCheckpoint) else None


def prefetch(ck: object, names: Iterable[str], jobs: int | None = None,
             fixed_only: bool = False) -> AbstractContextManager[None]:
    """While open, the data of tensors ``names`` of ``ck`` (in that order; a partitioned
    tensor's slices in its slice order; ``fixed_only``: string and variant tensors left
    out, for readers that skip them) may be fetched ahead, ``jobs`` requests in flight.
    A V1 checkpoint (or any other reader) is read as before."""
    b = _bundle(ck)
    if b is None:
        return nullcontext()
    return b.storage.prefetch(_planned(b, names, fixed_only), jobs)


def prefetch_entries(ck: object, entries: Iterable[Entry], jobs: int | None = None) -> AbstractContextManager[None]:
    """:func:`prefetch` of plain V2 entries (slice entries included), read in this order."""
    b = _bundle(ck)
    if b is None:
        return nullcontext()
    return b.storage.prefetch(_ranges(b, entries), jobs)


def _planned(ck: BundleCheckpoint, names: Iterable[str], fixed_only: bool) -> Iterator[tuple[Reader, int, int]]:
    for name in names:
        try:
            e = ck.lookup(name)
            if fixed_only and not e.dtype.is_fixed:
                continue
            parts = [ck.slice_entry(e, sl) for sl in e.slices] if e.slices else [e]
        except CkptError:
            continue  # reported when the operation reads it
        yield from _ranges(ck, parts)


def _ranges(ck: BundleCheckpoint, entries: Iterable[Entry]) -> Iterator[tuple[Reader, int, int]]:
    for e in entries:
        if e.slices:
            continue
        try:
            r = ck.shard_reader(e)  # bounds-checked: a tensor past its file's end is not fetched
        except CkptError:
            continue  # reported when the operation reads it
        if e.size:
            yield r, e.offset, e.size


__all__ = ["prefetch", "prefetch_entries", "DEFAULT_JOBS"]
