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
    """TF's ``tf.errors.OpError``: built as ``OpError(node_def, op, message, error_code)``;
    ``str(e)`` and ``e.message`` are the message; ``args`` is empty, as TF's are."""

    def __init__(self, node_def: Any, op: Any, message: str, error_code: int, *args: Any) -> None:
        super().__init__()
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code
        self._experimental_payloads = args[0] if args else {}

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
        return self._error_code  # type: ignore[no-any-return]

    @property
    def experimental_payloads(self) -> Any:
        return self._experimental_payloads

    def __str__(self) -> str:
        return self._message

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self._node_def, self._op, self._message)
        return type(self), args if type(self).__init__ is not OpError.__init__ else args + (self._error_code,)


class CancelledError(OpError):
    """TF's ``tf.errors.CancelledError`` (code CANCELLED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, CANCELLED, *args)


class UnknownError(OpError):
    """TF's ``tf.errors.UnknownError`` (code UNKNOWN)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNKNOWN, *args)


class InvalidArgumentError(OpError):
    """TF's ``tf.errors.InvalidArgumentError`` (code INVALID_ARGUMENT)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INVALID_ARGUMENT, *args)


class DeadlineExceededError(OpError):
    """TF's ``tf.errors.DeadlineExceededError`` (code DEADLINE_EXCEEDED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, DEADLINE_EXCEEDED, *args)


class NotFoundError(OpError):
    """TF's ``tf.errors.NotFoundError`` (code NOT_FOUND)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, NOT_FOUND, *args)


class AlreadyExistsError(OpError):
    """TF's ``tf.errors.AlreadyExistsError`` (code ALREADY_EXISTS)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, ALREADY_EXISTS, *args)


class PermissionDeniedError(OpError):
    """TF's ``tf.errors.PermissionDeniedError`` (code PERMISSION_DENIED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, PERMISSION_DENIED, *args)


class UnauthenticatedError(OpError):
    """TF's ``tf.errors.UnauthenticatedError`` (code UNAUTHENTICATED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNAUTHENTICATED, *args)


class ResourceExhaustedError(OpError):
    """TF's ``tf.errors.ResourceExhaustedError`` (code RESOURCE_EXHAUSTED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, RESOURCE_EXHAUSTED, *args)


class FailedPreconditionError(OpError):
    """TF's ``tf.errors.FailedPreconditionError`` (code FAILED_PRECONDITION)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, FAILED_PRECONDITION, *args)


class AbortedError(OpError):
    """TF's ``tf.errors.AbortedError`` (code ABORTED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, ABORTED, *args)


class OutOfRangeError(OpError):
    """TF's ``tf.errors.OutOfRangeError`` (code OUT_OF_RANGE)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, OUT_OF_RANGE, *args)


class UnimplementedError(OpError):
    """TF's ``tf.errors.UnimplementedError`` (code UNIMPLEMENTED)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNIMPLEMENTED, *args)


class InternalError(OpError):
    """TF's ``tf.errors.InternalError`` (code INTERNAL)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, INTERNAL, *args)


class UnavailableError(OpError):
    """TF's ``tf.errors.UnavailableError`` (code UNAVAILABLE)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, UNAVAILABLE, *args)


class DataLossError(OpError):
    """TF's ``tf.errors.DataLossError`` (code DATA_LOSS)."""

    def __init__(self, node_def: Any, op: Any, message: str, *args: Any) -> None:
        super().__init__(node_def, op, message, DATA_LOSS, *args)


class OperatorNotAllowedInGraphError(TypeError):
    """TF's ``tf.errors.OperatorNotAllowedInGraphError`` (never raised here)."""


ERROR_CLASSES = (OpError, CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
                 AlreadyExistsError, PermissionDeniedError, UnauthenticatedError, ResourceExhaustedError,
                 FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError, InternalError,
                 UnavailableError, DataLossError)
CODES = {"OK": OK, "CANCELLED": CANCELLED, "UNKNOWN": UNKNOWN, "INVALID_ARGUMENT": INVALID_ARGUMENT,
         "DEADLINE_EXCEEDED": DEADLINE_EXCEEDED, "NOT_FOUND": NOT_FOUND, "ALREADY_EXISTS": ALREADY_EXISTS,
         "PERMISSION_DENIED": PERMISSION_DENIED, "RESOURCE_EXHAUSTED": RESOURCE_EXHAUSTED,
         "FAILED_PRECONDITION": FAILED_PRECONDITION, "ABORTED": ABORTED, "OUT_OF_RANGE": OUT_OF_RANGE,
         "UNIMPLEMENTED": UNIMPLEMENTED, "INTERNAL": INTERNAL, "UNAVAILABLE": UNAVAILABLE,
         "DATA_LOSS": DATA_LOSS, "UNAUTHENTICATED": UNAUTHENTICATED}


def unknown(message: str) -> OpError:
    """What TF's reader raises for a failure its translator does not name: a plain
    :class:`OpError` with code ``UNKNOWN``."""
    return OpError(None, None, message, UNKNOWN)


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
        raise unknown(str(exc)) from exc
    except OSError as exc:
        raise unknown(f"{exc.filename or ''}; {exc.strerror or exc}") from exc
