"""``tf.compat.v1``: ``train`` (with ``NewCheckpointReader``), ``errors``, ``dtypes``."""

from __future__ import annotations

from typing import Any

from ckptool.compat.dtypes import BY_NAME as _DTYPES
from ckptool.compat.dtypes import DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tf import dtypes, errors
from ckptool.compat.tf.compat.v1 import train

__all__ = ["DType", "as_dtype", "dtypes", "errors", "train"]


def __getattr__(name: str) -> Any:
    if name in _DTYPES:
        return _DTYPES[name]
    raise not_offered("tensorflow.compat.v1", name, __all__)


def __dir__() -> list[str]:
    return sorted(__all__ + list(_DTYPES))
