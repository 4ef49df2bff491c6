"""TensorFlow's Python logging (``tf.get_logger()``, ``tf.compat.v1.logging``) and its
deprecation notices, as TF 2.21 sets them up, so that a script's log reads as under TF.

The logger is Python's ``logging.getLogger("tensorflow")``. The first :func:`get_logger` (TF
calls it when imported; so does :mod:`ckptool.compat.tf`) gives it a handler writing
``LEVEL:tensorflow:message`` (``logging.BASIC_FORMAT``) to stderr, unless the root logger
already has handlers; in an interactive session it writes to stdout at level INFO.
``tf.compat.v1.train.checkpoint_exists`` and the other functions TF deprecates log TF's
notice once per process: ``WARNING:tensorflow:From FILE:LINE: NAME (from MODULE) is
deprecated and will be removed in a future version.`` and the instructions.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

DEBUG, INFO, WARN, ERROR, FATAL = logging.DEBUG, logging.INFO, logging.WARN, logging.ERROR, logging.FATAL

_logger: logging.Logger | None = None
_lock = threading.Lock()
_counts: dict[tuple[str, int], int] = {}
_warned: set[str] = set()

F = TypeVar("F", bound=Callable[..., Any])


def get_logger() -> logging.Logger:
    """``tf.get_logger()``: the ``tensorflow`` logger, given TF's handler on first use."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = logging.getLogger("tensorflow")
            if not logging.getLogger().handlers:
                interactive = hasattr(sys, "ps1") or bool(sys.flags.interactive)
                if interactive:
                    logger.setLevel(INFO)
                handler = logging.StreamHandler(sys.stdout if interactive else sys.stderr)
                handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT, None))
                logger.addHandler(handler)
            _logger = logger
    return _logger


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().debug(msg, *args, **kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().info(msg, *args, **kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().warning(msg, *args, **kwargs)


warn = warning


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().error(msg, *args, **kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().fatal(msg, *args, **kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    get_logger().log(level, msg, *args, **kwargs)


def TaskLevelStatusMessage(msg: Any) -> None:  # noqa: N802  (TF's name)
    error(msg)


def flush() -> None:
    raise NotImplementedError()


def get_verbosity() -> int:
    return get_logger().getEffectiveLevel()


def set_verbosity(v: int) -> None:
    get_logger().setLevel(v)


def log_if(level: int, msg: Any, condition: Any, *args: Any) -> None:
    if condition:
        vlog(level, msg, *args)


def _next_count() -> int:
    """How many times this token has counted before. TF's token is the first frame, going
    out from the caller, in a file other than the caller's (for calls at a script's top
    level: one token for all of them)."""
    f: Any = sys._getframe(2)  # noqa: SLF001  (the caller's caller; TF's own tf_logging finds it so)
    here = f.f_code.co_filename
    while f is not None and f.f_code.co_filename == here:
        f = f.f_back
    token = (f.f_code.co_filename, f.f_lineno) if f is not None else ("<unknown>", 0)
    _counts[token] = _counts.get(token, -1) + 1
    return _counts[token]


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    log_if(level, msg, not (_next_count() % n), *args)


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    log_if(level, msg, _next_count() < n, *args)


def deprecated(module: str, instructions: str) -> Callable[[F], F]:
    """TF's ``@deprecation.deprecated(None, instructions)`` for a function TF defines in
    ``module``: the first call logs TF's notice, naming the caller's file and line."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def new_func(*args: Any, **kwargs: Any) -> Any:
            if func.__qualname__ not in _warned:
                _warned.add(func.__qualname__)
                caller = sys._getframe(1)  # noqa: SLF001  (the caller's frame, as TF's deprecation finds it)
                warning("From %s: %s (from %s) is deprecated and will be removed %s.\nInstructions for updating:\n%s",
                        f"{caller.f_code.co_filename}:{caller.f_lineno}", func.__qualname__, module,
                        "in a future version", instructions)
            return func(*args, **kwargs)

        return new_func  # type: ignore[return-value]

    return wrap
