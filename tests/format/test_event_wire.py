"""format.event_wire against the protobuf runtime: the same scalars, the same records rejected."""

import pathlib
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.format import event_wire
from ckptool.format import events as E
from ckptool.format.event_wire import record_scalars
from ckptool.format.protos.event_pb2 import Event

EVENTS = pathlib.Path(__file__).parents[1] / "data" / "events"
FILES = sorted(p for p in EVENTS.rglob("events.out.tfevents.*"))


def _runtime(payload):
    e = E.parse_event(payload)
    return None if e is None else [(s.tag, s.step, s.value, s.wall_time) for s in E.event_scalars(e)]


def _wire(payload):
    found = record_scalars(payload)
    return None if found is None else list(found)


def _wire_streamed(payload):
    """As a large record is read: validated first, then its scalars yielded one at a time."""
    small, event_wire.SMALL_RECORD = event_wire.SMALL_RECORD, 0
    try:
        return _wire(payload)
    finally:
        event_wire.SMALL_RECORD = small


def _same(payload):
    a, b, c = _runtime(payload), _wire(payload), _wire_streamed(payload)
    assert repr(a) == repr(b) == repr(c), (bytes(payload)[:200], a, b, c)  # repr: -0.0 and 0.0 differ


def test_every_record_tensorflow_wrote():
    n = 0
    for p in FILES:
        records, _ = E.read_records(p.read_bytes())
        for r in records:
            _same(r)
            n += 1
    assert n > 50


DTYPES = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 14, 17, 19, 22, 23, 99, -1])
INTS = st.integers(-(2**63), 2**64 - 1)


@st.composite
def tensors(draw):
    t = {"dtype": draw(DTYPES)}
    if draw(st.booleans()):
        t["shape"] = draw(st.lists(st.integers(-2, 3), max_size=3))
    if draw(st.booleans()):
        t["unknown_rank"] = draw(st.booleans())
    if draw(st.booleans()):
        t["content"] = draw(st.binary(max_size=9))
    field = draw(st.sampled_from(["half_val", "float_val", "double_val", "int_val", "int64_val", "bool_val",
                                  "uint32_val", "uint64_val"]))
    n = draw(st.integers(0, 2))
    if field in ("float_val", "double_val"):
        vals = draw(st.lists(st.floats(width=32 if field == "float_val" else 64), min_size=n, max_size=n))
    elif field == "bool_val":
        vals = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    else:
        lo, hi = {"half_val": (-(2**31), 2**31 - 1), "int_val": (-(2**31), 2**31 - 1),
                  "int64_val": (-(2**63), 2**63 - 1), "uint32_val": (0, 2**32 - 1), "uint64_val": (0, 2**64 - 1)}[field]
        vals = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    t[field] = vals
    return t


def _fill(v, spec):
    tensor = v.tensor
    tensor.dtype = spec["dtype"]
    for d in spec.get("shape", ()):
        tensor.tensor_shape.dim.add(size=d)
    if "unknown_rank" in spec:
        tensor.tensor_shape.unknown_rank = spec["unknown_rank"]
    if "content" in spec:
        tensor.tensor_content = spec["content"]
    for k, vals in spec.items():
        if k.endswith("_val"):
            getattr(tensor, k).extend(vals)


@st.composite
def events(draw):
    e = Event(step=draw(st.integers(-(2**63), 2**63 - 1)), wall_time=draw(st.floats()))
    if draw(st.integers(0, 5)) == 0:
        e.file_version = draw(st.text(max_size=5))
    else:
        e.summary.SetInParent()
        for _ in range(draw(st.integers(0, 3))):
            v = e.summary.value.add(tag=draw(st.text(max_size=6)))
            if draw(st.booleans()):
                v.simple_value = draw(st.floats(width=32))
            else:
                _fill(v, draw(tensors()))
            if draw(st.booleans()):
                v.metadata.plugin_data.plugin_name = draw(st.sampled_from(["scalars", "", "é"]))
    return e.SerializeToString()


@settings(max_examples=200, deadline=None)
@given(st.lists(events(), min_size=1, max_size=3))
def test_structured_events_and_their_merges(parts):
    _same(b"".join(parts))  # concatenated messages merge: oneofs switch, repeated fields concatenate


@settings(max_examples=300, deadline=None)
@given(events(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("fid")), max_size=3))
def test_mutated_events(payload, edits):
    data = bytearray(payload)
    for pos, byte, how in edits:
        if not data:
            break
        i = pos % len(data)
        if how == "f":
            data[i] = byte
        elif how == "i":
            data.insert(i, byte)
        else:
            del data[i]
    _same(bytes(data))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes(data):
    _same(data)


def test_unpacked_and_packed_fields_and_groups():
    def key(num, wire):
        return bytes([num << 3 | wire]) if num < 16 else bytes([(num << 3 | wire) & 0x7F | 0x80, (num << 3 | wire) >> 7])

    def ld(num, body):
        return key(num, 2) + bytes([len(body)]) + body

    one = key(1, 0) + b"\x01"  # dtype float
    cases = [
        ld(5, ld(1, ld(1, b"t") + ld(8, one + key(5, 5) + struct.pack("<f", 2.5)))),  # unpacked float_val
        ld(5, ld(1, ld(1, b"t") + ld(8, one + key(5, 5) + struct.pack("<f", 2.5) * 2))),  # two: no scalar
        ld(5, ld(1, ld(1, b"t") + ld(8, key(1, 0) + b"\x03" + ld(7, b"\x85\x01")))),  # packed int_val 133
        ld(5, ld(1, ld(1, b"t") + key(2, 5) + struct.pack("<f", 1.0) + key(3, 3) + key(3, 4))),  # a group
        ld(5, ld(1, ld(1, b"t") + key(2, 5) + struct.pack("<f", 1.0) + key(3, 3))),  # an open group
        ld(5, ld(1, ld(1, b"t") + key(2, 0) + b"\x01")),  # simple_value as a varint: unknown
        ld(5, ld(1, ld(1, b"t") + key(2, 5) + struct.pack("<f", 1.0))) + ld(4, b"g"),  # oneof: graph_def last
        ld(5, ld(1, ld(1, b"t") + ld(8, key(1, 0) + b"\x03" + ld(7, b"\x85")))),  # packed varint cut short
    ]
    for c in cases:
        _same(c)
