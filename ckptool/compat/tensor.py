"""``tf.cast`` (``tf.dtypes.cast``) and the eager tensor it returns, as far as scripts that read
checkpoints use them: GPT-Neo's transformers loader calls ``tf.dtypes.cast(array,
tf.float32).numpy()``. A :class:`Tensor` holds a numpy array: ``.numpy()``, ``.dtype``,
``.shape``, ``np.asarray(t)``, indexing, ``int``/``float``/``bool``, TF's ``repr``; any other
tensor method is :class:`~ckptool.compat.offered.NotOfferedError`.
"""

from __future__ import annotations

import warnings
from typing import Any

from ckptool.compat import errors
from ckptool.compat.dtypes import DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tflog import get_logger

_CAST_ERROR = ("{{{{function_node __wrapped__Cast_device_/job:localhost/replica:0/task:0/device:CPU:0}}}} "
               "Cast {} to {} is not supported [Op:Cast] name: ")


class TensorShape(tuple):  # type: ignore[type-arg]
    """TF 2's ``tf.TensorShape`` of a known shape: a tuple of ints equal to the list or tuple
    of the same dimensions, ``str`` ``(2, 3)``, ``repr`` ``TensorShape([2, 3])``."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    def __str__(self) -> str:
        return f"({self[0]},)" if len(self) == 1 else "(" + ", ".join(str(d) for d in self) + ")"

    def __repr__(self) -> str:
        return f"TensorShape({list(self)})"

    @property
    def rank(self) -> int:
        return len(self)

    ndims = rank

    def as_list(self) -> list[int]:
        return list(self)

    def num_elements(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def is_fully_defined(self) -> bool:
        return True


class Tensor:
    """An eager tensor (TF's ``EagerTensor``) holding a numpy array."""

    __slots__ = ("_value", "_dtype")

    def __init__(self, value: Any, dtype: DType) -> None:
        self._value = value
        self._dtype = dtype

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return TensorShape(self._value.shape)

    @property
    def ndim(self) -> int:
        return int(self._value.ndim)

    def get_shape(self) -> TensorShape:
        return self.shape

    def numpy(self) -> Any:
        """A copy of the value: an ndarray, or a numpy scalar (``bytes`` for a string) for rank 0."""
        v = self._value.copy()
        return v[()] if v.ndim == 0 else v

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np
        return self._value if not dtype else np.array(self._value, dtype=dtype)

    def __len__(self) -> int:
        if not self._value.ndim:
            raise TypeError("Scalar tensor has no `len()`")
        return int(self._value.shape[0])

    def __iter__(self) -> Any:
        if not self._value.ndim:
            raise TypeError("Cannot iterate over a scalar tensor.")
        return (EagerTensor(v, self._dtype) for v in self._value)

    def __getitem__(self, item: Any) -> Tensor:
        import numpy as np
        return EagerTensor(np.asarray(self._value[item]), self._dtype)

    def __int__(self) -> int:
        return int(self._value)

    def __float__(self) -> float:
        return float(self._value)

    def __index__(self) -> int:
        return int(self._value.__index__())

    def __bool__(self) -> bool:
        return bool(self._value.size > 0 and self._value)

    def _text(self, is_repr: bool) -> str:
        import numpy as np
        v: Any = self._value[()] if self._value.ndim == 0 else self._value
        if is_repr:
            text = repr(v.item() if isinstance(v, np.generic) else v)
        else:
            text = str(v)
        return "\n" + text if "\n" in text else text

    def __repr__(self) -> str:
        return f"<tf.Tensor: shape={self.shape}, dtype={self._dtype.name}, numpy={self._text(True)}>"

    def __str__(self) -> str:
        return f"tf.Tensor({self._text(False)}, shape={self.shape}, dtype={self._dtype.name})"

    def __getattr__(self, name: str) -> Any:
        raise not_offered("tf.Tensor", name, ["numpy", "dtype", "shape", "ndim", "get_shape"])


class EagerTensor(Tensor):
    """The class of the tensors :func:`cast` returns (TF's eager tensors)."""

    __slots__ = ()


def _flatten(value: Any, depth: int = 0) -> tuple[list[Any], tuple[int, ...]]:
    """The leaves of a nested list/tuple and its shape; TF's error when it is not rectangular."""
    if not isinstance(value, (list, tuple)):
        return [value], ()
    parts = [_flatten(v, depth + 1) for v in value]
    shapes = {shape for _, shape in parts}
    if len(shapes) > 1:
        raise ValueError("Can't convert non-rectangular Python sequence to Tensor.")
    inner = shapes.pop() if shapes else ()
    return [x for leaves, _ in parts for x in leaves], (len(value), *inner)


_KINDS = ((bool, "b"), (int, "i"), (float, "f"), (complex, "c"), (str, "s"), (bytes, "s"))


def _python_array(value: Any) -> Any:
    """A Python value (scalars, nested lists) as TF converts it: floats to float32, ints to
    int32 or int64, complex to complex128, str/bytes to strings; mixing bools or strings with
    numbers is an error, as are values that do not fit."""
    import numpy as np

    leaves, shape = _flatten(value)
    kinds = set()
    for x in leaves:
        k = next((k for t, k in _KINDS if isinstance(x, t)), None)
        if k is None:
            k = np.asarray(x).dtype.kind.replace("u", "i").replace("S", "s").replace("U", "s")
        kinds.add(k)
    if len(kinds) > 1 and (kinds & {"b", "s", "O"} or not kinds <= {"i", "f", "c"}):
        raise ValueError("Can't convert Python sequence with mixed types to Tensor.")
    kind = "c" if "c" in kinds else "f" if "f" in kinds else kinds.pop() if kinds else "f"
    if kind == "s":
        out = np.empty(len(leaves), dtype=object)
        for i, x in enumerate(leaves):
            out[i] = x.encode() if isinstance(x, str) else bytes(x)
        return out.reshape(shape)
    if kind == "i":
        if any(not -(2**63) <= int(x) < 2**63 for x in leaves):
            raise ValueError("Can't convert Python sequence with out-of-range integer to Tensor.")
        fits = all(-(2**31) <= int(x) < 2**31 for x in leaves)
        return np.array(leaves, dtype=np.int32 if fits else np.int64).reshape(shape)
    if kind == "f":
        arr = np.array(leaves, dtype=np.float64)
        if np.any(np.isfinite(arr) & (np.abs(arr) > np.finfo(np.float32).max)):
            raise ValueError("Can't convert Python sequence with a value out of range for a double-precision float.")
        return arr.astype(np.float32).reshape(shape)
    return np.array(leaves, dtype={"c": np.complex128, "b": np.bool_}.get(kind, None)).reshape(shape)


def convert_to_tensor(value: Any) -> Tensor:
    """A tensor of ``value`` as TF makes one: numpy values keep their dtype (numpy strings
    become bytes); Python values as :func:`_python_array` converts them."""
    import numpy as np

    if isinstance(value, Tensor):
        return value
    arr = np.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else _python_array(value)
    if arr.dtype.kind in "USO":
        out = np.empty(arr.shape, dtype=object)
        for idx, v in np.ndenumerate(arr):
            out[idx] = v.encode() if isinstance(v, str) else bytes(v)
        return EagerTensor(out, as_dtype("string"))
    return EagerTensor(arr, as_dtype(arr.dtype))


def cast(x: Any, dtype: Any, name: Any = None) -> Tensor:
    """``tf.cast``: ``x`` (a tensor, numpy value or Python value) as ``dtype``, with TF's
    conversions (numpy's, as TF's CPU kernel computes them) and TF's warning when a complex
    value loses its imaginary part."""
    base = as_dtype(dtype).base_dtype
    if isinstance(x, Tensor) and x.dtype == base:
        return x
    t = convert_to_tensor(x)
    src = t.dtype
    if src.is_complex and base.is_floating:
        get_logger().warning("You are casting an input of type %s to an incompatible dtype %s.  This will "
                             "discard the imaginary part and may not be what you intended.", src.name, base.name)
    if src == base:
        return t
    if not (src.is_numpy_compatible and base.is_numpy_compatible) or "string" in (src.name, base.name):
        raise errors.UnimplementedError(None, None, _CAST_ERROR.format(_type_string(src), _type_string(base)))
    import numpy as np

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the value itself (the array protocol: a 0-d value may be a numpy scalar, which np.asarray refuses);
        # a quantized type cast to its integers, as TF's .numpy() gives them
        out = t.__array__().astype(_numpy_type(base))
    return EagerTensor(out, base)


def _numpy_type(d: DType) -> Any:
    import numpy as np
    t = d.as_numpy_dtype
    return t[0] if isinstance(t, np.dtype) and t.names else t


def _type_string(d: DType) -> str:
    """TF's DataTypeString: ``float`` for float32, ``double``, ``half``, else the name."""
    return {"float32": "float", "float64": "double", "float16": "half"}.get(d.name, d.name)
