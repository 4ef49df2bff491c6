"""Reading ``.safetensors`` files with ranged reads (writing them:
:mod:`ckptool.ops.write.stwrite`).

The header codec is :mod:`ckptool.format.safetensors_meta`. :class:`StFile`
lists tensors from the header alone and reads one tensor at a time with
positioned reads into the array it becomes (no mmap, no whole-file load).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.format import safetensors_meta as stm
from ckptool.io.backends.urls import storage_for

if TYPE_CHECKING:
    import numpy as np


class StFile:
    """An open ``.safetensors`` file: ``tensors`` (header order by offset), ``extras``
    (what ``__metadata__`` carries), and :meth:`read` one tensor at a time."""

    def __init__(self, path: str):
        self.path = path
        self.storage, local = storage_for(path)
        if not self.storage.exists(local) or self.storage.isdir(local):
            from ckptool.errors import MissingError

            raise MissingError(f"{path}: no such file")
        self._reader = self.storage.open_reader(local)
        try:
            size = self._reader.size
            n = stm.header_length(self._reader.read(0, min(8, size)), size, path)
            self.data_start = 8 + n
            self.tensors, meta = stm.decode_header(self._reader.read(8, n), size - self.data_start, path)
            self.extras = stm.decode_metadata(meta, f"{path}: __metadata__")
        except BaseException:
            self._reader.close()
            raise
        self.by_name = {t.name: t for t in self.tensors}

    def __enter__(self) -> StFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def read(self, name: str) -> np.ndarray:
        import numpy as np

        from ckptool.format import dtypes

        t = self.by_name[name]
        arr = np.empty(t.shape, dtype=dtypes.from_name(t.tf_dtype).numpy)
        if t.end > t.begin:
            self._reader.readinto(self.data_start + t.begin, arr.reshape(-1).view(np.uint8))
        return arr


__all__ = ["StFile"]
