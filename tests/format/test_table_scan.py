"""The bulk scan of a table (format/table_scan.py) gives what the entry-by-entry scan gives, for
every table: TF's layout, other restart intervals, long keys and values (varints of several
bytes), names that are not ASCII or not UTF-8, and damaged blocks (the same error, or the same
entries). The head grouping of listing (format/bundle_heads.py) groups as a dict of bytes does."""

import io
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.errors import CkptError
from ckptool.format import bundle_heads, table
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.objkeys import name_of
from ckptool.format.table import TableReader
from ckptool.format.table_build import TableBuilder


@pytest.fixture(autouse=True)
def bulk_always(monkeypatch):
    """Every table scanned in bulk, however small."""
    monkeypatch.setattr(table, "BULK_MIN_BYTES", 0)


def _build(entries, interval=16, block_size=4096):
    out = io.BytesIO()
    b = TableBuilder(out, block_size=block_size)
    b.data.interval = interval
    for k, v in entries:
        b.add(k, v)
    b.finish()
    return out.getvalue()


def _slow(data):
    """The entry-by-entry scan: (names, values) or the error it raises."""
    try:
        keys, values = TableReader(data, "t").scan()
    except CkptError as exc:
        return type(exc), str(exc)
    return [name_of(k) for k in keys], [bytes(v) for v in values]


def _bulk(data, used=None):
    try:
        got = TableReader(data, "t").entries()
    except CkptError as exc:
        return type(exc), str(exc)
    if used is not None:
        used.append(got.values is None)
    return list(got.names), [bytes(got.value(i)) for i in range(len(got))]


keys = st.lists(st.binary(min_size=0, max_size=300), unique=True, max_size=200).map(sorted)


@settings(max_examples=150, deadline=None)
@given(keys, st.data(), st.sampled_from([1, 3, 16, 100]))
def test_bulk_equals_entry_by_entry(ks, data, interval):
    values = data.draw(st.lists(st.binary(max_size=300), min_size=len(ks), max_size=len(ks)))
    raw = _build(list(zip(ks, values)), interval)
    assert _bulk(raw) == _slow(raw) == ([name_of(k) for k in ks], values)


def test_tf_layout_takes_the_bulk_path_and_other_layouts_fall_back():
    entries = [(f"model/layer_{i:04d}/kernel".encode(), bytes([8, 1, 18, 0]) * 3) for i in range(3000)]
    for interval, bulk in ((16, True), (1, True), (200, False)):  # a group of 200 entries: entry by entry
        raw = _build(entries, interval, block_size=32768)
        used = []
        assert _bulk(raw, used) == _slow(raw)
        assert used == [bulk]


def test_names_not_ascii_and_not_utf8_decode_as_name_of():
    ks = sorted([b"caf\xc3\xa9/w", b"bad\xff\xfe", b"a\nb", b"\x00slice\x01", b"z" * 200, "名前/v".encode()])
    raw = _build([(k, b"v" * 130) for k in ks])
    assert _bulk(raw) == _slow(raw)
    assert _bulk(raw)[0] == [name_of(k) for k in ks]


def _data_blocks(raw):
    t = TableReader(raw, "t")
    return list(t.block_handles())


def _with_crc_fixed(raw, handle):
    end = handle.offset + handle.size
    crc = mask_crc(crc32c(b"\0", crc32c(raw[handle.offset:end])))
    raw[end:end + 5] = struct.pack("<BI", 0, crc)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_blocks_fail_as_the_entry_by_entry_scan_does(data):
    """A block whose bytes changed (its CRC made to match: the damage reaches the parser)
    gives the same entries or the same error either way."""
    ks = sorted({f"m/v{i}/{'k' * (i % 7)}".encode() for i in range(120)})
    raw = bytearray(_build([(k, bytes([8, 1, 18, 2, 18, 0])) for k in ks], block_size=1024))
    handles = _data_blocks(bytes(raw))
    h = data.draw(st.sampled_from(handles))
    for _ in range(data.draw(st.integers(1, 4))):
        at = h.offset + data.draw(st.integers(0, h.size - 1))
        raw[at] = data.draw(st.integers(0, 255))
    _with_crc_fixed(raw, h)
    assert _bulk(bytes(raw)) == _slow(bytes(raw))


def test_a_bad_crc_is_still_caught():
    raw = bytearray(_build([(b"a%03d" % i, b"x") for i in range(100)]))
    raw[10] ^= 1
    with pytest.raises(CkptError, match="checksum"):
        TableReader(bytes(raw), "t").entries()


heads = st.one_of(
    st.builds(lambda d, dims: bytes([8, d, 18, len(dims)]) + dims + b"\x18\x00\x20\x05\x28\x10",
              st.integers(1, 30), st.binary(max_size=20)),
    st.binary(max_size=12))


@settings(max_examples=200, deadline=None)
@given(st.lists(heads, min_size=1, max_size=60))
def test_group_heads_groups_as_a_dict_of_bytes(values):
    buf = b"".join(values) + b"\0" * 80  # the footer of a real table follows its entries
    starts, ends, pos = [], [], 0
    for v in values:
        starts.append(pos)
        pos += len(v)
        ends.append(pos)
    from array import array

    got = bundle_heads.group_heads(buf, array("q", starts), array("q", ends))
    if got is None:
        return  # a head the bulk path does not take (too long): listing groups it entry by entry
    group, hs = got
    want_ids, want_heads = bundle_heads.group_values(values)  # a dict of each entry's head bytes
    assert [hs[g] for g in group.tolist()] == [want_heads[i] for i in want_ids]
    assert len(hs) == len(want_heads)
    assert want_heads[want_ids[0]] == (values[0][:4 + values[0][3]] if values[0][:1] == b"\x08"
                                       and len(values[0]) > 3 and values[0][2] == 18 and values[0][1] < 128
                                       and values[0][3] < 128 else values[0])


def test_picked_and_members():
    group = np.array([2, 0, 2, 1])
    assert bundle_heads.picked(["a", (1, 2), ()], group) == [(), "a", (), (1, 2)]
    assert bundle_heads.picked(["a", "b"], [1, 0]) == ["b", "a"]
    assert bundle_heads.members(group, {2}) == [0, 2] and bundle_heads.members([2, 0, 2], {0}) == [1]

