"""TensorFlow's DataType enum (tensorflow/core/framework/types.proto, TF 2.21).

This is the one table of dtypes in ckptool: the enum value, TensorFlow's
dtype name (``tf.DType.name``), bytes per element in a V2 data file, and the
numpy dtype that ``tf.train.load_checkpoint(...).get_tensor`` returns.
Quantized types come back from TF as one-field structured dtypes, and so
they do here; bfloat16, float8, int4, int2 and float4 come from ml_dtypes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptool.errors import UnsupportedError

if TYPE_CHECKING:  # numpy is imported where arrays are made: listing needs none of it
    import numpy as np

#: Element kinds: raw fixed-size elements, or the two variable-length layouts.
FIXED, STRING, VARIANT, NONE = "fixed", "string", "variant", "none"


@dataclass(frozen=True)
class DType:
    value: int
    name: str  # TensorFlow's name, as tf.DType.name: "float32", "bfloat16", ...
    enum_name: str  # "DT_FLOAT"
    itemsize: int  # bytes per element on disk; 0 for variable-length kinds
    kind: str
    numpy_spec: str  # how to build the numpy dtype (see _numpy_dtype)
    safetensors: str = ""  # safetensors' dtype code ("F32"), "" when safetensors has none

    @property
    def numpy(self) -> np.dtype:
        return _numpy_dtype(self.numpy_spec)

    @property
    def write_numpy(self) -> np.dtype:
        """The numpy dtype that asks the writer for exactly this type: ``numpy``, except for the
        quantized types, which read as plain integers and are written from TF's structured
        ``as_numpy_dtype`` (``np.dtype([("qint8", np.int8)])``)."""
        return _quantized_struct(self.numpy_spec) if self.numpy_spec.startswith("q:") else self.numpy

    @property
    def is_fixed(self) -> bool:
        return self.kind == FIXED

    @property
    def npy_portable(self) -> bool:
        """A fixed-size type plain numpy holds, so that a ``.npy`` file records it portably
        (not an ml_dtypes type, not a quantized one)."""
        return self.kind == FIXED and not self.numpy_spec.startswith(("ml:", "q:"))

    def __str__(self) -> str:
        return self.name


@functools.cache
def _numpy_dtype(spec: str) -> np.dtype:
    import numpy as np
    if spec.startswith("ml:"):
        import ml_dtypes

        scalar: type[np.generic] = getattr(ml_dtypes, spec[3:])
        return np.dtype(scalar)
    if spec.startswith("q:"):
        # TF's quantized types read as their plain integer type, as get_tensor returns them
        # (ndarray_tensor.cc maps TF_QINT8 to NPY_INT8, ...).
        return np.dtype(spec.split(",")[1])
    return np.dtype(spec)


def _quantized_struct(spec: str) -> np.dtype:
    """tf.qint8.as_numpy_dtype and friends: np.dtype([("qint8", np.int8)])."""
    import numpy as np
    name, base = spec[2:].split(",")
    return np.dtype([(name, base)])


_TABLE: list[tuple[int, str, str, int, str, str, str]] = [
    # value, name, enum name, itemsize, kind, numpy, safetensors code
    (1, "float32", "DT_FLOAT", 4, FIXED, "<f4", "F32"),
    (2, "float64", "DT_DOUBLE", 8, FIXED, "<f8", "F64"),
    (3, "int32", "DT_INT32", 4, FIXED, "<i4", "I32"),
    (4, "uint8", "DT_UINT8", 1, FIXED, "u1", "U8"),
    (5, "int16", "DT_INT16", 2, FIXED, "<i2", "I16"),
    (6, "int8", "DT_INT8", 1, FIXED, "i1", "I8"),
    (7, "string", "DT_STRING", 0, STRING, "O", ""),
    (8, "complex64", "DT_COMPLEX64", 8, FIXED, "<c8", "C64"),
    (9, "int64", "DT_INT64", 8, FIXED, "<i8", "I64"),
    (10, "bool", "DT_BOOL", 1, FIXED, "?", "BOOL"),
    (11, "qint8", "DT_QINT8", 1, FIXED, "q:qint8,i1", ""),
    (12, "quint8", "DT_QUINT8", 1, FIXED, "q:quint8,u1", ""),
    (13, "qint32", "DT_QINT32", 4, FIXED, "q:qint32,<i4", ""),
    (14, "bfloat16", "DT_BFLOAT16", 2, FIXED, "ml:bfloat16", "BF16"),
    (15, "qint16", "DT_QINT16", 2, FIXED, "q:qint16,<i2", ""),
    (16, "quint16", "DT_QUINT16", 2, FIXED, "q:quint16,<u2", ""),
    (17, "uint16", "DT_UINT16", 2, FIXED, "<u2", "U16"),
    (18, "complex128", "DT_COMPLEX128", 16, FIXED, "<c16", ""),
    (19, "float16", "DT_HALF", 2, FIXED, "<f2", "F16"),
    (20, "resource", "DT_RESOURCE", 0, NONE, "O", ""),
    (21, "variant", "DT_VARIANT", 0, VARIANT, "O", ""),
    (22, "uint32", "DT_UINT32", 4, FIXED, "<u4", "U32"),
    (23, "uint64", "DT_UINT64", 8, FIXED, "<u8", "U64"),
    (24, "float8_e5m2", "DT_FLOAT8_E5M2", 1, FIXED, "ml:float8_e5m2", "F8_E5M2"),
    (25, "float8_e4m3fn", "DT_FLOAT8_E4M3FN", 1, FIXED, "ml:float8_e4m3fn", "F8_E4M3"),
    (26, "float8_e4m3fnuz", "DT_FLOAT8_E4M3FNUZ", 1, FIXED, "ml:float8_e4m3fnuz", ""),
    (27, "float8_e4m3b11fnuz", "DT_FLOAT8_E4M3B11FNUZ", 1, FIXED, "ml:float8_e4m3b11fnuz", ""),
    (28, "float8_e5m2fnuz", "DT_FLOAT8_E5M2FNUZ", 1, FIXED, "ml:float8_e5m2fnuz", ""),
    (29, "int4", "DT_INT4", 1, FIXED, "ml:int4", ""),
    (30, "uint4", "DT_UINT4", 1, FIXED, "ml:uint4", ""),
    (31, "int2", "DT_INT2", 1, FIXED, "ml:int2", ""),
    (32, "uint2", "DT_UINT2", 1, FIXED, "ml:uint2", ""),
    (33, "float4_e2m1fn", "DT_FLOAT4_E2M1FN", 1, FIXED, "ml:float4_e2m1fn", ""),
]

BY_VALUE: dict[int, DType] = {row[0]: DType(*row) for row in _TABLE}
BY_NAME: dict[str, DType] = {d.name: d for d in BY_VALUE.values()}
BY_NAME["half"] = BY_VALUE[19]
BY_NAME["float"] = BY_VALUE[1]
BY_NAME["double"] = BY_VALUE[2]

STRING_DTYPE = BY_VALUE[7]
INT64 = BY_VALUE[9]

#: The real floating-point types, in the order messages list them.
FLOATS = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float8_e4m3b11fnuz", "float8_e5m2fnuz", "float4_e2m1fn")
#: The four ``convert --cast`` casts between (either way, rounding to nearest even).
CASTABLE = FLOATS[:4]
#: What ``average`` averages: the float types but float4.
AVERAGED = tuple(n for n in FLOATS if n != "float4_e2m1fn")
#: TensorFlow dtype name <-> safetensors dtype code, both ways one to one (the table's column).
TF_TO_SAFETENSORS = {d.name: d.safetensors for d in BY_VALUE.values() if d.safetensors}
#: The typed field of a TensorProto that holds a tensor's values one by one when its
#: ``tensor_content`` is empty (tensorflow/core/framework/tensor.proto), for the numeric and
#: string dtypes that have one.
PROTO_FIELDS = {
    "float16": "half_val", "bfloat16": "half_val", "float32": "float_val", "float64": "double_val",
    "int32": "int_val", "int16": "int_val", "int8": "int_val", "uint8": "int_val", "uint16": "int_val",
    "qint8": "int_val", "quint8": "int_val", "qint16": "int_val", "quint16": "int_val", "qint32": "int_val",
    "string": "string_val", "complex64": "scomplex_val", "complex128": "dcomplex_val", "int64": "int64_val",
    "bool": "bool_val", "uint32": "uint32_val", "uint64": "uint64_val",
}


def from_value(value: int, where: str = "") -> DType:
    """The DType for an enum value from a file; unknown values are an error."""
    dt = BY_VALUE.get(value)
    if dt is None:
        suffix = f" in {where}" if where else ""
        if 101 <= value <= 133:
            raise UnsupportedError(f"reference dtype {value} (graph-only) cannot be stored{suffix}")
        raise UnsupportedError(f"unknown dtype {value}{suffix} (not defined by TensorFlow 2.21)")
    return dt


def from_name(name: str) -> DType:
    dt = BY_NAME.get(name.lower())
    if dt is None:
        raise UnsupportedError(f"unknown dtype name {name!r}")
    return dt


def from_numpy(dtype: np.dtype) -> DType:
    """The TF dtype that holds a numpy dtype exactly; an error when none does."""
    import numpy as np
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return STRING_DTYPE
    native = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    quantized = native.names is not None  # only TF's own structured dtypes name a quantized type
    # ml_dtypes is imported on first use: only a dtype it defines can match one of its rows.
    extension = not quantized and native.type.__module__.split(".")[0] == "ml_dtypes"
    for dt in BY_VALUE.values():
        if dt.kind != FIXED or dt.numpy_spec.startswith("q:") != quantized:
            continue
        if dt.numpy_spec.startswith("ml:") != extension:
            continue
        if (_quantized_struct(dt.numpy_spec) if quantized else _numpy_dtype(dt.numpy_spec)) == native:
            return dt
    raise UnsupportedError(f"numpy dtype {dtype} has no TensorFlow equivalent")
