"""``tf.DType`` as the readers hand it out: ``.name``, ``.as_numpy_dtype``, ``.as_datatype_enum``,
``repr`` ``tf.float32``, ``str`` ``<dtype: 'float32'>``; built on ckptool's one dtype table."""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.format import dtypes as _table


class DType:
    """A TensorFlow dtype (``tf.dtypes.DType``), compared by its enum value."""

    __slots__ = ("_dt",)

    def __init__(self, type_enum: int) -> None:
        self._dt = _table.from_value(int(type_enum))

    @property
    def name(self) -> str:
        """TF's name: ``"float32"``, ``"bfloat16"``, ``"string"``, ``"qint8"`` ..."""
        return self._dt.name

    @property
    def as_datatype_enum(self) -> int:
        """The ``DataType`` enum value (``DT_FLOAT`` is 1)."""
        return self._dt.value

    @property
    def as_numpy_dtype(self) -> Any:
        """What TF answers: the numpy scalar type (``numpy.float32``, ``ml_dtypes.bfloat16``);
        ``object`` for strings; ``KeyError`` for variants and resources; a one-field structured ``numpy.dtype``
        for the quantized types (``dtype([('qint8', 'i1')])``)."""
        dt = self._dt
        if dt.kind in (_table.VARIANT, _table.NONE):
            raise KeyError(dt.value)  # TF's table has no numpy type for variant and resource
        if not dt.is_fixed:
            return object
        if dt.name.startswith(("qint", "quint")):
            return dt.write_numpy
        return dt.numpy.type

    @property
    def is_quantized(self) -> bool:
        return self._dt.name.startswith(("qint", "quint"))

    def __eq__(self, other: object) -> bool:
        """Equal to the same dtype, its enum value or its name (``tf.float32 == "float32"``)."""
        if other is None:
            return False
        try:
            return self._dt.value == as_dtype(other)._dt.value
        except (TypeError, CkptError):
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._dt.value

    def __repr__(self) -> str:
        return f"tf.{self._dt.name}"

    def __str__(self) -> str:
        return f"<dtype: {self._dt.name!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        return DType, (self._dt.value,)


def as_dtype(type_value: Any) -> DType:
    """A :class:`DType` from a DType, an enum value or a TF dtype name (``tf.as_dtype``)."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, int):
        return DType(type_value)
    if isinstance(type_value, str):
        dt = _table.BY_NAME.get(type_value)
        if dt is not None:
            return DType(dt.value)
    raise TypeError(f"Cannot convert {type_value!r} to a dtype (ckptool.compat.tf knows TF's enum values "
                    "and dtype names only)")


#: ``tf.float32``, ``tf.bfloat16`` ...: every dtype a checkpoint can hold, by TF's name.
BY_NAME: dict[str, DType] = {dt.name: DType(dt.value) for dt in _table.BY_VALUE.values()}
