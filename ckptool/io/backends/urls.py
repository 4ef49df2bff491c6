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


#: The object stores served as file systems (``s3``, ``gs`` and Azure's as TF reads them, with
#: tensorflow-io for the ones TF 2.21 has no longer built in; ``memory``: fsspec's in-process store).
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"})


def scheme_of(path: str) -> str:
    """The scheme of a URL as written (``Foo`` of ``Foo://x``); '' for a path."""
    i = path.find("://")
    return path[:i] if i > 0 else ""


def object_store(path: str) -> bool:
    """Whether ``path`` names an object of a store of :data:`OBJECT_STORES` (not a local file, nor
    a scheme such as ``http://`` or ``hdfs://`` that is no object store here)."""
    return is_url(path) and scheme_of(path).lower() in OBJECT_STORES


def storage_for(path: str) -> tuple[Storage, str]:
    """The storage that serves ``path``, and the path as that storage names it."""
    if path.startswith("file://"):
        return LOCAL, path[len("file://"):]
    if is_url(path):
        from ckptool.io.backends import remote  # fsspec-backed; an optional extra

        return remote.storage_for_url(path), path
    return LOCAL, path


__all__ = ["OBJECT_STORES", "is_url", "object_store", "scheme_of", "storage_for"]
