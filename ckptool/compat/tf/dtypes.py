"""``tf.dtypes``: ``DType``, ``as_dtype``, ``cast``, ``QUANTIZED_DTYPES`` and the dtypes by name."""

from __future__ import annotations

from typing import Any

from ckptool.compat.dtypes import BY_NAME, QUANTIZED_DTYPES, DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tensor import cast

__all__ = ["DType", "QUANTIZED_DTYPES", "as_dtype", "cast"]


def __getattr__(name: str) -> Any:
    if name in BY_NAME:
        return BY_NAME[name]
    raise not_offered("tensorflow.dtypes", name, __all__ + ["float32", "bfloat16", "..."])


def __dir__() -> list[str]:
    return sorted(__all__ + list(BY_NAME))
