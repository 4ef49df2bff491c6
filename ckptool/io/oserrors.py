"""How a failure of the file system is said: the one wording of an OSError (naming the
target, never a temporary; a missing file as :class:`MissingError`; too many open files as
:class:`ResourceError`, with the limit met) and of a file shorter than its reader needs."""

from __future__ import annotations

import errno
from typing import NoReturn

from ckptool.errors import CkptError, CorruptError, MissingError, ResourceError


def os_error(path: str, exc: OSError, doing: str) -> CkptError:
    """An OSError as a CkptError naming ``path`` (the target, never a temporary's name):
    a missing file as :class:`MissingError`. A CkptError that is an OSError too (a storage's
    own MissingError, worded by it: "no such bucket") passes unchanged."""
    if isinstance(exc, CkptError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return MissingError(f"{path}: no such file or directory")
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return ResourceError(f"{path}: cannot {doing}: {out_of_files(exc)}")
    return CkptError(f"{path}: cannot {doing}: {exc.strerror or exc}")


def out_of_files(exc: OSError) -> str:
    """EMFILE / ENFILE, said with the limit that was met (``ulimit -n``)."""
    if exc.errno == errno.ENFILE:
        return "too many open files in the system"
    try:
        import resource

        limit = f" (this process may have {resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,}: ulimit -n)"
    except (ImportError, OSError, ValueError):
        limit = ""
    return f"too many open files{limit}"


def raise_truncated(path: str, offset: int, want: int, got: int) -> NoReturn:
    """A read that found the file shorter than ``offset + want``: :class:`CorruptError`."""
    raise CorruptError(
        f"{path}: truncated: read {got} of {want} bytes at offset {offset} (file too short)"
    )


__all__ = ["os_error", "out_of_files", "raise_truncated"]
