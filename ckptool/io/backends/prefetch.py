"""Parallel ranged reads from an object store, delivered in the order they are read.

A streaming operation (verify, statistics, convert, average, diff, save
``--from``, ``rewrite-names --compact``) knows, before it reads, the byte
ranges it will read and in which order. :class:`Prefetcher` takes that plan,
coalesces adjacent ranges of one object into requests of up to
:data:`REQUEST_BYTES`, and keeps up to ``jobs`` ranged GETs in flight on as
many threads, in plan order. Reads of the planned ranges (``readinto`` of the
readers involved, in any chunking) are then answered from the fetched
requests; a request's bytes are dropped as soon as they have all been read,
or once a later request is read from (the plan is consumed forwards). So:

- each planned byte is fetched once;
- memory is bounded: fetched-but-unread plus in-flight bytes never exceed
  ``jobs`` x :data:`REQUEST_BYTES` (one request larger than that when a
  single request is all there is);
- a read that is not in the plan goes to the object as before.

``stats`` counts requests, bytes fetched and the most requests and bytes that
were in flight at once (for tests and the bench).
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Bytes per ranged GET: several MiB, so that the first-byte latency of each request
#: is small beside its transfer time (8 MiB at 90 MiB/s is 90 ms against ~50 ms).
REQUEST_BYTES = 8 << 20
#: Ranged GETs in flight by default: enough to fill a link that one connection fills to
#: about an eighth; with REQUEST_BYTES, at most 64 MiB held.
DEFAULT_JOBS = 8


@dataclass
class PrefetchStats:
    requests: int = 0
    bytes_fetched: int = 0
    max_in_flight: int = 0  # most GETs outstanding at once
    max_held: int = 0  # most bytes in flight or fetched and not yet read, at once


@dataclass
class _Request:
    key: Any  # which object (the reader)
    start: int
    end: int
    data: bytes | None = None
    error: BaseException | None = None
    state: str = "waiting"  # waiting, flying, done, dropped
    read: int = 0  # bytes of it read so far


class Prefetcher:
    """The plan ``ranges`` — ``(reader, offset, size)`` in the order they will be read —
    fetched by ``fetch(reader, start, end) -> bytes`` on ``jobs`` threads."""

    def __init__(self, ranges: Sequence[tuple[Any, int, int]], fetch: Callable[[Any, int, int], bytes],
                 jobs: int = DEFAULT_JOBS, request_bytes: int = REQUEST_BYTES):
        self._fetch = fetch
        self.jobs = max(1, jobs)
        self.budget = self.jobs * request_bytes
        self.stats = PrefetchStats()
        self._requests = _coalesce(ranges, request_bytes)
        # per reader: sorted request starts and their indices (the ranges of one reader in a
        # plan do not overlap once coalesced; a repeated range is planned once)
        self._by_key: dict[int, tuple[list[int], list[int]]] = {}
        for i, r in enumerate(self._requests):
            starts, idx = self._by_key.setdefault(id(r.key), ([], []))
            if starts and r.start < self._requests[idx[-1]].end:  # out of order or overlapping
                pos = bisect.bisect_left(starts, r.start)
                starts.insert(pos, r.start)
                idx.insert(pos, i)
            else:
                starts.append(r.start)
                idx.append(i)
        self._cond = threading.Condition()
        self._next = 0  # the next request to start
        self._floor = 0  # requests below this are dropped (the plan is read forwards)
        self._flying = 0
        self._held = 0
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"ckptool-get-{k}", daemon=True)
                         for k in range(min(self.jobs, len(self._requests)))]
        for t in self._threads:
            t.start()

    # -- fetching (worker threads) ----------------------------------------------

    def _may_start(self) -> bool:
        if self._next >= len(self._requests) or self._flying >= self.jobs:
            return False
        r = self._requests[self._next]
        return self._held == 0 or self._held + (r.end - r.start) <= self.budget

    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._closed and not self._may_start():
                    if self._next >= len(self._requests):
                        return
                    cond.wait()
                if self._closed:
                    return
                r = self._requests[self._next]
                self._next += 1
                if r.state == "dropped":
                    continue
                r.state = "flying"
                self._flying += 1
                self._held += r.end - r.start
                st = self.stats
                st.requests += 1
                st.max_in_flight = max(st.max_in_flight, self._flying)
                st.max_held = max(st.max_held, self._held)
            data: bytes | None = None
            error: BaseException | None = None
            try:
                data = self._fetch(r.key, r.start, r.end)
            except BaseException as exc:  # handed to the reader that waits for it
                error = exc
            with cond:
                self._flying -= 1
                self.stats.bytes_fetched += len(data or b"")
                if r.state == "dropped" or self._closed:
                    self._held -= r.end - r.start
                else:
                    r.data, r.error, r.state = data, error, "done"
                cond.notify_all()

    # -- reading (the consumer) ---------------------------------------------------

    def _find(self, key: Any, offset: int) -> int | None:
        got = self._by_key.get(id(key))
        if got is None:
            return None
        starts, idx = got
        pos = bisect.bisect_right(starts, offset) - 1
        if pos < 0:
            return None
        i = idx[pos]
        r = self._requests[i]
        return i if r.start <= offset < r.end and r.state != "dropped" else None

    def readinto(self, key: Any, offset: int, view: memoryview) -> bool:
        """Fill ``view`` from ``offset`` of ``key``'s object out of the plan; False (nothing
        copied) when the range is not wholly in planned, not yet dropped requests."""
        want = len(view)
        if want == 0:
            return False
        with self._cond:
            if self._closed:
                return False
            first = self._find(key, offset)
            if first is None:
                return False
            chain, pos, i = [], offset, first  # the requests that hold [offset, offset + want)
            while True:
                r = self._requests[i]
                chain.append(i)
                if offset + want <= r.end:
                    break
                pos = r.end
                i = self._find(key, pos)  # type: ignore[assignment]
                if i is None:
                    return False
            self._drop_below(first)
            done = 0
            for i in chain:
                r = self._requests[i]
                while r.state in ("waiting", "flying"):
                    self._cond.wait()
                if r.state == "dropped":
                    raise CkptError(f"read at offset {offset}: its prefetched range was dropped")
                if r.error is not None:
                    raise r.error
                data = r.data or b""
                lo = offset + done - r.start
                n = min(want - done, r.end - r.start - lo)
                if len(data) < lo + n:
                    from ckptool.io.oserrors import raise_truncated

                    raise_truncated(str(getattr(key, "path", "?")), offset, want, done + max(0, len(data) - lo))
                view[done:done + n] = data[lo:lo + n]
                done += n
                r.read += n
                if r.read >= r.end - r.start or i != chain[-1]:  # read up to its end: done with
                    self._free(r)
            return True

    def _free(self, r: _Request) -> None:
        if r.state == "done":
            self._held -= r.end - r.start
        if r.state != "flying":
            r.data = None
        r.state = "dropped"
        self._cond.notify_all()

    def _drop_below(self, i: int) -> None:
        while self._floor < i:
            r = self._requests[self._floor]
            if r.state != "dropped":
                self._free(r)
            self._floor += 1

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for r in self._requests:
                if r.state == "done":
                    self._held -= r.end - r.start
                r.data = None
            self._cond.notify_all()


def _coalesce(ranges: Sequence[tuple[Any, int, int]], request_bytes: int) -> list[_Request]:
    """Requests covering ``ranges`` in their order: adjacent ranges of one reader merged, then
    cut at ``request_bytes``; a range that repeats or overlaps one already planned is planned
    once (the earlier request holds it)."""
    runs: list[list[Any]] = []  # [key, start, end]
    seen: dict[int, list[tuple[int, int]]] = {}
    for key, offset, size in ranges:
        if size <= 0:
            continue
        end = offset + size
        spans = seen.setdefault(id(key), [])
        if any(s < end and offset < e for s, e in spans[-4:]):
            continue  # read twice (a slice listed twice): fetched once, read from the first
        if runs and runs[-1][0] is key and runs[-1][2] == offset:
            runs[-1][2] = end
        else:
            runs.append([key, offset, end])
        spans.append((offset, end))
    out = []
    for key, start, end in runs:
        pos = start
        while pos < end:
            n = min(request_bytes, end - pos)
            if 0 < end - pos - n < request_bytes // 4:  # no runt request at the end of a run
                n = end - pos
            out.append(_Request(key, pos, pos + n))
            pos += n
    return out


__all__ = ["Prefetcher", "PrefetchStats", "REQUEST_BYTES", "DEFAULT_JOBS"]
