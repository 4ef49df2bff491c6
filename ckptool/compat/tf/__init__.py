"""TensorFlow's checkpoint-reading API without TensorFlow: ``import ckptool.compat.tf as tf``.

Offered, with TF 2.21's results (types and values) and errors (class and wording):

- ``tf.train``: ``list_variables``, ``load_variable``, ``load_checkpoint``,
  ``latest_checkpoint``, ``get_checkpoint_state``;
- ``tf.compat.v1``: the same (``train``, with ``NewCheckpointReader`` and the deprecated
  ``checkpoint_exists``), ``gfile``, ``logging``, ``io``, ``errors``, ``dtypes``, ``cast``,
  ``VERSION``;
- the reader: ``get_tensor``, ``has_tensor``, ``get_variable_to_shape_map``,
  ``get_variable_to_dtype_map`` (``DType`` values), ``debug_string``;
- ``tf.errors``: ``OpError`` and its subclasses (``NotFoundError``, ``DataLossError`` ...);
  a truncated data file is TF's ``IndexError("Read less bytes than requested")``;
- ``tf.DType``, ``tf.as_dtype``, the dtypes by name (``tf.float32``, ``tf.bfloat16`` ...),
  ``tf.cast`` / ``tf.dtypes.cast`` (a tensor with ``.numpy()``);
- ``tf.io.gfile``: ``exists``, ``glob``, ``GFile``, ``listdir``, ``isdir``, ``makedirs``,
  ``join``, ``walk``, on local paths and the object stores ckptool reads;
- ``tf.get_logger()`` and ``tf.compat.v1.logging``: TF's ``WARNING:tensorflow:...`` lines;
- ``tf.__version__`` and ``tf.version.VERSION``: ``"2.21.0"``, the release mimicked;
- ``tf.device``: a scope that places nothing (ckptool reads on the CPU), checking the device name
  as TF does.

Example::

    import ckptool.compat.tf as tf

    for name, shape in tf.train.list_variables("runs/"):
        value = tf.train.load_variable("runs/", name)

Any other name raises :class:`~ckptool.compat.offered.NotOfferedError` (an ``AttributeError``)
saying what is offered.
"""

from __future__ import annotations

from typing import Any

from ckptool.compat.device import device
from ckptool.compat.dtypes import BY_NAME as _DTYPES
from ckptool.compat.dtypes import DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tensor import Tensor, TensorShape, cast
from ckptool.compat.tf import compat, dtypes, errors, io, train, version
from ckptool.compat.tflog import get_logger

__version__ = version.VERSION
__git_version__ = version.GIT_VERSION
__compiler_version__ = version.COMPILER_VERSION

__all__ = ["DType", "Tensor", "TensorShape", "as_dtype", "cast", "compat", "device", "dtypes", "errors", "get_logger",
           "io", "train", "version"]

get_logger()  # TF sets up its logger when imported


def __getattr__(name: str) -> Any:
    if name in _DTYPES:
        return _DTYPES[name]
    raise not_offered("tensorflow", name, ["train", "compat.v1", "errors", "dtypes", "cast", "io.gfile",
                                           "get_logger", "device", "version", "__version__"])


def __dir__() -> list[str]:
    return sorted(__all__ + list(_DTYPES))
