"""``tf.errors``: TF's error classes and codes (see :mod:`ckptool.compat.errors`)."""

from __future__ import annotations

from typing import Any

from ckptool.compat.errors import (
    ABORTED,
    ALREADY_EXISTS,
    CANCELLED,
    DATA_LOSS,
    DEADLINE_EXCEEDED,
    FAILED_PRECONDITION,
    INTERNAL,
    INVALID_ARGUMENT,
    NOT_FOUND,
    OK,
    OUT_OF_RANGE,
    PERMISSION_DENIED,
    RESOURCE_EXHAUSTED,
    UNAUTHENTICATED,
    UNAVAILABLE,
    UNIMPLEMENTED,
    UNKNOWN,
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OperatorNotAllowedInGraphError,
    OpError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from ckptool.compat.offered import not_offered

__all__ = [
    "ABORTED", "ALREADY_EXISTS", "CANCELLED", "DATA_LOSS", "DEADLINE_EXCEEDED", "FAILED_PRECONDITION", "INTERNAL",
    "INVALID_ARGUMENT", "NOT_FOUND", "OK", "OUT_OF_RANGE", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "UNAUTHENTICATED", "UNAVAILABLE", "UNIMPLEMENTED", "UNKNOWN", "AbortedError", "AlreadyExistsError",
    "CancelledError", "DataLossError", "DeadlineExceededError", "FailedPreconditionError", "InternalError",
    "InvalidArgumentError", "NotFoundError", "OpError", "OperatorNotAllowedInGraphError", "OutOfRangeError",
    "PermissionDeniedError", "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError",
    "UnimplementedError", "UnknownError",
]


def __getattr__(name: str) -> Any:
    raise not_offered("tensorflow.errors", name, __all__)


def __dir__() -> list[str]:
    return list(__all__)
