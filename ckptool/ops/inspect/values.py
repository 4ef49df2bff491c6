"""Tensor values as JSON, the form ``ckptool inspect --tensor --json`` prints
(README, : stable across releases):

  scalar for shape ``[]``; integers and booleans as JSON numbers and
  booleans (64-bit integers exactly, which some JSON readers round);
  floating-point values of every width (bfloat16 and float8 included) as
  numbers, written in the shortest form that reads back to the same value of
  that dtype; non-finite ones as the strings ``"NaN"``, ``"Infinity"`` and
  ``"-Infinity"`` (protobuf's JSON mapping), so the document stays valid
  JSON; complex values as ``{"real": x, "imag": y}``; string elements as
  text where they are valid UTF-8, else ``{"base64": "..."}``; variant
  elements always as ``{"base64": "..."}`` of their serialized bytes.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptool.format.json_numbers import json_float

if TYPE_CHECKING:
    from ckptool.ops.read.checkpoint import Checkpoint


def json_value(arr: np.ndarray, dtype: str | None = None) -> Any:
    """A tensor value as JSON-ready nested lists (see the module docstring)."""
    arr = np.asarray(arr)
    shape = arr.shape
    flat = arr.reshape(-1)
    items: list[Any]
    if arr.dtype == object:
        variant = dtype == "variant"
        items = [_json_bytes(x, variant) for x in flat.tolist()]
    elif arr.dtype.names:  # TF's quantized types: one-field structured dtypes
        return json_value(arr[arr.dtype.names[0]])
    elif arr.dtype.kind in "biu":
        return arr.tolist()
    elif arr.dtype.kind == "c":
        items = [{"real": json_float(z.real), "imag": json_float(z.imag)} for z in flat.tolist()]
    elif arr.dtype.kind == "f" and arr.dtype in (np.float16, np.float32, np.float64):
        if arr.dtype == np.float64:
            items = flat.tolist()
        else:  # shortest text that reads back to the same float16/float32
            items = [float(s) for s in flat.astype(str).tolist()]
        if not np.isfinite(flat).all():
            items = [json_float(x) for x in items]
    else:  # ml_dtypes: bfloat16, float8, float4 give floats, int4 / int2 give ints
        items = flat.tolist()
        if items and isinstance(items[0], float):
            items = [json_float(x) for x in items]
    if not shape:
        return items[0]
    return _nest(items, shape)


def _json_bytes(b: Any, variant: bool) -> str | dict[str, str]:
    raw = bytes(b)
    if not variant:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"base64": base64.b64encode(raw).decode("ascii")}


def _nest(items: list[Any], shape: tuple[int, ...]) -> list[Any]:
    if len(shape) == 1:
        return items
    if 0 in shape:
        # numpy's tolist of a zero-size array: nested empties down to the first zero
        def empty(dims: tuple[int, ...]) -> list[Any]:
            if not dims or dims[0] == 0:
                return []
            return [empty(dims[1:]) for _ in range(dims[0])]

        return empty(shape)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    nested: list[Any] = out.reshape(shape).tolist()
    return nested


def tensor_json(ck: Checkpoint, name: str) -> dict[str, Any]:
    """``{"name", "dtype", "shape", "value"}`` for one tensor."""
    v = ck.variable(name)
    return {"name": v.name, "dtype": v.dtype, "shape": list(v.shape),
            "value": json_value(ck.read(name), v.dtype)}
