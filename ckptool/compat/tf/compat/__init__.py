"""``tf.compat``: only ``v1`` (its checkpoint readers)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered
from ckptool.compat.tf.compat import v1

__all__ = ["v1"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.compat", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
