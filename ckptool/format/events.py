"""TensorBoard event files: TFRecord framing and the scalars their summaries hold.

A TFRecord file (tensorflow/core/lib/io/record_writer.cc) is a sequence of

    uint64 length | uint32 masked_crc32c(length) | data[length] | uint32 masked_crc32c(data)

little-endian. In an event file (``events.out.tfevents.*``) each record's data
is an ``Event`` proto (ckptool/format/protos/event.proto). A scalar is either a
TF1 ``Summary.Value.simple_value`` or a TF2 ``tf.summary.scalar`` tensor summary
(a one-element numeric ``TensorProto``).

Pure: bytes in, values out. Nothing here raises on hostile input: the records
before the first damaged one are returned, with a message that says what is
wrong and where.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ckptool.format import dtypes
from ckptool.format.coding import FIXED32, FIXED64, crc32c, mask_crc
from ckptool.format.event_wire import SCALAR_DTYPES

if TYPE_CHECKING:
    from typing_extensions import Buffer

HEADER_BYTES = 12  # length (8) + its masked CRC (4)
FOOTER_BYTES = 4
#: A record longer than this is damage, not data (TensorBoard's largest are graphs, MBs).
MAX_RECORD = 1 << 31
CHUNK = 1 << 20  # bytes read at a time

_HALF, _BFLOAT16 = dtypes.BY_NAME["float16"].value, dtypes.BY_NAME["bfloat16"].value


@dataclass(frozen=True)
class Scalar:
    """One scalar of an event file: its tag, the event's step and wall time, the value."""

    tag: str
    step: int
    value: float
    wall_time: float


def encode_record(data: bytes) -> bytes:
    """One TFRecord: ``data`` framed with its length and both masked CRCs."""
    length = FIXED64.pack(len(data))
    return (length + FIXED32.pack(mask_crc(crc32c(length))) + bytes(data)
            + FIXED32.pack(mask_crc(crc32c(data))))


class RecordReader:
    """Iterate over the records of a TFRecord file, CRCs checked, reading it in chunks.

    ``read(offset, n)`` returns ``n`` bytes from ``offset`` (the file is ``size`` bytes
    long), so a large event file is never held in memory at once. Iteration yields each
    record's data up to the first damaged record; then :attr:`problem` is None when the
    whole file was read, else a one-line message naming ``where`` and the offset (a
    truncated record, a bad CRC, an impossible length). :attr:`count` is the records read.
    """

    def __init__(self, read: Callable[[int, int], Buffer], size: int, where: str = "<bytes>", chunk: int = CHUNK):
        self._read, self.size, self.where, self._chunk = read, size, where, chunk
        self._buf, self._start = memoryview(b""), 0
        self.problem: str | None = None
        self.count = 0

    def _get(self, a: int, b: int) -> memoryview:
        """Bytes [a, b) of the file (b <= size)."""
        if self._start <= a and b <= self._start + len(self._buf):
            return self._buf[a - self._start:b - self._start]
        if b - a > self._chunk:
            return memoryview(self._read(a, b - a)).cast("B")
        self._buf, self._start = memoryview(self._read(a, min(self._chunk, self.size - a))).cast("B"), a
        return self._buf[:b - a]

    def __iter__(self) -> Iterator[memoryview]:
        pos, end, where = 0, self.size, self.where
        while pos < end:
            if end - pos < HEADER_BYTES:
                self.problem = f"{where}: truncated record header at offset {pos} ({end - pos} of {HEADER_BYTES} bytes)"
                return
            head = self._get(pos, pos + HEADER_BYTES)
            (length,) = FIXED64.unpack_from(head, 0)
            (length_crc,) = FIXED32.unpack_from(head, 8)
            if mask_crc(crc32c(head[:8])) != length_crc:
                self.problem = f"{where}: bad CRC of the record length at offset {pos}"
                return
            if length > MAX_RECORD:
                self.problem = f"{where}: impossible record length {length} at offset {pos}"
                return
            body = pos + HEADER_BYTES
            if end - body < length + FOOTER_BYTES:
                self.problem = (f"{where}: truncated record at offset {pos} (needs "
                                f"{length + HEADER_BYTES + FOOTER_BYTES} bytes, {end - pos} left)")
                return
            framed = self._get(body, body + length + FOOTER_BYTES)
            payload = framed[:length]
            (data_crc,) = FIXED32.unpack_from(framed, length)
            if mask_crc(crc32c(payload)) != data_crc:
                self.problem = f"{where}: bad CRC of the record data at offset {pos}"
                return
            self.count += 1
            yield payload
            pos = body + length + FOOTER_BYTES


def _memory_reader(data: Buffer, where: str) -> RecordReader:
    view = memoryview(data).cast("B")
    reader = RecordReader(lambda a, n: view[a:a + n], len(view), where, chunk=len(view) + 1)
    return reader


def read_records(data: Buffer, where: str = "<bytes>") -> tuple[list[memoryview], str | None]:
    """The records of a TFRecord file's bytes (see :class:`RecordReader`) and what stopped the reading."""
    reader = _memory_reader(data, where)
    records = list(reader)
    return records, reader.problem


def parse_event(payload: Buffer) -> Any:
    """An ``Event`` proto from a record's bytes, or None when they are no valid Event (the
    protobuf runtime's reading: the reference :mod:`ckptool.format.event_wire` is tested against;
    ckptool itself reads records with the latter)."""
    from ckptool.format.protos.event_pb2 import Event

    event = Event()
    try:
        event.ParseFromString(bytes(payload))
    except Exception:  # noqa: BLE001 - DecodeError from upb; the pure-Python runtime raises others
        return None
    return event


def tensor_scalar(tensor: Any) -> float | None:
    """The value of a one-element numeric ``TensorProto`` (``tf.summary.scalar``), else None."""
    spec = SCALAR_DTYPES.get(tensor.dtype)
    if spec is None or tensor.tensor_shape.unknown_rank:
        return None
    count = 1
    for d in tensor.tensor_shape.dim:
        count *= d.size
    if count != 1:
        return None
    fmt, field = spec
    if tensor.tensor_content:
        if len(tensor.tensor_content) != struct.calcsize(fmt):
            return None
        (value,) = struct.unpack(fmt, tensor.tensor_content)
    else:
        values = getattr(tensor, field)
        if len(values) != 1:
            return None
        value = values[0]
        if tensor.dtype == _HALF:
            (value,) = struct.unpack("<e", struct.pack("<H", value & 0xFFFF))
    if tensor.dtype == _BFLOAT16:
        (value,) = struct.unpack("<f", struct.pack("<I", (int(value) & 0xFFFF) << 16))
    return float(value)


def event_scalars(event: Any) -> list[Scalar]:
    """The scalars of one Event (none when it holds no summary)."""
    if event.WhichOneof("what") != "summary":
        return []
    out = []
    for v in event.summary.value:
        kind = v.WhichOneof("value")
        value: float | None = None
        if kind == "simple_value":
            value = float(v.simple_value)
        elif kind == "tensor":
            value = tensor_scalar(v.tensor)
        if value is None:
            continue
        if math.isnan(value):
            continue  # no order: never the best, never a value
        out.append(Scalar(v.tag, int(event.step), value, float(event.wall_time)))
    return out


def scalars(data: Buffer, where: str = "<bytes>") -> tuple[list[Scalar], list[str]]:
    """Every scalar of an event file's bytes, in file order, and the problems met."""
    return reader_scalars(_memory_reader(data, where))


def reader_scalars(reader: RecordReader) -> tuple[list[Scalar], list[str]]:
    """Every scalar of the records ``reader`` yields, in file order, and the problems met
    (see :func:`iter_scalars`)."""
    problems: list[str] = []
    found = list(iter_scalars(reader, problems))
    return found, problems


def iter_scalars(reader: RecordReader, problems: list[str]) -> Iterator[Scalar]:
    """The scalars of the records ``reader`` yields, one at a time, in file order; what went
    wrong is appended to ``problems`` once the iteration ends.

    Each record is read from its wire bytes (:func:`ckptool.format.event_wire.record_scalars`),
    never parsed into message objects: memory is a small multiple of the largest record,
    whatever it holds. A record that is no valid Event is skipped (and counted in one
    message); the framing's first damage ends the reading (the records before it are kept).
    """
    from ckptool.format.event_wire import record_scalars

    bad = []
    for i, payload in enumerate(reader):
        found = record_scalars(payload)
        if found is None:
            bad.append(i)
            continue
        for tag, step, value, wall_time in found:
            yield Scalar(tag, step, value, wall_time)
    if bad:
        problems.append(f"{reader.where}: {len(bad)} record(s) that are not valid Event protos skipped "
                        f"(first: record {bad[0]})")
    if reader.problem:
        problems.append(f"{reader.problem}; the rest of the file skipped ({reader.count} records read)")


__all__ = ["RecordReader", "Scalar", "encode_record", "event_scalars", "iter_scalars", "parse_event", "read_records",
           "reader_scalars", "scalars", "tensor_scalar"]
