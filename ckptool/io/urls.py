"""Which storage serves a path: the local file system, or (for ``s3://``, ``gs://`` ...)
fsspec through :mod:`ckptool.io.remote`. Kept apart from both so neither imports the other."""

from __future__ import annotations

from ckptool.io.storage import LOCAL, Storage, is_url


def storage_for(path: str) -> tuple[Storage, str]:
    """The storage that serves ``path``, and the path as that storage names it."""
    if path.startswith("file://"):
        return LOCAL, path[len("file://"):]
    if is_url(path):
        from ckptool.io import remote  # fsspec-backed; an optional extra

        return remote.storage_for_url(path), path
    return LOCAL, path


__all__ = ["storage_for"]
