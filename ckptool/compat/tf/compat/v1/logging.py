"""``tf.compat.v1.logging``: TF's logging functions (see :mod:`ckptool.compat.tflog`)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.offered import not_offered
from ckptool.compat.tflog import (
    DEBUG,
    ERROR,
    FATAL,
    INFO,
    WARN,
    TaskLevelStatusMessage,
    debug,
    error,
    fatal,
    flush,
    get_verbosity,
    info,
    log,
    log_every_n,
    log_first_n,
    log_if,
    set_verbosity,
    vlog,
    warn,
    warning,
)

__all__ = ["DEBUG", "ERROR", "FATAL", "INFO", "TaskLevelStatusMessage", "WARN", "debug", "error", "fatal", "flush",
           "get_verbosity", "info", "log", "log_every_n", "log_first_n", "log_if", "set_verbosity", "vlog", "warn",
           "warning"]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.compat.v1.logging", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
