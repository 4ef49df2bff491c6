"""``tf.train``: the checkpoint readers (see :mod:`ckptool.compat.tf`)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered
from ckptool.compat.train import (
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)

__all__ = ["get_checkpoint_state", "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.train", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
