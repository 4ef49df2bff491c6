"""Per-tensor loops are linear (issue 21): counted in operations, never timed.

Each test runs an operation over N and 2N variables and counts the calls of the
functions a quadratic loop would multiply: lookups stay O(1) per name (the name
index is built once per open checkpoint), so the counts at most double."""

import numpy as np
import pytest

import ckptool
from ckptool.format import bundle
from ckptool.ops.inspect.stats import tensor_stats
from ckptool.ops.inspect.verify import verify
from ckptool.ops.read import v2 as read_v2


def _ckpt(tmp_path, n):
    prefix = str(tmp_path / f"n{n}" / "ckpt")
    ckptool.write(prefix, {f"layer_{i:05d}/w": np.full(3, i, np.float32) for i in range(n)}, sync=False)
    return prefix


class Counter:
    def __init__(self, monkeypatch, owner, name):
        self.calls = 0
        real = getattr(owner, name)

        def counted(*a, **k):
            self.calls += 1
            return real(*a, **k)

        monkeypatch.setattr(owner, name, counted)


def _counts(monkeypatch, prefix, op):
    """(lookups, full listings walked, entries parsed) while ``op`` runs on ``prefix``."""
    index = Counter(monkeypatch, read_v2.BundleCheckpoint, "_index")
    listings = Counter(monkeypatch, read_v2.BundleCheckpoint, "variables")
    parse = Counter(monkeypatch, bundle, "parse_entry")
    with ckptool.open(prefix) as ck:
        op(ck)
    monkeypatch.undo()
    return index.calls, listings.calls, parse.calls


@pytest.mark.parametrize("op", [
    lambda ck: [tensor_stats(ck, v.name) for v in ck.variables()],
    lambda ck: [ck.read(v.name) for v in ck.variables()],
    lambda ck: [ck.variable(v.name) for v in ck.variables()],
    lambda ck: [v.name in ck for v in ck.variables()],
    lambda ck: verify(ck, workers=1),
], ids=["stats", "read", "variable", "contains", "verify"])
def test_counts_scale_linearly(tmp_path, monkeypatch, op):
    small = _counts(monkeypatch, _ckpt(tmp_path, 300), op)
    big = _counts(monkeypatch, _ckpt(tmp_path, 600), op)
    # each entry parsed at most once per open checkpoint, whatever the operation
    assert small[2] <= 300 and big[2] <= 600
    # lookups are dict probes: their count doubles, never quadruples
    assert big[0] <= 2 * small[0] + 2
    # no lookup walks the listing: a constant number of listings, whatever N
    assert small[1] == big[1] <= 3


def test_name_index_built_once(tmp_path, monkeypatch):
    prefix = _ckpt(tmp_path, 500)
    with ckptool.open(prefix) as ck:
        for v in ck.variables():
            ck.variable(v.name)
            assert v.name in ck
        pos = ck._pos  # one index of names serves lookups and variable(): no second map
        assert pos is not None and len(pos) == 500 and ck._by_name is None
        for v in ck.variables():
            ck.read(v.name)
        assert ck._pos is pos  # the same index: never rebuilt


def test_listing_parses_no_entry(tmp_path, monkeypatch):
    """Listing an index without partitioned tensors decodes each distinct dtype+shape
    head once and parses no full entry."""
    prefix = _ckpt(tmp_path, 400)
    parse = Counter(monkeypatch, bundle, "parse_entry")
    heads = Counter(monkeypatch, bundle, "listing_head")
    with ckptool.open(prefix) as ck:
        vs = ck.variables()
    assert len(vs) == 400 and parse.calls == 0 and heads.calls == 1
    assert vs[7] == ("layer_00007/w", "float32", (3,), 12, 0)


def test_listing_pauses_the_collector_and_restores_it(tmp_path, monkeypatch):
    """Opening and listing build their objects with the cyclic GC paused (each 700
    allocations would start a collection), and leave it as they found it."""
    import gc

    prefix = _ckpt(tmp_path, 50)
    states = []
    real = read_v2.BundleCheckpoint._list_plain

    def spy(self):
        states.append(gc.isenabled())
        return real(self)

    monkeypatch.setattr(read_v2.BundleCheckpoint, "_list_plain", spy)
    assert gc.isenabled()
    with ckptool.open(prefix) as ck:
        ck.variables()
    assert states == [False] and gc.isenabled()
    gc.disable()
    try:
        with ckptool.open(prefix) as ck:
            ck.variables()
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()
