"""A ``TensorProto``'s values (tensorflow/core/framework/tensor.proto): the numbers of its typed
fields, and the one decoder of its values (``tensor_content``, or the typed repeated field of its
dtype) into an array of its shape. Two readers feed the decoder: V1 tables' slices
(:mod:`ckptool.format.v1`: the message parsed by the protobuf runtime; TensorSliceWriter writes
every value, :attr:`Fill.EXACT`) and graph constants (:mod:`ckptool.format.saved_model`: the
message walked on the wire; TensorFlow writes ``tf.constant(5, shape=[3])`` as one value and
fills the shape by repeating the last, :attr:`Fill.REPEAT_LAST`). The wire reader of event files
(:mod:`ckptool.format.event_wire`) takes its field numbers from here too."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import CorruptError, RefusedError, UnsupportedError
from ckptool.format import dtypes
from ckptool.format.coding import BytesLike
from ckptool.format.entry import numel

if TYPE_CHECKING:  # numpy is imported where arrays are made: the event wire reader needs none of it
    import numpy as np

#: The typed repeated fields' numbers (tensor.proto), by name (:data:`ckptool.format.dtypes.PROTO_FIELDS`)
FIELD_NUMBERS = {"float_val": 5, "double_val": 6, "int_val": 7, "string_val": 8, "scomplex_val": 9,
                 "int64_val": 10, "bool_val": 11, "dcomplex_val": 12, "half_val": 13, "uint32_val": 16,
                 "uint64_val": 17}
#: A typed field -> numpy dtype of its elements (None: bytes)
_ELEMENTS = {
    "float_val": "<f4", "double_val": "<f8", "int_val": "<i4", "half_val": "<i4", "int64_val": "<i8",
    "bool_val": "?", "scomplex_val": "<f4", "dcomplex_val": "<f8", "uint32_val": "<u4", "uint64_val": "<u8",
    "string_val": None,
}
#: The most elements a repeat-last fill makes: it allocates what the message does not hold, so a
#: shape claiming billions of elements is refused before anything is allocated.
MAX_FILLED = 1 << 24


class Fill(enum.Enum):
    """How a TensorProto's typed values cover its elements."""

    #: one value per element (two per complex element), as a V1 table holds them
    EXACT = "exact"
    #: numeric values fewer than the elements (one at least): the last one repeated, as TensorFlow
    #: reads a graph constant (``Tensor::FromProto``, ``tensor_util.MakeNdarray``); strings exact
    REPEAT_LAST = "repeat-last"


#: Each rule's wording of a tensor_content and of a value count that does not fit the shape (the
#: error lines its readers have always printed)
_WORDS = {
    Fill.EXACT: ("{where}: tensor_content holds {got} bytes, expected {want}",
                 "{where}: holds {got} values, its slice needs {want}"),
    Fill.REPEAT_LAST: ("{where}: tensor_content of {got} bytes for {n} values",
                       "{where}: {got} values for a tensor of {want}"),
}


def decode(dtype: dtypes.DType, shape: tuple[int, ...], content: BytesLike, values: Sequence[Any],
           where: str, fill: Fill) -> np.ndarray:
    """The array of ``shape`` a TensorProto of ``dtype`` holds: its ``tensor_content`` when not
    empty, else ``values``, its typed field of ``dtype`` (strings as an object array of bytes).
    A count that does not fit the shape is a CorruptError naming ``where``, unless ``fill`` fills
    it; a dtype without a typed field is an UnsupportedError."""
    import numpy as np

    n = numel(shape)
    content_words, count_words = _WORDS[fill]
    if content:
        if not dtype.is_fixed:
            raise CorruptError(f"{where}: tensor_content set for dtype {dtype.name}")
        if len(content) != n * dtype.itemsize:
            raise CorruptError(content_words.format(where=where, got=len(content), want=n * dtype.itemsize, n=n))
        return np.frombuffer(content, dtype=dtype.numpy).copy().reshape(shape)
    field = dtypes.PROTO_FIELDS.get(dtype.name)
    if field is None:
        raise UnsupportedError(f"{where}: dtype {dtype.name} has no TensorProto value field")
    per = 2 if field in ("scomplex_val", "dcomplex_val") else 1
    count, got = n * per, len(values)
    if got != count and not (fill is Fill.REPEAT_LAST and field != "string_val" and 0 < got < count
                             and got % per == 0):
        raise CorruptError(count_words.format(where=where, got=got, want=count))
    if got < count and n > MAX_FILLED:
        raise RefusedError(f"{where}: {got} values to repeat over {n} elements: over {MAX_FILLED} not filled")
    flat = _elements(values, dtype, field)
    if len(flat) < n:
        flat = np.concatenate([flat, np.full(n - len(flat), flat[-1], dtype=flat.dtype)])
    return flat.reshape(shape)


def _elements(values: Sequence[Any], dtype: dtypes.DType, field: str) -> np.ndarray:
    """The elements ``values`` (the typed field ``field``) hold, as a flat array of ``dtype``."""
    import numpy as np

    if field == "string_val":
        out = np.empty(len(values), dtype=object)
        for i, v in enumerate(values):
            out[i] = bytes(v)
        return out
    raw = np.array(values, dtype=_ELEMENTS[field])
    if field == "half_val":  # the 16 bits of each element, in an int32
        return raw.astype(np.uint16).view(dtype.numpy)
    if field in ("scomplex_val", "dcomplex_val"):  # (real, imaginary) pairs
        return raw.view(dtype.numpy)
    return raw.astype(dtype.numpy.fields[dtype.name][0] if dtype.numpy.fields else dtype.numpy).view(dtype.numpy)


__all__ = ["FIELD_NUMBERS", "MAX_FILLED", "Fill", "decode"]
