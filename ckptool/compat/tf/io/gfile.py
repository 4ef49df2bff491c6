"""``tf.io.gfile``: ``exists``, ``glob``, ``GFile``, ``listdir``, ``isdir``, ``makedirs``,
``join``, ``walk`` (see :mod:`ckptool.compat.gfile`)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.gfile import GFile, exists, glob, isdir, join, listdir, makedirs, walk
from ckptool.compat.offered import not_offered

__all__ = ["GFile", "exists", "glob", "isdir", "join", "listdir", "makedirs", "walk"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.io.gfile", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
