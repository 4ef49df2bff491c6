"""The few names ckptool needs that fsspec, s3fs and gcsfs offer only as private ones, each
wrapped once here (so a rename upstream breaks one line, and ``ruff --select SLF001`` finds
no private access anywhere else)."""

from __future__ import annotations

from typing import Any


def strip_protocol(fs: Any, url: str) -> str:
    """``url`` as ``fs`` names its objects (``bucket/key``, no scheme): the classmethod
    ``_strip_protocol`` that every fsspec filesystem has and ``ls``/``find`` answer in; fsspec
    has no public spelling of it."""
    return str(fs._strip_protocol(url))  # noqa: SLF001 - fsspec's only spelling


async def s3_call(fs: Any, method: str, **kwargs: Any) -> Any:
    """One botocore call through s3fs, awaited in s3fs's own event loop: ``_call_s3``. The
    public ``call_s3`` blocks until the call returns, when a streamed body (``get_object``'s)
    can no longer be read in that loop."""
    return await fs._call_s3(method, **kwargs)  # noqa: SLF001 - s3fs's coroutine has no public name


def gcs_endpoint(fs: Any) -> str:
    """The base URL of a gcsfs filesystem's JSON API (``https://storage.googleapis.com``, or
    the emulator's): ``_location``, which gcsfs keeps private; the upload endpoint that takes
    ``ifGenerationMatch`` is built on it."""
    return str(fs._location)  # noqa: SLF001 - gcsfs's only spelling


__all__ = ["gcs_endpoint", "s3_call", "strip_protocol"]
