"""``tf.compat.v1.gfile``: TF1's names for :mod:`ckptool.compat.tf.io.gfile`'s functions."""

from __future__ import annotations

from typing import Any

from ckptool.compat.gfile import FastGFile, GFile
from ckptool.compat.gfile import exists as Exists  # noqa: N812  (TF's names)
from ckptool.compat.gfile import glob as Glob  # noqa: N812
from ckptool.compat.gfile import isdir as IsDirectory  # noqa: N812
from ckptool.compat.gfile import listdir as ListDirectory  # noqa: N812
from ckptool.compat.gfile import makedirs as MakeDirs  # noqa: N812
from ckptool.compat.gfile import walk as Walk  # noqa: N812
from ckptool.compat.offered import not_offered

Open = GFile

__all__ = ["Exists", "FastGFile", "GFile", "Glob", "IsDirectory", "ListDirectory", "MakeDirs", "Open", "Walk"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.compat.v1.gfile", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
