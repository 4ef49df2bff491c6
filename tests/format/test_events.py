"""ckptool.format.events: TFRecord framing and scalars, against event files TensorFlow wrote
(tests/data/events, made by tests/tf_fixtures/generate_events.py), and their damage."""

import json
import pathlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.format import events as E
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.protos.event_pb2 import Event, ScalarTensor

EVENTS = pathlib.Path(__file__).parents[1] / "data" / "events"
FILES = sorted(p for p in EVENTS.rglob("events.out.tfevents.*"))


def expected_rows(path):
    run = path.relative_to(EVENTS).parts[0]
    doc = json.loads((EVENTS / run / "expected.json").read_text())
    return doc["files"][str(path.relative_to(EVENTS / run))]


def rows(found):
    return [[s.tag, s.step, s.value, s.wall_time] for s in found]


def test_fixtures_exist():
    assert {p.relative_to(EVENTS).parts[0] for p in FILES} == {"tf1", "tf2"}
    assert len(FILES) == 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(EVENTS)))
def test_scalars_are_what_tensorflow_reads(path):
    found, problems = E.scalars(path.read_bytes(), str(path))
    assert problems == []
    assert rows(found) == expected_rows(path)
    assert found, "every fixture file holds scalars"


def test_tf2_tensor_summaries_float32_and_float64():
    path = next(p for p in FILES if "tf2" in p.parts and "eval" in p.parts)
    found, _ = E.scalars(path.read_bytes())
    acc = {s.step: s.value for s in found if s.tag == "accuracy"}
    loss = {s.step: s.value for s in found if s.tag == "loss"}
    assert acc[900] == 0.8  # float64 kept exactly
    assert loss[300] == struct.unpack("<f", struct.pack("<f", 0.4))[0]  # float32
    assert "weights" not in {s.tag for s in found} and "note" not in {s.tag for s in found}


def test_record_round_trip():
    payloads = [b"", b"x", bytes(range(256)) * 5]
    data = b"".join(E.encode_record(p) for p in payloads)
    records, problem = E.read_records(data)
    assert problem is None
    assert [bytes(r) for r in records] == payloads


def test_record_matches_tensorflow_framing():
    data = FILES[0].read_bytes()
    records, problem = E.read_records(data)
    assert problem is None
    assert b"".join(E.encode_record(bytes(r)) for r in records) == data


@pytest.mark.parametrize("path", FILES[:2], ids=lambda p: p.name)
def test_every_truncation_keeps_a_prefix(path):
    data = path.read_bytes()
    full, _ = E.scalars(data)
    records, _ = E.read_records(data)
    boundaries = {0}
    pos = 0
    for r in records:
        pos += len(r) + 16
        boundaries.add(pos)
    for n in range(len(data)):
        found, problems = E.scalars(data[:n], "f")
        assert found == full[:len(found)]
        assert bool(problems) == (n not in boundaries), n
        if problems:
            assert problems[-1].startswith("f: truncated")


@pytest.mark.parametrize("path", FILES[:2], ids=lambda p: p.name)
def test_every_byte_flip_is_detected(path):
    data = path.read_bytes()
    full, _ = E.scalars(data)
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x5A
        found, problems = E.scalars(bytes(bad), "f")
        assert problems, f"flip at {i} not detected"
        assert found == full[:len(found)]


def test_valid_framing_bad_proto_is_skipped_and_counted():
    good = Event(step=5, wall_time=1.0)
    good.summary.value.add(tag="loss", simple_value=2.5)
    data = E.encode_record(b"\xff\xff\xff\xff") + E.encode_record(good.SerializeToString()) + \
        E.encode_record(b"\x0a\x05\x08")  # a field whose length runs past the end
    found, problems = E.scalars(data, "f")
    assert rows(found) == [["loss", 5, 2.5, 1.0]]
    assert len(problems) == 1 and "2 record(s)" in problems[0] and "first: record 0" in problems[0]


def test_impossible_length_and_bad_length_crc():
    length = struct.pack("<Q", 1 << 40)
    data = length + struct.pack("<I", mask_crc(crc32c(length))) + b"\0" * 20
    assert "impossible record length" in E.read_records(data, "f")[1]
    data = struct.pack("<Q", 3) + b"\0\0\0\0" + b"abc" + b"\0\0\0\0"
    assert "bad CRC of the record length" in E.read_records(data, "f")[1]


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    found, problems = E.scalars(data, "f")
    assert isinstance(found, list) and isinstance(problems, list)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_payloads_in_valid_framing_never_raise(payload):
    found, _problems = E.scalars(E.encode_record(payload), "f")
    for s in found:
        assert isinstance(s.value, float)


def _tensor(dtype, shape=(), **kw):
    t = ScalarTensor(dtype=dtype, **kw)
    for d in shape:
        t.tensor_shape.dim.add(size=d)
    return t


@pytest.mark.parametrize("tensor,value", [
    (_tensor(1, tensor_content=struct.pack("<f", 1.5)), 1.5),
    (_tensor(1, float_val=[2.5]), 2.5),
    (_tensor(2, double_val=[0.1]), 0.1),
    (_tensor(2, (1,), tensor_content=struct.pack("<d", 0.1)), 0.1),
    (_tensor(3, int_val=[-7]), -7.0),
    (_tensor(9, int64_val=[1 << 40]), float(1 << 40)),
    (_tensor(10, bool_val=[True]), 1.0),
    (_tensor(19, half_val=[0x3C00]), 1.0),  # float16 1.0
    (_tensor(19, tensor_content=struct.pack("<e", -2.0)), -2.0),
    (_tensor(14, half_val=[0x3FC0]), 1.5),  # bfloat16 1.5
    (_tensor(23, uint64_val=[5]), 5.0),
])
def test_tensor_scalar_dtypes(tensor, value):
    assert E.tensor_scalar(tensor) == value


@pytest.mark.parametrize("tensor", [
    _tensor(1, (2,), float_val=[1.0, 2.0]),
    _tensor(7, tensor_content=b"abcd"),
    _tensor(1, tensor_content=b"\0\0"),
    _tensor(1),
    _tensor(1, (0,)),
    _tensor(99, float_val=[1.0]),
], ids=["vector", "string", "short-content", "no-value", "empty", "unknown-dtype"])
def test_tensor_not_a_scalar(tensor):
    assert E.tensor_scalar(tensor) is None


def test_nan_is_no_value():
    e = Event(step=1)
    e.summary.value.add(tag="loss", simple_value=float("nan"))
    e.summary.value.add(tag="acc", simple_value=float("inf"))
    assert rows(E.event_scalars(e)) == [["acc", 1, float("inf"), 0.0]]


@pytest.mark.parametrize("payload", [
    b"\x0b" * 100000,  # 100000 nested groups
    b"\x2a" + b"\xff\xff\xff\xff\x0f",  # a summary longer than the record
    b"\x2a\x05\x0a\x03\x0a\x01\xff",  # a tag that is not UTF-8
    b"\x2a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # an 11-byte varint length
    b"\x10" + b"\xff" * 10,  # a bad step varint
], ids=["deep-groups", "overlong", "bad-utf8", "long-varint", "bad-step"])
def test_hostile_event_protos_are_skipped(payload):
    good = Event(step=1)
    good.summary.value.add(tag="t", simple_value=1.0)
    found, problems = E.scalars(E.encode_record(payload) + E.encode_record(good.SerializeToString()), "f")
    assert rows(found) == [["t", 1, 1.0, 0.0]]
    assert problems == ["f: 1 record(s) that are not valid Event protos skipped (first: record 0)"]


@settings(max_examples=60)
@given(st.sampled_from(FILES), st.integers(1, 400), st.integers(0, 64))
def test_chunked_reading_is_the_same(path, chunk, cut):
    data = path.read_bytes()
    data = data[:len(data) - cut]
    reads = []

    def read(a, n):
        reads.append(n)
        assert 0 <= a and a + n <= len(data)
        return data[a:a + n]

    reader = E.RecordReader(read, len(data), "f", chunk=chunk)
    assert [bytes(r) for r in reader] == [bytes(r) for r in E.read_records(data, "f")[0]]
    assert reader.problem == E.read_records(data, "f")[1]
    biggest = max((len(r) + 4 for r in E.read_records(data)[0]), default=0)
    assert max(reads, default=0) <= max(chunk, biggest)  # never the whole file at once
