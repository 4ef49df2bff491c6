"""``tf.DType`` and ``tf.as_dtype`` as TensorFlow 2.21 has them, on ckptool's one dtype table.

A DType is its ``DataType`` enum value (``tf.float32`` is 1; reference types, which TF1 graphs
use, are the value plus 100: ``tf.float32_ref`` is 101). It equals whatever ``as_dtype``
turns into the same value: another DType, the enum value, a TF name (``"float32"``,
``"float"``, ``"half"``), a numpy scalar type or dtype (``np.float32``, ``np.dtype("<f4")``),
an ml_dtypes type (``ml_dtypes.bfloat16``), Python's ``float``, ``bool`` and ``object``, or
anything with a ``.dtype`` (a numpy array); it hashes as its enum value, as TF's does.
"""

from __future__ import annotations

import builtins
import functools
from typing import Any

from ckptool.format import dtypes as _table

_REF = 100
#: The dtypes TF 2.21 exports as ``tf.NAME`` and ``tf.dtypes.NAME`` (the float8, int4, int2 and
#: float4 types are only in ``tf.dtypes.experimental`` there).
EXPORTED = ("bfloat16", "bool", "complex128", "complex64", "double", "float16", "float32", "float64", "half",
            "int16", "int32", "int64", "int8", "qint16", "qint32", "qint8", "quint16", "quint8", "resource",
            "string", "uint16", "uint32", "uint64", "uint8", "variant")
_QUANTIZED = ("qint8", "quint8", "qint16", "quint16", "qint32")
#: What TF's C++ ``DataTypeIsNumeric`` leaves out beyond bool, string, resource and variant.
_NOT_NUMERIC = ("float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2fnuz",
                "int4", "uint4", "int2", "uint2", "float4_e2m1fn")


@functools.cache
def _ranges() -> dict[Any, tuple[Any, Any]]:
    """``DType.limits``: TF's table of intensity ranges, by numpy type."""
    import numpy as np
    return {np.bool_: (False, True), np.uint8: (0, 255), np.uint16: (0, 65535), np.int8: (-128, 127),
            np.int16: (-32768, 32767), np.int64: (-(2**63), 2**63 - 1), np.uint64: (0, 2**64 - 1),
            np.int32: (-(2**31), 2**31 - 1), np.uint32: (0, 2**32 - 1), np.float32: (-1, 1), np.float64: (-1, 1)}


def _base(type_enum: int) -> _table.DType:
    return _table.BY_VALUE[type_enum - _REF if type_enum > _REF else type_enum]


class DType:
    """A TensorFlow dtype (``tf.dtypes.DType``)."""

    __slots__ = ("_type_enum",)

    def __init__(self, type_enum: int) -> None:
        e = int(type_enum)
        if (e - _REF if e > _REF else e) not in _table.BY_VALUE:
            raise TypeError(f"{type_enum} does not correspond to a valid tensorflow::DataType")
        self._type_enum = e

    @property
    def _is_ref_dtype(self) -> bool:
        return self._type_enum > _REF

    @property
    def _as_ref(self) -> DType:
        return self if self._is_ref_dtype else _INTERN[self._type_enum + _REF]

    @property
    def _dt(self) -> _table.DType:
        return _base(self._type_enum)

    @property
    def name(self) -> str:
        """TF's name: ``"float32"``, ``"bfloat16"``, ``"string"``, ``"float32_ref"`` ..."""
        return self._dt.name + ("_ref" if self._is_ref_dtype else "")

    @property
    def as_datatype_enum(self) -> int:
        """The ``DataType`` enum value (``DT_FLOAT`` is 1)."""
        return self._type_enum

    @property
    def base_dtype(self) -> DType:
        """The dtype without its reference (TF1 variables)."""
        return _INTERN[self._type_enum - _REF] if self._is_ref_dtype else self

    @property
    def real_dtype(self) -> DType:
        """``float32`` for ``complex64``, ``float64`` for ``complex128``, else this dtype."""
        return {8: _INTERN[1], 18: _INTERN[2]}.get(self.base_dtype.as_datatype_enum, self)

    @property
    def as_numpy_dtype(self) -> Any:
        """The numpy scalar type (``numpy.float32``, ``ml_dtypes.bfloat16``); ``object`` for
        strings; a one-field structured ``numpy.dtype`` for the quantized types
        (``dtype([('qint8', 'i1')])``); ``KeyError`` for resources and variants."""
        dt = self._dt
        if dt.kind in (_table.VARIANT, _table.NONE):
            raise KeyError(self._type_enum)
        if dt.kind == _table.STRING:
            import numpy as np
            return np.object_ if self._is_ref_dtype else object
        if dt.name in _QUANTIZED:
            return dt.write_numpy
        return dt.numpy.type

    @property
    def is_bool(self) -> bool:
        return self._dt.name == "bool"

    @property
    def is_complex(self) -> bool:
        return self._dt.name.startswith("complex")

    @property
    def is_floating(self) -> bool:
        return self._dt.name in _table.FLOATS

    @property
    def is_integer(self) -> bool:
        n = self._dt.name
        return n.startswith(("int", "uint"))

    @property
    def is_quantized(self) -> bool:
        return self._dt.name in _QUANTIZED

    @property
    def is_unsigned(self) -> bool:
        return self._dt.name.startswith("uint")

    @property
    def is_numeric(self) -> bool:
        dt = self._dt
        return dt.kind == _table.FIXED and dt.name != "bool" and dt.name not in _NOT_NUMERIC

    @property
    def is_numpy_compatible(self) -> bool:
        return self._dt.kind not in (_table.VARIANT, _table.NONE)

    @property
    def size(self) -> int:
        """Bytes per element; 0 for strings, resources and variants."""
        return self._dt.itemsize

    def _extreme(self, which: str) -> Any:
        import ml_dtypes

        word = "minimum" if which == "min" else "maximum"
        base = self.base_dtype
        if self.is_quantized or base.name in ("bool", "string", "complex64", "complex128"):
            kind = "quantized type" if self.is_quantized else "type"
            raise TypeError(f"Cannot find {word} value of {self} with {kind} {base}.")
        try:
            return getattr(ml_dtypes.finfo(self.as_numpy_dtype), which)
        except Exception:
            try:
                return getattr(ml_dtypes.iinfo(self.as_numpy_dtype), which)
            except Exception:
                raise TypeError(f"Cannot find {word} value of {self}.") from None

    @property
    def min(self) -> Any:
        """The smallest value of a numeric type (``TypeError`` for bool, strings, complex, quantized)."""
        return self._extreme("min")

    @property
    def max(self) -> Any:
        """The largest value of a numeric type (``TypeError`` for bool, strings, complex, quantized)."""
        return self._extreme("max")

    @property
    def limits(self) -> tuple[Any, Any]:
        """TF's intensity limits ``(0, max)`` of the types that have them (``ValueError`` else)."""
        t = self.as_numpy_dtype
        ranges = _ranges()
        if t not in ranges:
            raise ValueError(str(self) + " does not have defined limits.")
        return 0, ranges[t][1]

    def is_compatible_with(self, other: Any) -> bool:
        """Whether ``other`` converts to this dtype (TF1: a reference type to its base)."""
        o = as_dtype(other)
        return self._type_enum in (o.as_datatype_enum, o.base_dtype.as_datatype_enum)

    def __eq__(self, other: object) -> bool:
        """Equal to whatever :func:`as_dtype` makes the same dtype of (``tf.float32 ==
        np.float32``, ``== "float32"``, ``== 1``); False for None and what does not convert."""
        if other is None:
            return False
        if type(other) is not DType:
            try:
                other = as_dtype(other)
            except TypeError:
                return False
        return self._type_enum == other._type_enum  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._type_enum

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: {self.name!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return as_dtype, (self.name,)


#: One DType per enum value, as TF interns them (``tf.as_dtype("float32") is tf.float32``).
_INTERN: dict[int, DType] = {e: DType(e) for v in _table.BY_VALUE for e in (v, v + _REF)}
#: ``tf.float32``, ``tf.half`` ...: the exported dtypes by name.
BY_NAME: dict[str, DType] = {n: _INTERN[_table.BY_NAME[n].value] for n in EXPORTED}
#: ``tf.dtypes.QUANTIZED_DTYPES``.
QUANTIZED_DTYPES = frozenset(_INTERN[_table.BY_NAME[n].value + r] for n in _QUANTIZED for r in (0, _REF))


@functools.cache
def _tables() -> tuple[dict[Any, DType], dict[Any, DType]]:
    """TF's lookup tables: numpy types to dtypes, and everything ``as_dtype`` accepts."""
    import numpy as np

    def by(name: str) -> DType:
        return _INTERN[_table.BY_NAME[name].value]

    np_to_tf: dict[Any, DType] = {}
    for dt in _table.BY_VALUE.values():
        if dt.kind == _table.FIXED:
            np_to_tf[dt.write_numpy if dt.name in _QUANTIZED else dt.numpy.type] = _INTERN[dt.value]
    for t in (np.object_, np.bytes_, np.str_):
        np_to_tf[t] = by("string")
    for pdt in (np.intc, np.uintc, np.int_, np.uint, np.longlong, np.ulonglong):
        if pdt not in np_to_tf:
            np_to_tf[pdt] = next(v for k, v in np_to_tf.items() if k == pdt().dtype)
    if hasattr(np.dtypes, "StringDType"):
        np_to_tf[np.dtypes.StringDType()] = by("string")
    any_to_tf: dict[Any, DType] = dict(_INTERN)
    for d in _INTERN.values():
        any_to_tf[d.name] = d
    for alias, name in (("half", "float16"), ("float", "float32"), ("double", "float64")):
        any_to_tf[alias] = by(name)
        any_to_tf[alias + "_ref"] = _INTERN[_table.BY_NAME[name].value + _REF]
    any_to_tf.update({builtins.float: by("float32"), builtins.bool: by("bool"), builtins.object: by("string")})
    any_to_tf.update(np_to_tf)
    return np_to_tf, any_to_tf


def as_dtype(type_value: Any) -> DType:
    """``tf.as_dtype``: the DType of a DType, an enum value, a TF dtype name, a numpy type or
    dtype, an ml_dtypes type, ``float``/``bool``/``object``, or a value with a ``.dtype``;
    ``TypeError`` for anything else (``int`` included, as in TF)."""
    if isinstance(type_value, DType):
        return _INTERN[type_value.as_datatype_enum]
    np_to_tf, any_to_tf = _tables()
    import numpy as np

    if isinstance(type_value, np.dtype):
        hit = np_to_tf.get(type_value.type)
        if hit is not None:
            return hit
    try:
        return any_to_tf[type_value]
    except (KeyError, TypeError):
        pass
    if hasattr(type_value, "dtype"):
        try:
            return np_to_tf[np.dtype(type_value.dtype).type]
        except (KeyError, TypeError):
            pass
    raise TypeError(f"Cannot convert the argument `type_value`: {type_value!r} to a TensorFlow DType.")
