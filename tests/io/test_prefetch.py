"""The prefetch plan (ckptool/io/backends/prefetch.py) against a fake object store that counts what it
serves and how much was outstanding: order and values exact, each byte fetched once,
requests in flight, memory bounded by the bytes in flight."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.errors import CkptError
from ckptool.io.backends.prefetch import Prefetcher


class Obj:
    def __init__(self, data: bytes, path: str = "obj"):
        self.data = data
        self.path = path


class Store:
    """fetch(obj, start, end) with a delay; counts requests, bytes, concurrency."""

    def __init__(self, delay: float = 0.0, fail_at: int | None = None):
        self.delay = delay
        self.fail_at = fail_at
        self.lock = threading.Lock()
        self.flying = 0
        self.max_flying = 0
        self.served: list[tuple[str, int, int]] = []

    def fetch(self, obj: Obj, start: int, end: int) -> bytes:
        with self.lock:
            self.flying += 1
            self.max_flying = max(self.max_flying, self.flying)
            self.served.append((obj.path, start, end))
        try:
            if self.delay:
                time.sleep(self.delay)
            if self.fail_at is not None and start <= self.fail_at < end:
                raise CkptError(f"{obj.path}: cannot read at offset {start}")
            return obj.data[start:end]
        finally:
            with self.lock:
                self.flying -= 1

    def bytes(self) -> int:
        return sum(e - s for _, s, e in self.served)


def _read(pf: Prefetcher, obj: Obj, offset: int, size: int) -> bytes:
    buf = bytearray(size)
    assert pf.readinto(obj, offset, memoryview(buf))
    return bytes(buf)


def test_in_order_exact_once_parallel_and_bounded():
    objs = [Obj(os.urandom(3 << 20), f"shard{i}") for i in range(2)]
    # 64 tensors of 96 KiB .. 1 MiB in each shard, read in key order (interleaved shards)
    ranges, pos = [], [0, 0]
    rng = random.Random(5)
    for i in range(40):
        k = i % 2
        n = min(rng.randrange(96 << 10, 1 << 20), len(objs[k].data) - pos[k])
        if n <= 0:
            continue
        ranges.append((objs[k], pos[k], n))
        pos[k] += n
    store = Store(delay=0.02)
    pf = Prefetcher(ranges, store.fetch, jobs=6, request_bytes=256 << 10)
    try:
        for obj, off, n in ranges:  # each tensor in chunks of 100 KB, as verify/stats read
            got = b"".join(_read(pf, obj, off + c, min(100_000, n - c)) for c in range(0, n, 100_000))
            assert got == obj.data[off:off + n]
    finally:
        pf.close()
    total = sum(n for _, _, n in ranges)
    assert store.bytes() == total == pf.stats.bytes_fetched  # each byte once
    assert store.max_flying >= 4 and pf.stats.max_in_flight >= 4
    assert pf.stats.max_held <= 6 * (256 << 10) * 5 // 4  # jobs x request (a run's tail may add a quarter)
    spans = sorted((p, s, e) for p, s, e in store.served)
    assert all(a[0] != b[0] or a[2] <= b[1] for a, b in zip(spans, spans[1:]))  # no overlap


def test_adjacent_tensors_coalesce_into_few_requests():
    obj = Obj(os.urandom(1 << 20))
    ranges = [(obj, i * 1024, 1024) for i in range(1024)]  # 1,024 adjacent 1 KiB tensors
    store = Store()
    pf = Prefetcher(ranges, store.fetch, jobs=4, request_bytes=256 << 10)
    try:
        assert b"".join(_read(pf, obj, o, n) for _, o, n in ranges) == obj.data
    finally:
        pf.close()
    assert len(store.served) == 4 and store.bytes() == len(obj.data)


def test_reads_outside_the_plan_are_not_served_and_skipped_ones_are_dropped():
    obj = Obj(os.urandom(1 << 20))
    ranges = [(obj, i << 16, 1 << 16) for i in range(16)]
    store = Store()
    pf = Prefetcher(ranges, store.fetch, jobs=2, request_bytes=1 << 16)
    try:
        assert not pf.readinto(Obj(b"x" * 10), 0, memoryview(bytearray(4)))  # another object
        assert _read(pf, obj, 5 << 16, 100) == obj.data[5 << 16: (5 << 16) + 100]  # skips 0-4
        assert not pf.readinto(obj, 0, memoryview(bytearray(10)))  # dropped: the plan reads forwards
        for i in range(6, 16):
            assert _read(pf, obj, i << 16, 1 << 16) == obj.data[i << 16: (i + 1) << 16]
    finally:
        pf.close()
    assert pf.stats.max_held <= 2 << 16


def test_a_failed_request_raises_in_the_reader():
    obj = Obj(os.urandom(1 << 16))
    pf = Prefetcher([(obj, 0, 1 << 16)], Store(fail_at=40_000).fetch, jobs=4, request_bytes=1 << 14)
    try:
        assert _read(pf, obj, 0, 1 << 14) == obj.data[: 1 << 14]
        with pytest.raises(CkptError, match="cannot read at offset 32768"):
            _read(pf, obj, 1 << 15, 1 << 14)
    finally:
        pf.close()


def test_a_short_object_is_a_truncation():
    obj = Obj(b"x" * 1000)
    pf = Prefetcher([(obj, 0, 2000)], Store().fetch, jobs=2, request_bytes=4096)
    try:
        with pytest.raises(CkptError, match="truncated"):
            _read(pf, obj, 0, 2000)
    finally:
        pf.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=40), st.integers(1, 5), st.integers(512, 8192),
       st.integers(1, 3000))
def test_any_plan_reads_back_exactly(sizes, jobs, request, chunk):
    obj = Obj(os.urandom(sum(sizes) + 7))
    ranges, pos = [], 3
    for n in sizes:
        ranges.append((obj, pos, n))
        pos += n
    store = Store()
    pf = Prefetcher(ranges, store.fetch, jobs=jobs, request_bytes=request)
    try:
        for _, off, n in ranges:
            for c in range(0, n, chunk):
                m = min(chunk, n - c)
                assert _read(pf, obj, off + c, m) == obj.data[off + c: off + c + m]
    finally:
        pf.close()
    assert store.bytes() == sum(sizes)
    assert pf.stats.max_held <= max(jobs * request, request * 5 // 4 + 1)


def test_one_job_a_read_across_two_requests_after_a_skip_does_not_wait_forever():
    obj = Obj(os.urandom(1 << 16))
    store = Store()
    pf = Prefetcher([(obj, 0, 1 << 16)], store.fetch, jobs=1, request_bytes=1 << 14)
    try:
        # the head of the first request is never read; the read spans the first two
        assert _read(pf, obj, 1000, 1 << 14) == obj.data[1000: 1000 + (1 << 14)]
        assert _read(pf, obj, 1000 + (1 << 14), 5000) == obj.data[1000 + (1 << 14): 6000 + (1 << 14)]
    finally:
        pf.close()
    assert store.bytes() <= 1 << 16 and pf.stats.max_in_flight == 1
