"""Reading checkpoints: :func:`open` and the :class:`Checkpoint` it returns.

Listing reads the ``.index`` alone. A tensor is read lazily from its shard
with positioned reads straight into the array it becomes (never the whole
shard), its CRC32C checked unless ``verify=False``. Values are bit-identical
to ``tf.train.load_checkpoint(p).get_tensor(name)``.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from ckptool.errors import CkptError, CkptWarning, CorruptError, MissingError, TensorNotFoundError, UnsupportedError
from ckptool.format import bundle, dtypes, tensors
from ckptool.format.bundle import Entry
from ckptool.format.table import TableReader
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph
from ckptool.io.layout import V1, V2, Located, locate

if TYPE_CHECKING:  # numpy is imported where arrays are made: listing needs none of it
    import numpy as np


class Variable(NamedTuple):
    """One listed tensor, as ``tf.train.list_variables`` shows it. Immutable; a
    named tuple because listing builds one per tensor (a frozen dataclass costs
    three times as much to build)."""

    name: str
    dtype: str  # TensorFlow's dtype name: "float32", "bfloat16", "string", ...
    shape: tuple[int, ...]
    nbytes: int  # bytes of tensor data stored on disk
    num_slices: int = 0  # > 0 for partitioned variables stored as slices

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def to_json(self) -> dict:
        out = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape), "nbytes": self.nbytes}
        if self.num_slices:
            out["slices"] = self.num_slices
        return out


def _name(key: bytes) -> str:
    return key.decode("utf-8", "surrogateescape")


def _key(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


class Checkpoint:
    """An open checkpoint. Use as a context manager, or call :meth:`close`."""

    format: str
    prefix: str

    def __init__(self, located: Located):
        self.storage = located.storage
        self.prefix = located.prefix
        self.format = located.format

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"<ckptool.Checkpoint {self.format} {self.prefix!r}>"

    def __contains__(self, name: str) -> bool:
        return any(v.name == name for v in self.variables())

    def names(self) -> list[str]:
        return [v.name for v in self.variables()]

    def variable(self, name: str) -> Variable:
        for v in self.variables():
            if v.name == name:
                return v
        raise self._not_found(name)

    def _not_found(self, name: str) -> TensorNotFoundError:
        import difflib

        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return TensorNotFoundError(f"{self.prefix}: tensor {name!r} not found in checkpoint{hint}")

    @property
    def is_object_based(self) -> bool:
        return OBJECT_GRAPH_KEY in self

    def object_graph(self) -> ObjectGraph | None:
        """The parsed object graph of an object-based checkpoint, else None."""
        if not self.is_object_based:
            return None
        value = self.read(OBJECT_GRAPH_KEY)
        if value.dtype != object or value.size != 1:
            raise CorruptError(f"{self.prefix}: {OBJECT_GRAPH_KEY} is not a string scalar "
                               f"({value.dtype} {list(value.shape)})")
        return ObjectGraph.parse(value.item() if value.shape == () else value.ravel()[0],
                                 f"{self.prefix}: {OBJECT_GRAPH_KEY}")

    def total_bytes(self) -> int:
        return sum(v.nbytes for v in self.variables())

    def verify(self) -> Iterator[tuple[str, str | None]]:
        """Read every tensor with all checksums on; yield ``(name, error or None)``."""
        for v in self.variables():
            try:
                self.read(v.name, verify=True)
            except CkptError as exc:
                yield v.name, str(exc)
            else:
                yield v.name, None

    # Subclasses implement:
    def variables(self) -> list[Variable]:  # pragma: no cover - abstract
        raise NotImplementedError

    def read(self, name: str, verify: bool = True) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class BundleCheckpoint(Checkpoint):
    """A V2 tensor bundle: ``PREFIX.index`` plus ``PREFIX.data-*`` shards."""

    def __init__(self, located: Located):
        super().__init__(located)
        self.index_path = bundle.index_filename(self.prefix)
        self.index_size = 0
        raw = self.storage.read_bytes(self.index_path)
        self.index_size = len(raw)
        table = TableReader(raw, self.index_path)
        it = iter(table)
        try:
            key, value = next(it)
        except StopIteration:
            raise CorruptError(f"{self.index_path}: table has no header entry") from None
        if key != bundle.HEADER_KEY:
            raise CorruptError(f"{self.index_path}: first entry is not the bundle header")
        self.header = bundle.parse_header(value, self.index_path)
        self._raw: dict[bytes, memoryview] = {}
        for key, value in it:
            self._raw[key] = value
        self._entries: dict[bytes, Entry] = {}
        self._variables: list[Variable] | None = None
        self._slice_keys: set[bytes] | None = None
        self._readers: dict[int, object] = {}
        self._lock = threading.Lock()

    # -- index ---------------------------------------------------------------

    def entry(self, key: bytes) -> Entry:
        e = self._entries.get(key)
        if e is None:
            value = self._raw.get(key)
            if value is None:
                raise TensorNotFoundError(f"{self.prefix}: key {key!r} not found in checkpoint")
            e = bundle.parse_entry(key, value, self.index_path)
            self._entries[key] = e
        return e

    def keys(self) -> list[bytes]:
        """Every key of the index but the header, slice keys included, sorted."""
        return list(self._raw)

    def raw_entry(self, key: bytes) -> bytes:
        """The serialized BundleEntryProto of ``key``, exactly as stored."""
        return bytes(self._raw[key])

    def _all_entries(self) -> dict[bytes, Entry]:
        """Every entry parsed (once), in key order."""
        if len(self._entries) != len(self._raw):
            parse, where, done = bundle.parse_entry, self.index_path, self._entries
            self._entries = {k: done.get(k) or parse(k, v, where) for k, v in self._raw.items()}
        return self._entries

    def slice_keys(self) -> set[bytes]:
        """Keys of the slice entries that partitioned tensors refer to (hidden from listings)."""
        if self._slice_keys is None:
            self._slice_keys = {bundle.encode_tensor_name_slice(key, sl)
                                for key, e in self._all_entries().items() if e.slices for sl in e.slices}
        return self._slice_keys

    def variables(self) -> list[Variable]:
        if self._variables is None:
            hidden = self.slice_keys()
            new = tuple.__new__  # Variable(...) without the argument parsing: the inner loop
            out = []
            for key, e in self._all_entries().items():
                if hidden and key in hidden:
                    continue
                if not e.slices:
                    out.append(new(Variable, (key.decode("utf-8", "surrogateescape"), e.dtype.name, e.shape,
                                              e.size, 0)))
                else:
                    nbytes = sum(self._slice_entry(e, sl).size for sl in e.slices)
                    out.append(Variable(_name(key), e.dtype.name, e.shape, nbytes, len(e.slices)))
            self._variables = out
        return self._variables

    def __contains__(self, name: str) -> bool:
        key = _key(name)
        return key in self._raw and key not in self.slice_keys()

    def _lookup(self, name: str) -> Entry:
        key = _key(name)
        if key not in self._raw:
            raise self._not_found(name)
        return self.entry(key)

    def _slice_entry(self, full: Entry, sl) -> Entry:
        key = bundle.encode_tensor_name_slice(full.key, sl)
        if key not in self._raw:
            raise CorruptError(
                f"{self.index_path}: slice {list(sl)} of {_name(full.key)!r} has no entry in the index"
            )
        e = self.entry(key)
        if e.slices:
            raise CorruptError(f"{self.index_path}: slice entry of {_name(full.key)!r} is itself sliced")
        if e.dtype != full.dtype:
            raise CorruptError(f"{self.index_path}: slice of {_name(full.key)!r} has dtype {e.dtype.name}, "
                               f"the tensor {full.dtype.name}")
        if e.shape != bundle.slice_shape(sl, full.shape):
            raise CorruptError(f"{self.index_path}: slice {list(sl)} of {_name(full.key)!r} has shape "
                               f"{list(e.shape)}")
        return e

    # -- data ----------------------------------------------------------------

    def shard_path(self, shard_id: int) -> str:
        return bundle.data_filename(self.prefix, shard_id, self.header.num_shards)

    def shard_paths(self) -> list[str]:
        return [self.shard_path(i) for i in range(self.header.num_shards)]

    def _reader(self, shard_id: int, key: bytes):
        if not 0 <= shard_id < self.header.num_shards:
            raise CorruptError(
                f"{self.index_path}: entry {_name(key)!r} names shard {shard_id}, "
                f"but the header says num_shards = {self.header.num_shards}"
            )
        r = self._readers.get(shard_id)
        if r is None:
            with self._lock:
                r = self._readers.get(shard_id)
                if r is None:
                    path = self.shard_path(shard_id)
                    try:
                        r = self.storage.open_reader(path)
                    except MissingError:
                        r = self._misnumbered_shard(shard_id)
                        if r is None:
                            raise MissingError(
                                f"{path}: data shard {shard_id} of {self.header.num_shards} is missing "
                                f"(needed for {_name(key)!r})"
                            ) from None
                    self._readers[shard_id] = r
        return r

    def _misnumbered_shard(self, shard_id: int):
        """MergeV2Checkpoints can sum num_shards over header-only inputs (FORMAT.md §1.3);
        the file then says "-of-" a smaller count. Use it when it is the only candidate."""
        d, base = self.storage.dirname(self.prefix), self.storage.basename(self.prefix)
        names = self.storage.glob(d, f"{base}.data-{shard_id:05d}-of-*")
        names = [n for n in names if bundle.DATA_RE.match(n)]
        if len(names) != 1:
            return None
        path = self.storage.join(d, names[0]) if d else names[0]
        warnings.warn(f"{self.index_path}: header says {self.header.num_shards} shards; "
                      f"reading shard {shard_id} from {path}", CkptWarning, stacklevel=4)
        return self.storage.open_reader(path)

    def _check_bounds(self, e: Entry, reader) -> None:
        if e.offset + e.size > reader.size:
            raise CorruptError(
                f"{reader.path}: tensor {_name(e.key)!r} at offset {e.offset} ({e.size} bytes) runs past "
                f"the end of the file ({reader.size} bytes)"
            )

    def read_raw(self, e: Entry, verify: bool = True) -> bytearray:
        """The stored bytes of a plain (unsliced) entry, CRC-checked unless told not to."""
        reader = self._reader(e.shard_id, e.key)
        self._check_bounds(e, reader)
        buf = reader.read(e.offset, e.size)
        if verify and e.dtype.is_fixed:
            bundle.check_crc(buf, e, reader.path)
        return buf

    def _read_plain(self, e: Entry, verify: bool) -> np.ndarray:
        import numpy as np
        reader = self._reader(e.shard_id, e.key)
        self._check_bounds(e, reader)
        if e.dtype.is_fixed:
            arr = np.empty(e.numel, dtype=e.dtype.numpy)
            raw = arr.view(np.uint8)
            if e.size:
                reader.readinto(e.offset, raw)
            if verify:
                bundle.check_crc(raw, e, reader.path)
            if self.header.big_endian and e.dtype.itemsize > 1:
                arr = tensors._byteswap(arr, e.dtype)
            return arr.reshape(e.shape)
        buf = reader.read(e.offset, e.size)
        if e.dtype.kind == dtypes.STRING:
            return bundle.decode_string(buf, e, self.header.big_endian, reader.path, verify)
        if self.header.big_endian:
            from ckptool.errors import UnsupportedError

            raise UnsupportedError(f"{reader.path}: big-endian variant tensor {_name(e.key)!r}")
        return bundle.decode_variant(buf, e, reader.path, verify)

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        e = self._lookup(name)
        _check_numpy_shape(e.shape, e.dtype, f"{self.index_path}: tensor {name!r}")
        if not e.slices:
            return self._read_plain(e, verify)
        return self._assemble(e, verify)

    def _assemble(self, e: Entry, verify: bool) -> np.ndarray:
        import numpy as np

        # The full shape comes from the index alone: before allocating it, check that
        # the slices (each bounded by its data file) can cover it at all.
        parts = []
        stored = 0
        for sl in e.slices:
            part = self._slice_entry(e, sl)
            try:
                region = bundle.slice_region(sl, e.shape)
            except CorruptError as exc:
                raise CorruptError(f"{self.index_path}: {_name(e.key)!r}: {exc}") from None
            self._check_bounds(part, self._reader(part.shard_id, part.key))
            parts.append((part, region))
            stored += part.numel
        if stored < e.numel:
            raise CorruptError(
                f"{self.index_path}: does not have sufficient slices for partitioned tensor "
                f"{_name(e.key)!r} ({len(e.slices)} slices hold {stored} of {e.numel} elements)"
            )
        out = np.empty(e.shape, dtype=e.dtype.numpy)
        covered = np.zeros(e.shape, dtype=bool) if e.numel else None
        for part, region in parts:
            out[region] = self._read_plain(part, verify)
            if covered is not None:
                covered[region] = True
        if covered is not None and not covered.all():
            raise CorruptError(
                f"{self.index_path}: does not have sufficient slices for partitioned tensor "
                f"{_name(e.key)!r} ({len(e.slices)} slices cover {int(covered.sum())} of {e.numel} elements)"
            )
        return out

    def plain_entries(self) -> Iterator[Entry]:
        """Every entry that holds data (slice entries included), in key order."""
        for key in self._raw:
            e = self.entry(key)
            if not e.slices:
                yield e

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()


class V1Checkpoint(Checkpoint):
    """A legacy V1 checkpoint: one table per shard, data inside the table."""

    def __init__(self, located: Located):
        super().__init__(located)
        from ckptool.format import v1

        self._v1 = v1
        self.files = list(located.v1_files)
        self._meta: dict[str, object] = {}
        self._where: dict[tuple[str, tuple], tuple[int, object]] = {}  # (name, slice) -> (file idx, handle)
        self._tables = []
        for fi, path in enumerate(self.files):
            table = TableReader(self.storage.read_bytes(path), path)
            self._tables.append(table)
            first = True
            for handle in table.block_handles():
                from ckptool.format.table import iter_block

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
        self._variables = None

    def variables(self) -> list[Variable]:
        if self._variables is None:
            out = []
            for name in sorted(self._meta, key=_key):
                m = self._meta[name]
                numel = 1
                for d in m.shape:
                    numel *= d
                nbytes = numel * m.dtype.itemsize
                out.append(Variable(name, m.dtype.name, m.shape, nbytes,
                                    len(m.slices) if len(m.slices) > 1 else 0))
            self._variables = out
        return self._variables

    def __contains__(self, name: str) -> bool:
        return name in self._meta

    def _slice_value(self, m, sl):
        from ckptool.format.table import iter_block

        key = bundle.encode_tensor_name_slice(_key(m.name), sl) if m.shape else \
            bundle.encode_tensor_name_slice(_key(m.name), ())
        loc = self._where.get(key)
        if loc is None:
            raise CorruptError(f"{self.prefix}: V1 slice {list(sl)} of {m.name!r} has no entry")
        fi, handle = loc
        table = self._tables[fi]
        for k, value in iter_block(table.read_block(handle), table.name, handle.offset):
            if k == key:
                name, sp, tp = self._v1.parse_slice(value, table.name)
                shape = bundle.slice_shape(sl, m.shape)
                return self._v1.decode_tensor_proto(tp, m.dtype, shape, f"{table.name}: {m.name!r}")
        raise CorruptError(f"{table.name}: V1 slice of {m.name!r} vanished from its block")

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        import numpy as np
        m = self._meta.get(name)
        if m is None:
            raise self._not_found(name)
        _check_numpy_shape(m.shape, m.dtype, f"{self.prefix}: tensor {name!r}")
        if len(m.slices) == 1 and bundle.is_full_slice(m.slices[0], m.shape):
            return self._slice_value(m, m.slices[0])
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


#: numpy's NPY_MAXDIMS; TensorFlow allows up to 254 dimensions.
NUMPY_MAX_DIMS = 64


def _check_numpy_shape(shape, dtype, what: str) -> None:
    """A shape TF accepts but numpy cannot hold (over 64 dimensions, or a zero-size
    tensor whose other dimensions multiply past numpy's limit) is an UnsupportedError."""
    import numpy as np
    if len(shape) > NUMPY_MAX_DIMS:
        raise UnsupportedError(f"{what} has {len(shape)} dimensions; numpy arrays hold at most "
                               f"{NUMPY_MAX_DIMS}")
    n = max(1, dtype.itemsize)
    for d in shape:
        if d:
            n *= d
    if n > np.iinfo(np.intp).max:
        raise UnsupportedError(f"{what} has shape {list(shape)}, too large for a numpy array")


def open(path: str, storage=None) -> Checkpoint:  # noqa: A001 - the contract's name
    """Open a checkpoint given any CHECKPOINT argument form (see CONTRACT.md)."""
    located = locate(path, storage)
    if located.format == V2:
        return BundleCheckpoint(located)
    if located.format == V1:
        return V1Checkpoint(located)
    raise CkptError(f"{path}: unknown checkpoint format {located.format}")  # pragma: no cover
