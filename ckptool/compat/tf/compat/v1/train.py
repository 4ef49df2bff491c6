"""``tf.compat.v1.train``: ``tf.train``'s readers, ``NewCheckpointReader`` and the deprecated
``checkpoint_exists`` (which logs TF's deprecation notice on first use)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered
from ckptool.compat.train import (
    NewCheckpointReader,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)

__all__ = ["NewCheckpointReader", "checkpoint_exists", "get_checkpoint_state",
           "latest_checkpoint", "list_variables", "load_checkpoint", "load_variable"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.compat.v1.train", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
