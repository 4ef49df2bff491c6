"""Reading a legacy V1 checkpoint: one table per shard, the data inside the tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.errors import CorruptError
from ckptool.format import bundle
from ckptool.format.entry import numel
from ckptool.format.table import BlockHandle, TableReader, iter_block, read_table
from ckptool.io.layout.checkpoints import Located
from ckptool.ops.read.checkpoint import Checkpoint, Variable, check_numpy_shape, check_tiling, key_of

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.slices import Slice
    from ckptool.format.v1 import SliceMeta


class V1Checkpoint(Checkpoint):
    """A legacy V1 checkpoint: one table per shard, data inside the table."""

    def __init__(self, located: Located):
        super().__init__(located)
        from ckptool.format import v1

        self._v1 = v1
        self.files = list(located.v1_files)
        self._meta: dict[str, SliceMeta] = {}
        self._where: dict[bytes, tuple[int, BlockHandle]] = {}  # slice key -> (file idx, handle)
        self._tables: list[TableReader] = []
        for fi, path in enumerate(self.files):
            reader = self.storage.open_reader(path)
            try:
                table = read_table(reader, path)
            finally:
                reader.close()
            self._tables.append(table)
            first = True
            for handle in table.block_handles():
                for key, value in iter_block(table.read_block(handle), path, handle.offset):
                    if first:
                        if key != b"":
                            raise CorruptError(f"{path}: V1 file has no metadata entry")
                        for m in v1.parse_meta(value, path):
                            self._meta.setdefault(m.name, m)
                        first = False
                        continue
                    self._where[key] = (fi, handle)
            if first:
                raise CorruptError(f"{path}: empty V1 file")
        self._variables: list[Variable] | None = None

    def variables(self) -> list[Variable]:
        if self._variables is None:
            out = []
            for name in sorted(self._meta, key=key_of):
                m = self._meta[name]
                nbytes = numel(m.shape) * m.dtype.itemsize
                out.append(Variable(name, m.dtype.name, m.shape, nbytes,
                                    len(m.slices) if len(m.slices) > 1 else 0))
            self._variables = out
        return self._variables

    def __contains__(self, name: str) -> bool:
        return name in self._meta

    def stored_order(self) -> list[str]:
        """The tensor names in the order the files' metadata lists them, file by file."""
        return list(self._meta)

    def _slice_value(self, m: SliceMeta, sl: Slice) -> np.ndarray:
        key = bundle.encode_tensor_name_slice(key_of(m.name), sl) if m.shape else \
            bundle.encode_tensor_name_slice(key_of(m.name), ())
        loc = self._where.get(key)
        if loc is None:
            raise CorruptError(f"{self.prefix}: V1 slice {list(sl)} of {m.name!r} has no entry")
        fi, handle = loc
        table = self._tables[fi]
        for k, value in iter_block(table.read_block(handle), table.name, handle.offset):
            if k == key:
                _, _, tp = self._v1.parse_slice(value, table.name)
                shape = bundle.slice_shape(sl, m.shape)
                return self._v1.decode_tensor_proto(tp, m.dtype, shape, f"{table.name}: {m.name!r}")
        raise CorruptError(f"{table.name}: V1 slice of {m.name!r} vanished from its block")

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        import numpy as np
        m = self._meta.get(name)
        if m is None:
            raise self._not_found(name)
        check_numpy_shape(m.shape, m.dtype, f"{self.prefix}: tensor {name!r}")
        if len(m.slices) == 1 and bundle.is_full_slice(m.slices[0], m.shape):
            return self._slice_value(m, m.slices[0])
        check_tiling(m.slices, m.shape, self.prefix, name)
        # Decode the slices first: their sizes are bounded by the file, the full shape is not.
        values = [(bundle.slice_region(sl, m.shape), self._slice_value(m, sl)) for sl in m.slices]
        numel = 1
        for d in m.shape:
            numel *= d
        if sum(v.size for _, v in values) < numel:
            raise CorruptError(f"{self.prefix}: slices of {name!r} do not cover the tensor")
        out = np.empty(m.shape, dtype=m.dtype.numpy)
        covered = np.zeros(m.shape, dtype=bool)
        for region, value in values:
            out[region] = value
            covered[region] = True
        if out.size and not covered.all():
            raise CorruptError(f"{self.prefix}: slices of {name!r} do not cover the tensor")
        return out
