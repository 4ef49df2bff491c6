"""The scalars of one ``Event`` record, read straight from its protobuf wire bytes.

Parsing a record with the protobuf runtime costs memory in proportion to what it
holds, not to its size: a 20 MB record of a million small summary values, or of a
packed ``int_val`` of ten million one-byte varints, becomes hundreds of MB of
message objects. This walker reads only the fields of ``format/protos/event.proto``
(the ``Event`` -> ``Summary`` -> ``Value`` -> ``ScalarTensor`` path), keeps slices of
the record (memoryviews, no copies) and decodes at most the first element of a
repeated field: memory stays a small multiple of one record (a copy at most, where
a string is checked for UTF-8 or a packed varint field counted).

It accepts and rejects what the protobuf runtime does for that schema, so that
``record_scalars(r)`` equals ``event_scalars(parse_event(r))`` (tests check it
against the runtime): proto3 strings must be UTF-8; a known field with another wire
type is an unknown field; unknown fields (groups included, nested at most
:data:`MAX_DEPTH`) are skipped; a oneof keeps its last member, and a member
repeated merges (a singular message merges, repeated fields concatenate).
Pure: bytes in, values out.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ckptool.format import dtypes
from ckptool.format.tensor_proto import FIELD_NUMBERS

if TYPE_CHECKING:
    from typing_extensions import Buffer

#: A record up to this size has its scalars listed in one reading; a larger one is read twice
#: (validated, then its scalars yielded one at a time), so memory stays a multiple of the record.
SMALL_RECORD = 1 << 16
MAX_DEPTH = 100  # nested groups in an unknown field: the runtime's recursion limit
_HALF, _BFLOAT16 = dtypes.BY_NAME["float16"].value, dtypes.BY_NAME["bfloat16"].value
#: ScalarTensor's repeated numeric fields: number (:data:`ckptool.format.tensor_proto.FIELD_NUMBERS`)
#: -> (wire type unpacked, width or 0 for varints)
_TYPED = {FIELD_NUMBERS[name]: spec for name, spec in (
    ("half_val", (0, 0)), ("float_val", (5, 4)), ("double_val", (1, 8)), ("int_val", (0, 0)), ("int64_val", (0, 0)),
    ("bool_val", (0, 0)), ("uint32_val", (0, 0)), ("uint64_val", (0, 0)))}
#: The numeric dtypes a scalar summary may have: dtype enum -> (struct format of one element in
#: tensor_content, the typed TensorProto field TF fills)
SCALAR_DTYPES = {dtypes.BY_NAME[name].value: (fmt, dtypes.PROTO_FIELDS[name]) for name, fmt in (
    ("float32", "<f"), ("float64", "<d"), ("int32", "<i"), ("uint8", "<B"), ("int16", "<h"), ("int8", "<b"),
    ("int64", "<q"), ("bool", "<?"), ("uint16", "<H"), ("float16", "<e"), ("bfloat16", "<H"), ("uint32", "<I"),
    ("uint64", "<Q"))}
_LONG_VARINT = re.compile(rb"[\x80-\xff]{10}")
_HIGH = bytes(range(0x80, 0x100))


class _Invalid(Exception):
    """The record is no valid Event (internal: callers get None)."""


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    stop = min(end, pos + 10)
    while pos < stop:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise _Invalid


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _fields(buf: memoryview, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """``(number, wire, a, b)`` per field of the message ``buf[pos:end]``: ``a`` is the varint's
    value for wire type 0, else ``buf[a:b]`` holds the field's bytes. Groups are skipped."""
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:  # the one-byte tag of every field of the schema: no call
            pos += 1
        else:
            tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0 or tag > 0xFFFFFFFF:
            raise _Invalid
        if wire == 2:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, pos = _varint(buf, pos, end)
            if n > end - pos:
                raise _Invalid
            yield number, 2, pos, pos + n
            pos += n
        elif wire == 0:
            v, pos = _varint(buf, pos, end)
            yield number, 0, v, pos
        elif wire == 1 or wire == 5:
            n = 8 if wire == 1 else 4
            if pos + n > end:
                raise _Invalid
            yield number, wire, pos, pos + n
            pos += n
        elif wire == 3:
            pos = _skip_group(buf, pos, end, number)
        else:  # an end-group tag outside a group, or wire types 6 and 7
            raise _Invalid


def _skip_group(buf: memoryview, pos: int, end: int, number: int) -> int:
    """The position after the end-group tag that closes group ``number`` (nested groups too)."""
    open_groups = [number]
    while pos < end:
        tag, pos = _varint(buf, pos, end)
        num, wire = tag >> 3, tag & 7
        if num == 0 or tag > 0xFFFFFFFF:
            raise _Invalid
        if wire == 0:
            _, pos = _varint(buf, pos, end)
        elif wire == 1 or wire == 5:
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            n, pos = _varint(buf, pos, end)
            pos += n
        elif wire == 3:
            open_groups.append(num)
            if len(open_groups) > MAX_DEPTH:
                raise _Invalid
        elif wire == 4:
            if open_groups.pop() != num:
                raise _Invalid
            if not open_groups:
                return pos
        else:
            raise _Invalid
        if pos > end:
            raise _Invalid
    raise _Invalid


def _utf8(buf: memoryview, a: int, b: int) -> str:
    try:
        return str(buf[a:b], "utf-8")
    except UnicodeDecodeError:
        raise _Invalid from None


class _Tensor:
    """A ScalarTensor as merged so far: enough to say whether it is a one-element scalar."""

    def __init__(self) -> None:
        self.dtype = 0
        self.count = 1  # product of the dims, kept within [-2, 2] (only "is it 1" matters)
        self.unknown_rank = False
        self.content: memoryview | None = None
        self.typed: dict[int, list[Any]] = {}  # field -> [element count, first element (int or bytes)]

    def merge(self, buf: memoryview, a: int, b: int) -> None:
        for num, wire, x, y in _fields(buf, a, b):
            if num == 1 and wire == 0:
                self.dtype = _signed(x, 32)
            elif num == 2 and wire == 2:
                self._shape(buf, x, y)
            elif num == 4 and wire == 2:
                self.content = buf[x:y]
            elif num in _TYPED:
                self._typed(num, wire, buf, x, y)

    def _shape(self, buf: memoryview, a: int, b: int) -> None:
        for num, wire, x, y in _fields(buf, a, b):
            if num == 2 and wire == 2:
                size = 0
                for dn, dw, dx, dy in _fields(buf, x, y):
                    if dn == 1 and dw == 0:
                        size = _signed(dx, 64)
                    elif dn == 2 and dw == 2:
                        _utf8(buf, dx, dy)
                c = self.count * size
                self.count = max(-2, min(2, c)) if c not in (-1, 0, 1) else c
            elif num == 3 and wire == 0:
                self.unknown_rank = x != 0

    def _typed(self, num: int, wire: int, buf: memoryview, a: int, b: int) -> None:
        unpacked, width = _TYPED[num]
        slot = self.typed.setdefault(num, [0, None])
        if wire == unpacked:
            if slot[0] == 0:
                slot[1] = a if wire == 0 else bytes(buf[a:b])
            slot[0] += 1
        elif wire == 2:
            data = buf[a:b]
            if width:
                if len(data) % width:
                    raise _Invalid
                n = len(data) // width
                first: int | bytes | None = bytes(data[:width]) if n else None
            else:
                if len(data) and data[-1] >= 0x80:
                    raise _Invalid
                raw = bytes(data)
                if _LONG_VARINT.search(raw):
                    raise _Invalid
                n = len(raw.translate(None, _HIGH))  # one terminal byte per varint
                first = _varint(data, 0, len(data))[0] if n else None
                del raw
            if slot[0] == 0 and n:
                slot[1] = first
            slot[0] += n
        # another wire type: an unknown field

    def value(self) -> float | None:
        """As :func:`ckptool.format.events.tensor_scalar`: the value of a one-element numeric tensor."""
        spec = SCALAR_DTYPES.get(self.dtype)
        if spec is None or self.unknown_rank or self.count != 1:
            return None
        fmt, field = spec
        if self.content is not None and len(self.content):
            if len(self.content) != struct.calcsize(fmt):
                return None
            (value,) = struct.unpack(fmt, self.content)
        else:
            count, first = self.typed.get(FIELD_NUMBERS[field], (0, None))
            if count != 1 or first is None:
                return None
            if field == "float_val":
                (value,) = struct.unpack("<f", first)
            elif field == "double_val":
                (value,) = struct.unpack("<d", first)
            elif field in ("int_val", "half_val"):
                value = _signed(int(first), 32)
            elif field == "int64_val":
                value = _signed(int(first), 64)
            elif field == "bool_val":
                value = bool(first)
            elif field == "uint32_val":
                value = int(first) & 0xFFFFFFFF
            else:
                value = int(first)
            if self.dtype == _HALF:
                (value,) = struct.unpack("<e", struct.pack("<H", value & 0xFFFF))
        if self.dtype == _BFLOAT16:
            (value,) = struct.unpack("<f", struct.pack("<I", (int(value) & 0xFFFF) << 16))
        return float(value)


def _metadata(buf: memoryview, a: int, b: int) -> None:
    for num, wire, x, y in _fields(buf, a, b):
        if num == 1 and wire == 2:  # PluginData
            for pn, pw, px, py in _fields(buf, x, y):
                if pn == 1 and pw == 2:
                    _utf8(buf, px, py)
        elif num in (2, 3) and wire == 2:
            _utf8(buf, x, y)


def _value(buf: memoryview, a: int, b: int, emit: Callable[[tuple[str, float]], None] | None) -> None:
    tag = ""
    kind = 0  # the oneof: 2 simple_value, 8 tensor
    simple = 0.0
    tensor: _Tensor | None = None
    for num, wire, x, y in _fields(buf, a, b):
        if num == 1 and wire == 2:
            tag = _utf8(buf, x, y)
        elif num == 7 and wire == 2:
            _utf8(buf, x, y)
        elif num == 9 and wire == 2:
            _metadata(buf, x, y)
        elif num == 2 and wire == 5:
            kind, (simple,) = 2, struct.unpack_from("<f", buf, x)
        elif num == 8 and wire == 2:
            if kind != 8 or tensor is None:
                kind, tensor = 8, _Tensor()
            tensor.merge(buf, x, y)
    if emit is None or kind == 0:
        return
    value = float(simple) if kind == 2 else tensor.value() if tensor is not None else None
    if value is not None and value == value:  # NaN: no order, never a value
        emit((tag, value))


def _summary(buf: memoryview, a: int, b: int, emit: Callable[[tuple[str, float]], None] | None) -> None:
    for num, wire, x, y in _fields(buf, a, b):
        if num == 1 and wire == 2:
            _value(buf, x, y, emit)


def record_scalars(payload: Buffer) -> Iterator[tuple[str, int, float, float]] | None:
    """``(tag, step, value, wall_time)`` of each scalar of one Event record, in order (an
    iterator that reads the record a second time, so a record's scalars are never all in
    memory); None when the record is no valid Event."""
    buf = memoryview(payload).cast("B")
    wall, step, what = 0.0, 0, 0
    summaries: list[tuple[int, int]] = []
    small = len(buf) <= SMALL_RECORD  # its scalars are kept from the first reading: no second
    found: list[tuple[str, float]] = []
    collect = found.append if small else None
    try:
        for num, wire, x, y in _fields(buf, 0, len(buf)):
            if num == 1 and wire == 1:
                (wall,) = struct.unpack_from("<d", buf, x)
            elif num == 2 and wire == 0:
                step = _signed(x, 64)
            elif num in (3, 4, 9) and wire == 2:
                if num == 3:
                    _utf8(buf, x, y)
                what, summaries = num, []
                found.clear()
            elif num == 5 and wire == 2:
                if what != 5:
                    what, summaries = 5, []
                    found.clear()
                _summary(buf, x, y, collect)  # validate now: a bad record yields nothing
                summaries.append((x, y))
    except _Invalid:
        return None
    if what != 5:
        return iter(())
    if small:
        return ((tag, step, v, float(wall)) for tag, v in found)
    return _emit_all(buf, summaries, step, float(wall))


def _emit_all(buf: memoryview, summaries: list[tuple[int, int]], step: int,
              wall: float) -> Iterator[tuple[str, int, float, float]]:
    out: list[tuple[str, float]] = []
    for a, b in summaries:
        for num, wire, x, y in _fields(buf, a, b):
            if num == 1 and wire == 2:
                _value(buf, x, y, out.append)
                while out:
                    tag, v = out.pop()
                    yield tag, step, v, wall


__all__ = ["MAX_DEPTH", "record_scalars"]
