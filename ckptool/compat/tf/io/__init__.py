"""``tf.io``: only ``gfile`` (see :mod:`ckptool.compat.gfile`)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered
from ckptool.compat.tf.io import gfile

__all__ = ["gfile"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.io", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
