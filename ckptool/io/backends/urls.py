"""Which storage serves a path: the local file system, or (for ``s3://``, ``gs://`` ...)
fsspec through :mod:`ckptool.io.backends.remote`. Kept apart from both so neither imports the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.io.backends.local import LOCAL

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def is_url(path: str) -> bool:
    """A URL of an object store (``s3://...``); ``file://`` names a local path."""
    return "://" in path and not path.startswith("file://")


def storage_for(path: str) -> tuple[Storage, str]:
    """The storage that serves ``path``, and the path as that storage names it."""
    if path.startswith("file://"):
        return LOCAL, path[len("file://"):]
    if is_url(path):
        from ckptool.io.backends import remote  # fsspec-backed; an optional extra

        return remote.storage_for_url(path), path
    return LOCAL, path


__all__ = ["is_url", "storage_for"]
