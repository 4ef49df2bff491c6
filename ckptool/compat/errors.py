"""TensorFlow's error classes as ``tf.errors`` has them: an :class:`OpError` built as
``OpError(node_def, op, message)`` whose ``str()`` and ``.message`` are the message, with
TF's canonical error codes. ckptool's own errors are translated into them (:func:`translated`)
where TF would raise."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ckptool.errors import CkptError, TensorNotFoundError

# Canonical codes (tensorflow/core/protobuf/error_codes.proto), as tf.errors names them.
OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS = 0, 1, 2, 3, 4, 5, 6
PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE = 7, 8, 9, 10, 11
UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED = 12, 13, 14, 15, 16


class OpError(Exception):
    """TF's ``tf.errors.OpError``: ``str(e)`` and ``e.message`` are the message; ``args`` is
    empty, as TF's are."""

    code = UNKNOWN

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__()
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = args[0] if args else self.code

    @property
    def message(self) -> str:
        return self._message

    @property
    def node_def(self) -> Any:
        return self._node_def

    @property
    def op(self) -> Any:
        return self._op

    @property
    def error_code(self) -> int:
        return int(self._error_code)

    def __str__(self) -> str:
        return self._message

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._node_def, self._op, self._message)


class CancelledError(OpError):
    """TF's ``tf.errors.CancelledError`` (code CANCELLED)."""

    code = CANCELLED

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, CANCELLED)


class UnknownError(OpError):
    """TF's ``tf.errors.UnknownError`` (code UNKNOWN)."""

    code = UNKNOWN

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNKNOWN)


class InvalidArgumentError(OpError):
    """TF's ``tf.errors.InvalidArgumentError`` (code INVALID_ARGUMENT)."""

    code = INVALID_ARGUMENT

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INVALID_ARGUMENT)


class NotFoundError(OpError):
    """TF's ``tf.errors.NotFoundError`` (code NOT_FOUND)."""

    code = NOT_FOUND

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, NOT_FOUND)


class PermissionDeniedError(OpError):
    """TF's ``tf.errors.PermissionDeniedError`` (code PERMISSION_DENIED)."""

    code = PERMISSION_DENIED

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, PERMISSION_DENIED)


class FailedPreconditionError(OpError):
    """TF's ``tf.errors.FailedPreconditionError`` (code FAILED_PRECONDITION)."""

    code = FAILED_PRECONDITION

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, FAILED_PRECONDITION)


class OutOfRangeError(OpError):
    """TF's ``tf.errors.OutOfRangeError`` (code OUT_OF_RANGE)."""

    code = OUT_OF_RANGE

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, OUT_OF_RANGE)


class UnimplementedError(OpError):
    """TF's ``tf.errors.UnimplementedError`` (code UNIMPLEMENTED)."""

    code = UNIMPLEMENTED

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNIMPLEMENTED)


class InternalError(OpError):
    """TF's ``tf.errors.InternalError`` (code INTERNAL)."""

    code = INTERNAL

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INTERNAL)


class DataLossError(OpError):
    """TF's ``tf.errors.DataLossError`` (code DATA_LOSS)."""

    code = DATA_LOSS

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, DATA_LOSS)


ERROR_CLASSES = (OpError, CancelledError, UnknownError, InvalidArgumentError, NotFoundError, PermissionDeniedError,
                 FailedPreconditionError, OutOfRangeError, UnimplementedError, InternalError, DataLossError)
CODES = {"OK": OK, "CANCELLED": CANCELLED, "UNKNOWN": UNKNOWN, "INVALID_ARGUMENT": INVALID_ARGUMENT,
         "DEADLINE_EXCEEDED": DEADLINE_EXCEEDED, "NOT_FOUND": NOT_FOUND, "ALREADY_EXISTS": ALREADY_EXISTS,
         "PERMISSION_DENIED": PERMISSION_DENIED, "RESOURCE_EXHAUSTED": RESOURCE_EXHAUSTED,
         "FAILED_PRECONDITION": FAILED_PRECONDITION, "ABORTED": ABORTED, "OUT_OF_RANGE": OUT_OF_RANGE,
         "UNIMPLEMENTED": UNIMPLEMENTED, "INTERNAL": INTERNAL, "UNAVAILABLE": UNAVAILABLE,
         "DATA_LOSS": DATA_LOSS, "UNAUTHENTICATED": UNAUTHENTICATED}


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise ckptool's errors as TF's reader raises them: TF's ``error_translator`` gives a
    missing tensor ``NotFoundError`` and any other failure of its C++ reader (a missing data
    shard, a bad checksum, a truncated index) a plain :class:`OpError` with code ``UNKNOWN``.
    The message is ckptool's (it names the file, tensor and offset); the original is chained
    as ``__cause__``."""
    try:
        yield
    except TensorNotFoundError as exc:
        raise NotFoundError(None, None, str(exc)) from exc
    except CkptError as exc:
        raise OpError(None, None, str(exc), UNKNOWN) from exc
    except OSError as exc:
        raise OpError(None, None, f"{exc.filename or ''}; {exc.strerror or exc}", UNKNOWN) from exc
