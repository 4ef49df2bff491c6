"""parse_entry's fast path (hand-decoded tail, cached dtype + shape) against
protobuf's full parse: the same Entry, or the same error, for any bytes."""

from __future__ import annotations

import glob
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.format.coding import encode_varint
from ckptool.format.table import TableReader

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | wire) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _field(number, 0, encode_varint(value & (1 << 64) - 1))


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _field(number, 2, encode_varint(len(payload)) + payload)


def _shape(dims, unknown_rank=False) -> bytes:
    out = b"".join(_bytes_field(2, _varint_field(1, d)) for d in dims)
    return out + (_varint_field(3, 1) if unknown_rank else b"")


def _outcome(parse, key, value):
    try:
        return parse(key, value, "x.index")
    except CkptError as exc:
        return type(exc), str(exc)


ints = st.one_of(st.integers(0, 300), st.integers(0, 1 << 40), st.integers(-(1 << 63), (1 << 63) - 1))
dims = st.lists(st.one_of(st.integers(0, 9), st.integers(-3, 1 << 40)), max_size=4)


@st.composite
def entries(draw):
    """Serialized entries: TF's layout mostly, then repeated, reordered, unknown or
    truncated fields, slices and out-of-range values."""
    dtype = draw(st.sampled_from([1, 2, 3, 9, 7, 14, 19, 21, 0, 30, 101, 127, 200]))
    shape = draw(dims)
    fields = [_varint_field(1, dtype), _bytes_field(2, _shape(shape, draw(st.booleans()) and draw(st.booleans())))]
    for number in (3, 4):
        if draw(st.booleans()):
            fields.append(_varint_field(number, draw(ints)))
    itemsize = {1: 4, 2: 8, 3: 4, 9: 8, 14: 2, 19: 2}.get(dtype)
    if itemsize and min(shape, default=0) >= 0 and draw(st.integers(0, 4)):
        numel = 1
        for d in shape:
            numel *= d
        fields.append(_varint_field(5, numel * itemsize))  # a consistent size: the entry is valid
    elif draw(st.booleans()):
        fields.append(_varint_field(5, draw(ints)))
    if draw(st.booleans()):
        fields.append(_field(6, 5, draw(st.binary(min_size=4, max_size=4))))
    if draw(st.integers(0, 4)) == 0:
        extent = _varint_field(1, draw(ints)) + _varint_field(2, draw(ints))
        fields.append(_bytes_field(7, _bytes_field(1, extent)))
    if draw(st.integers(0, 3)) == 0:
        extra = draw(st.sampled_from([
            _varint_field(1, 2), _bytes_field(2, _shape([3])), _bytes_field(2, _shape([], True)),
            _bytes_field(2, b""), _varint_field(4, 8), _varint_field(9, 1), _bytes_field(15, b"zz"),
        ]))
        fields.insert(draw(st.integers(0, len(fields))), extra)
    if draw(st.integers(0, 5)) == 0:
        fields = draw(st.permutations(fields))
    value = b"".join(fields)
    if draw(st.integers(0, 6)) == 0:
        value = value[:draw(st.integers(0, len(value)))]
    return value


@settings(max_examples=600, deadline=None)
@given(entries())
def test_fast_path_agrees_with_protobuf(value):
    bundle._HEADS.clear()
    want = _outcome(bundle.parse_entry_proto, b"k", value)
    assert _outcome(bundle.parse_entry, b"k", value) == want  # cold: the head is parsed here
    assert _outcome(bundle.parse_entry, b"k", value) == want  # warm: the head is looked up


@given(st.binary(max_size=40))
def test_fast_path_agrees_on_arbitrary_bytes(value):
    value = b"\x08\x01\x12" + value  # a head-like start, so the fast path is tried
    want = _outcome(bundle.parse_entry_proto, b"k", value)
    assert _outcome(bundle.parse_entry, b"k", value) == want
    assert _outcome(bundle.parse_entry, b"k", value) == want


def _fixture_entries():
    for index in sorted(glob.glob(os.path.join(DATA, "**", "*.index"), recursive=True)):
        with open(index, "rb") as f:
            raw = f.read()
        try:
            rows = list(TableReader(raw, index))[1:]
        except CkptError:
            continue  # deliberately broken fixtures
        yield from ((index, k, v) for k, v in rows)


def test_fast_path_taken_for_what_tf_writes():
    """Every unsliced entry TF wrote takes the fast path (or the speed is gone), and
    gives what protobuf gives."""
    fast = 0
    for index, key, value in _fixture_entries():
        want = _outcome(bundle.parse_entry_proto, key, value)
        assert _outcome(bundle.parse_entry, key, value) == want, (index, key)
        if not isinstance(want, tuple) and not want.slices:
            head = bundle._entry_head(value)
            assert head is not None and bundle._entry_tail(value, len(head)) is not None, (index, key)
            fast += 1
    assert fast > 500


@pytest.mark.parametrize("value", [
    _varint_field(1, 1) + _bytes_field(2, _shape([2])) + _varint_field(5, 8) + _varint_field(5, 4),
    _varint_field(1, 1) + _bytes_field(2, _shape([2])) + _varint_field(3, (1 << 32) + 1) + _varint_field(5, 8),
    _varint_field(1, 1) + _bytes_field(2, _shape([2])) + _varint_field(4, -5) + _varint_field(5, 8),
    _varint_field(1, 1) + _bytes_field(2, _shape([2])) + _varint_field(5, 8) + _bytes_field(2, _shape([2])),
])
def test_layouts_protobuf_merges(value):
    """Repeated fields (last wins, messages merge) and int32 wrap-around are protobuf's."""
    bundle._HEADS.clear()
    want = _outcome(bundle.parse_entry_proto, b"k", value)
    assert _outcome(bundle.parse_entry, b"k", value) == want
    assert _outcome(bundle.parse_entry, b"k", value) == want
