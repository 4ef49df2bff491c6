"""Legacy V1 checkpoints (TensorSliceWriter): one table per shard (docs/FORMAT.md §9).

Key ``""`` holds a SavedTensorSlices with only ``meta`` set; every other key
(EncodeTensorNameSlice of a name and a slice) holds a SavedTensorSlices whose
``data`` is a SavedSlice: a name, a slice and a TensorProto with only the
typed repeated field of its dtype set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.format import dtypes, tensor_proto
from ckptool.format.bundle import shape_from_proto, slice_from_proto
from ckptool.format.coding import BytesLike
from ckptool.format.protos.tensor_bundle_pb2 import SavedTensorSlices, TensorProto
from ckptool.format.slices import Slice

V1_CONSUMER = 1

#: The dtypes TF 1's V1 writer never stores, though a TensorProto field could hold them.
_NOT_V1 = frozenset({"bfloat16"})


@dataclass(frozen=True)
class SliceMeta:
    name: str
    dtype: dtypes.DType
    shape: tuple[int, ...]
    slices: tuple[Slice, ...]


def _parse(value: BytesLike, where: str) -> SavedTensorSlices:
    try:
        return SavedTensorSlices.FromString(bytes(value))
    except DecodeError:
        raise CorruptError(f"{where}: unparsable SavedTensorSlices") from None


def parse_meta(value: BytesLike, where: str) -> list[SliceMeta]:
    """The tensors a V1 file declares (its ``""`` entry)."""
    proto = _parse(value, where)
    if not proto.HasField("meta"):
        raise CorruptError(f"{where}: failed to find the saved tensor slices at the beginning of the file")
    versions = proto.meta.versions
    if versions.min_consumer > V1_CONSUMER:
        raise UnsupportedError(f"{where}: V1 checkpoint needs consumer version {versions.min_consumer}")
    out = []
    for t in proto.meta.tensor:
        what = f"{where}: tensor {t.name!r}"
        dt = dtypes.from_value(t.type, what)
        shape = shape_from_proto(t.shape, what)
        out.append(SliceMeta(t.name, dt, shape, tuple(slice_from_proto(s, len(shape), what) for s in t.slice)))
    return out


def parse_slice(value: BytesLike, where: str) -> tuple[str, Any, Any]:
    """(name, slice proto, TensorProto) of a V1 data entry."""
    proto = _parse(value, where)
    if not proto.HasField("data"):
        raise CorruptError(f"{where}: entry holds no tensor data")
    return proto.data.name, proto.data.slice, proto.data.data


def decode_tensor_proto(tp: TensorProto, dtype: dtypes.DType, shape: tuple[int, ...], where: str) -> np.ndarray:
    """A V1 slice's values (:func:`ckptool.format.tensor_proto.decode`): every element written, a
    count that is not the slice's is damage; no bfloat16 (TF 1's V1 writer never stores one)."""
    field = dtypes.PROTO_FIELDS.get(dtype.name)
    if not tp.tensor_content and (field is None or dtype.name in _NOT_V1):
        raise UnsupportedError(f"{where}: dtype {dtype.name} cannot be stored in a V1 checkpoint")
    values = getattr(tp, field) if field is not None else ()
    return tensor_proto.decode(dtype, shape, tp.tensor_content, values, where, tensor_proto.Fill.EXACT)
