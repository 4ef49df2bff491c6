"""``tf.compat.v1``: ``train`` (with ``NewCheckpointReader``), ``errors``, ``dtypes``, ``gfile``,
``logging``, ``io``, ``version``, ``cast``, ``as_dtype``, ``get_logger``, ``device``, ``VERSION``."""

from __future__ import annotations

from typing import Any

# tf.compat.v1's dtypes, errors and version are tf's own modules, each imported by its name
import ckptool.compat.tf.dtypes as dtypes
import ckptool.compat.tf.errors as errors
import ckptool.compat.tf.version as version
from ckptool.compat.device import device_v1 as device
from ckptool.compat.dtypes import BY_NAME as _DTYPES
from ckptool.compat.dtypes import QUANTIZED_DTYPES, DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tensor import Tensor, TensorShape, cast
from ckptool.compat.tf.compat.v1 import gfile, io, logging, train
from ckptool.compat.tf.version import COMPILER_VERSION, GIT_VERSION, GRAPH_DEF_VERSION, VERSION
from ckptool.compat.tflog import get_logger

__version__ = VERSION
__git_version__ = GIT_VERSION
__compiler_version__ = COMPILER_VERSION

__all__ = ["COMPILER_VERSION", "DType", "GIT_VERSION", "GRAPH_DEF_VERSION", "QUANTIZED_DTYPES", "Tensor",
           "TensorShape", "VERSION", "as_dtype", "cast", "device", "dtypes", "errors", "get_logger", "gfile", "io",
           "logging", "train", "version"]


def __getattr__(name: str) -> Any:
    if name in _DTYPES:
        return _DTYPES[name]
    raise not_offered("tensorflow.compat.v1", name, __all__)


def __dir__() -> list[str]:
    return sorted(__all__ + list(_DTYPES))
