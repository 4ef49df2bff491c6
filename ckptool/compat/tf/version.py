"""``tf.version``: the TensorFlow release whose answers ckptool.compat.tf gives (2.21.0)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered

VERSION = "2.21.0"
GIT_VERSION = "v2.21.0-rc1-5-ga481b10260d"
COMPILER_VERSION = "Clang 18.1.8"
GRAPH_DEF_VERSION = 2474
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0

__all__ = ["COMPILER_VERSION", "GIT_VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER",
           "GRAPH_DEF_VERSION_MIN_PRODUCER", "VERSION"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.version", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
