"""Verification: read every stored byte, check every checksum, collect each problem."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ckptool.errors import CkptError, ResourceError
from ckptool.format import bundle, dtypes
from ckptool.format.slices import key_text as _shown
from ckptool.format.slices import tiling_problem
from ckptool.ops.read.chunks import string_parts
from ckptool.ops.read.prefetch import prefetch_entries
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    from ckptool.format.bundle import Entry
    from ckptool.ops.read.checkpoint import Checkpoint

T = TypeVar("T")
R = TypeVar("R")

#: Verification reads this much at a time into each thread's one buffer: far above the
#: 32 KiB from which the crc32c extension releases the GIL, and small enough that a
#: thread's first touch of its buffer (page faults) stays well under a millisecond.
VERIFY_CHUNK_BYTES = 1 << 20
#: Tensors are checked in batches of about this many bytes (small tensors share one task).
BATCH_BYTES = 4 << 20
#: ... or of this many tensors.
BATCH_TENSORS = 512


@dataclass
class Problem:
    name: str  # the tensor (or "" for the checkpoint as a whole)
    error: str
    #: for a problem of the checkpoint that damages tensors (missing data shards): those tensors
    tensors: list[str] = field(default_factory=list)
    #: the data files that are missing (each named in full), when that is the problem
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "error": self.error}
        if self.tensors:
            doc["tensors"] = self.tensors
        if self.missing:
            doc["missing"] = self.missing
        return doc


@dataclass
class VerifyReport:
    prefix: str
    tensors: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def damaged(self) -> list[str]:
        """The tensors found damaged, each once, sorted (a missing shard's included)."""
        return sorted({n for p in self.problems for n in ([p.name] if p.name else []) + p.tensors})

    def lost(self) -> list[str]:
        """The tensors stored in data shards that are missing, sorted (not read: not corrupt)."""
        return sorted({n for p in self.problems if p.missing for n in p.tensors})

    def corrupt(self) -> list[str]:
        """The tensors whose own bytes or entries are bad, sorted."""
        return sorted({p.name for p in self.problems if p.name} - set(self.lost()))

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "ok": self.ok, "tensors": self.tensors, "bytes": self.bytes,
                "errors": [p.to_json() for p in self.problems]}


def default_workers() -> int:
    """One thread per core this process may run on (reads and CRC32C release the GIL)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 16))


def verify(ck: Checkpoint, progress: Callable[[int, int], None] | None = None,
           chunk_bytes: int = VERIFY_CHUNK_BYTES, workers: int | None = None) -> VerifyReport:
    """Read every stored byte and check every checksum; collect each problem.

    Checked: every entry parses; every data shard the header counts is present
    (the missing ones are reported at once, by file name, from one listing of
    the directory; the tensors stored there are missing, not corrupt); the slices of each partitioned tensor tile its
    shape exactly once; every tensor's bytes match its CRC32C. Tensors are read
    by ``workers`` threads (default: one per core), each with at most one
    ``chunk_bytes`` buffer, so memory stays bounded; on an object store, one
    thread checks while ``workers`` ranged GETs (default 8) fetch ahead in the
    order of reading, memory bounded by those in flight. Shards are read one after the other
    and each closed once checked (open files stay bounded); running out of them
    (EMFILE) is a :class:`ResourceError` "could not check", never damage. ``progress(done_bytes,
    total_bytes)`` is called as data is read, from any of those threads.
    """
    report = VerifyReport(ck.prefix)
    try:
        if not isinstance(ck, BundleCheckpoint):
            return _verify_v1(ck, report, progress)
        with ExitStack() as fetching:
            return _verify_v2(ck, report, progress, chunk_bytes, workers, fetching)
    except ResourceError as exc:  # too many open files: no verdict on the checkpoint
        raise ResourceError(f"could not check {ck.prefix}: {exc}") from None


def _verify_v2(ck: BundleCheckpoint, report: VerifyReport, progress: Callable[[int, int], None] | None,
               chunk_bytes: int, workers: int | None, fetching: ExitStack) -> VerifyReport:
    entries, owners = _index_problems(ck, report)
    plain = _set_aside_missing(ck, report, [e for e in entries if not e.slices], owners)
    # Read in storage order (shard, then offset): each shard front to back, closed once its last
    # tensor is checked, so the files open stay bounded (1000 shards under ``ulimit -n 64``);
    # problems are still reported in key order (``plain``'s: keys() is sorted).
    plain.sort(key=lambda e: (e.shard_id, e.offset))
    # Local files: ``workers`` threads read and check (one per core by default). An object
    # store: one thread checks while ``workers`` ranged GETs are in flight (the storage's
    # default when not given), fetched ahead in this order.
    fetching.enter_context(prefetch_entries(ck, plain, jobs=None if ck.storage.concurrent_reads else workers))
    report.problems.extend(_check_data(ck, plain, owners, progress, chunk_bytes, workers))
    report.tensors = (sum(1 for e in entries if not e.slices and e.key not in owners)
                      + sum(1 for e in entries if e.slices))
    report.bytes = sum(e.size for e in plain)
    return report


def _index_problems(ck: BundleCheckpoint, report: VerifyReport) -> tuple[list[Entry], dict[bytes, str]]:
    """Every entry of the index that parses, and ``{slice entry's key: its tensor's name}``;
    the problems of the index (an entry that does not parse, slices that do not tile their
    tensor, a slice entry missing or at odds with its tensor) added to ``report``."""
    entries, owners = [], {}
    for key in ck.keys():
        try:
            e = ck.entry(key)
        except CkptError as exc:
            report.problems.append(Problem(_shown(key), str(exc)))
            continue
        entries.append(e)
    for e in entries:
        if not e.slices:
            continue
        problem = tiling_problem(e.shape, e.slices)
        if problem is not None:
            report.problems.append(Problem(_shown(e.key), f"{ck.index_path}: partitioned tensor "
                                                          f"{_shown(e.key)!r}: {problem}"))
        for sl in dict.fromkeys(e.slices):
            owners[bundle.encode_tensor_name_slice(e.key, sl)] = _shown(e.key)
            try:
                ck.slice_entry(e, sl)
            except CkptError as exc:
                report.problems.append(Problem(_shown(e.key), str(exc)))
    return entries, owners


def _set_aside_missing(ck: BundleCheckpoint, report: VerifyReport, plain: list[Entry],
                       owners: dict[bytes, str]) -> list[Entry]:
    """``plain`` without the entries stored in data shards that are missing: those are
    not read, their tensors join the one problem (first in ``report``) that names the files."""
    missing, ranges = ck.missing_shards()
    if not missing:
        return plain
    gone = _missing_problem(ck, missing, ranges)
    report.problems.insert(0, gone)
    starts = [a for a, _ in ranges]
    lost = [e for e in plain if _in_ranges(e.shard_id, starts, ranges)]
    gone.tensors = sorted({owners.get(e.key, _shown(e.key)) for e in lost})
    n = len(gone.tensors)
    gone.error += f"; {n:,} {'tensor is' if n == 1 else 'tensors are'} stored there"
    lost_keys = {e.key for e in lost}
    return [e for e in plain if e.key not in lost_keys]


def _batches(plain: list[Entry]) -> list[list[Entry]]:
    """``plain`` cut, in order, into tasks of about :data:`BATCH_BYTES` or :data:`BATCH_TENSORS`."""
    batches, batch, size = [], [], 0
    for e in plain:
        batch.append(e)
        size += e.size
        if size >= BATCH_BYTES or len(batch) >= BATCH_TENSORS:
            batches.append(batch)
            batch, size = [], 0
    if batch:
        batches.append(batch)
    return batches


def _check_data(ck: BundleCheckpoint, plain: list[Entry], owners: dict[bytes, str],
                progress: Callable[[int, int], None] | None, chunk_bytes: int, workers: int | None) -> list[Problem]:
    """The problems of the bytes of the ``plain`` entries, read in this order by ``workers``
    threads, each shard released once its last tensor is checked; sorted by key."""
    left = Counter(e.shard_id for e in plain)
    total = sum(e.size for e in plain)
    lock = threading.Lock()
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        if progress is not None:
            with lock:
                done += n
                progress(done, total)

    if progress:
        progress(0, total)
    # One read buffer per thread, reused for every tensor it checks (a fresh buffer per
    # tensor is a fresh mmap, and its page faults cost as much as the reading).
    buf_bytes = min(chunk_bytes, max((e.size for e in plain if e.dtype.is_fixed or e.dtype.kind == dtypes.STRING),
                                     default=0))
    local = threading.local()

    def checked(shard: int) -> None:
        with lock:
            left[shard] -= 1
            last = not left[shard]
        if last:
            ck.release_shard(shard)

    def check(batch: list[Entry]) -> list[tuple[bytes, Problem]]:
        out = []
        buf = getattr(local, "buf", None)
        if buf is None:
            buf = local.buf = memoryview(bytearray(buf_bytes))
        for e in batch:
            try:
                _check_entry(ck, e, buf, tick)
            except ResourceError:
                raise  # the run's trouble, not the checkpoint's
            except CkptError as exc:
                out.append((e.key, Problem(owners.get(e.key, _shown(e.key)), str(exc))))
            finally:
                checked(e.shard_id)
        return out

    threads = (workers or default_workers()) if ck.storage.concurrent_reads else 1
    found = [p for problems in _map_threads(check, _batches(plain), max(1, threads)) for p in problems]
    return [p for _, p in sorted(found, key=lambda rp: rp[0])]


#: A missing-shard problem names up to this many data files (then "and N more").
MISSING_NAMED = 5


def _missing_problem(ck: BundleCheckpoint, missing: int, ranges: list[tuple[int, int]]) -> Problem:
    """The one problem of the data shards the header counts that are not there: each named
    (``ckpt-5.data-00002-of-00005``), up to :data:`MISSING_NAMED`, and said to be missing."""
    n_shards = ck.header.num_shards
    first: list[str] = []
    for a, b in ranges:
        first.extend(ck.shard_path(i) for i in range(a, min(b, a + MISSING_NAMED) + 1))
        if len(first) >= MISSING_NAMED:
            break
    first = first[:MISSING_NAMED]
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:5])
    more = (f" and {missing - len(first):,} more (shards {shown}"
            f"{f' and {len(ranges) - 5:,} more ranges' if len(ranges) > 5 else ''})" if missing > len(first) else "")
    if missing == 1:
        text = f"{first[0]}: missing (data shard {ranges[0][0]} of {n_shards:,})"
    else:
        text = f"{missing:,} of {n_shards:,} data shards are missing: {', '.join(first)}{more}"
    return Problem("", text, missing=first)


def _in_ranges(i: int, starts: list[int], ranges: list[tuple[int, int]]) -> bool:
    """Whether ``i`` is in one of the sorted, disjoint inclusive ``ranges`` (``starts``: their firsts)."""
    import bisect

    j = bisect.bisect_right(starts, i) - 1
    return j >= 0 and ranges[j][0] <= i <= ranges[j][1]


def _map_threads(fn: Callable[[T], R], items: list[T], threads: int) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``threads`` threads, the calling one among them
    (a worker costs a thread start, which on a small VM is milliseconds). Each thread takes
    the next item as it finishes one. The first exception stops the taking of new items
    and is raised once every thread has stopped."""
    results: list[Any] = [None] * len(items)
    pending = iter(range(len(items)))
    lock = threading.Lock()
    stop: list[BaseException | None] = []  # non-empty: take no more items

    def work() -> None:
        while not stop:
            with lock:
                i = next(pending, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as exc:  # re-raised in the calling thread
                stop.append(exc)
                return

    helpers = [threading.Thread(target=work, name=f"ckptool-verify-{k}", daemon=True)
               for k in range(1, min(threads, len(items)))]
    for t in helpers:
        t.start()
    try:
        work()
    finally:
        stop.append(None)
        for t in helpers:
            t.join()
    if stop[0] is not None:
        raise stop[0]
    return results


def _check_entry(ck: BundleCheckpoint, e: Entry, view: memoryview, tick: Callable[[int], None]) -> None:
    """Read one plain entry and check its checksum: fixed-size tensors chunk by chunk into
    the caller's bounded buffer ``view`` (:meth:`BundleCheckpoint.iter_fixed`), strings too (their
    lengths first: :func:`_check_string`), variants decoded whole."""
    if e.dtype.kind == dtypes.STRING:
        _check_string(ck, e, view, tick)
        return
    if not e.dtype.is_fixed:
        ck.varlen_values(e, True)
        tick(e.size)
        return
    for part in ck.iter_fixed(e, view):
        tick(len(part))


def _check_string(ck: BundleCheckpoint, e: Entry, view: memoryview, tick: Callable[[int], None]) -> None:
    """A plain DT_STRING entry checked as :meth:`BundleCheckpoint.varlen_values` checks it,
    without holding it: its elements' bytes read into ``view`` a part at a time."""
    got = 0
    try:
        for part in string_parts(ck, e, view):
            got += len(part)
            tick(len(part))
    finally:
        tick(e.size - got)  # its lengths (and, when it is damaged, what was not counted)


def _verify_v1(ck: Checkpoint, report: VerifyReport, progress: Callable[[int, int], None] | None) -> VerifyReport:
    variables = ck.variables()
    total = sum(v.nbytes for v in variables)
    done = 0
    for v in variables:
        try:
            ck.read(v.name, verify=True)
        except ResourceError:
            raise
        except CkptError as exc:
            report.problems.append(Problem(v.name, str(exc)))
        done += v.nbytes
        report.tensors += 1
        report.bytes += v.nbytes
        if progress:
            progress(done, total)
    return report
