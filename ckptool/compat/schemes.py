"""Which file systems the shim has, as TF 2.21 answers for a path: local paths (``file://``
too) and the object stores ckptool's storage serves (:func:`ckptool.io.backends.urls.object_store`).
On any other scheme (``foo://``, ``ftp://``, ``hdfs://``, ``http(s)://``) TF has no file system:
its file functions raise ``UnimplementedError("File system scheme 'foo' not implemented (file:
'PATH')")``, ``isdir`` answers False and ``latest_checkpoint`` None. The shim does the same, and
never hands such a path to a storage (which would open a network connection for ``http://``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.compat import errors
from ckptool.io.backends.urls import is_url, object_store, scheme_of, storage_for

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def served(path: str) -> bool:
    """Whether TF (and so the shim) has a file system for ``path``."""
    return not is_url(path) or object_store(path)


def unimplemented(path: str) -> errors.UnimplementedError:
    """TF's error for a path of a scheme it has no file system for."""
    return errors.UnimplementedError(None, None, f"File system scheme '{scheme_of(path)}' not implemented "
                                                 f"(file: '{path}')")


def tf_storage(path: str) -> tuple[Storage, str]:
    """The storage serving ``path`` as TF's file system would; :func:`unimplemented` when TF has none."""
    if not served(path):
        raise unimplemented(path)
    return storage_for(path)


__all__ = ["served", "tf_storage", "unimplemented"]
