"""TensorFlow's checkpoint-reading API without TensorFlow: ``import ckptool.compat.tf as tf``.

Offered, with TF 2.21's results (types and values) and errors (class and wording):

- ``tf.train``: ``list_variables``, ``load_variable``, ``load_checkpoint``,
  ``latest_checkpoint``, ``get_checkpoint_state``, ``checkpoint_exists`` (TF 2.21 has the
  last only under ``compat.v1``);
- ``tf.compat.v1.train``: the same and ``NewCheckpointReader``;
- the reader: ``get_tensor``, ``has_tensor``, ``get_variable_to_shape_map``,
  ``get_variable_to_dtype_map`` (``DType`` values with ``.name`` and ``.as_numpy_dtype``),
  ``debug_string``;
- ``tf.errors``: ``OpError`` and its subclasses (``NotFoundError``,
  ``InvalidArgumentError``, ``DataLossError`` ...);
- ``tf.dtypes.DType``, ``tf.as_dtype`` and the dtypes by name (``tf.float32``, ``tf.bfloat16`` ...).

Example::

    import ckptool.compat.tf as tf

    for name, shape in tf.train.list_variables("runs/"):
        value = tf.train.load_variable("runs/", name)

Any other name raises :class:`~ckptool.compat.offered.NotOfferedError` (an ``AttributeError``)
saying what is offered.
"""

from __future__ import annotations

from typing import Any

from ckptool.compat.dtypes import BY_NAME as _DTYPES
from ckptool.compat.dtypes import DType, as_dtype
from ckptool.compat.offered import not_offered
from ckptool.compat.tf import compat, dtypes, errors, train

__all__ = ["DType", "as_dtype", "compat", "dtypes", "errors", "train"]


def __getattr__(name: str) -> Any:
    if name in _DTYPES:
        return _DTYPES[name]
    raise not_offered("tensorflow", name, ["train", "compat.v1.train", "errors", "dtypes"])


def __dir__() -> list[str]:
    return sorted(__all__ + list(_DTYPES))
