"""Writing V2 checkpoints TensorFlow restores: :func:`write` and :class:`BundleWriter`.

docs/FORMAT.md §1-4. Tensor bytes are appended to the data shard(s) in the order
they are added (as ``SaveV2`` appends its inputs); the ``.index`` table holds
the header under ``""`` and one BundleEntryProto per key, sorted bytewise.
For the same tensors in the same order the files are byte-identical to
``tf.raw_ops.SaveV2``'s.

Write protocol (as TF's BundleWriter), through :mod:`ckptool.io.safety.atomic`: every
file, data shards and index alike, is written in full under a temporary name
beside its target and fsynced (unless ``sync=False``); only then are they
renamed into place, the data shards first and the index last, so that once
``PREFIX.index`` exists the checkpoint is complete, and a failure at any point
(a source that cannot be read, a full disk, a signal) leaves no temporary and
no data file without its index. An object store writes under the final names,
in the same order (:class:`~ckptool.io.safety.atomic.AtomicFile`). Memory is bounded
by the largest tensor: data is streamed to the shard file as each tensor is added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format import bundle, dtypes
from ckptool.format.bundle import Entry
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.encode import as_dtype, encode_tensor, key_bytes, np
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph, is_object_key
from ckptool.format.objkeys import key_of, name_of, shown
from ckptool.format.table_build import TableBuilder
from ckptool.format.table_sort import PackedEntries
from ckptool.io.backends.urls import storage_for
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from ckptool.format.slices import Slice
    from ckptool.io.base import Storage

#: Bytes per write() call, and between starts of the disk writeback when syncing.
WRITEBACK = 8 << 20
#: Tensors of at least this many bytes have their CRC32C computed on a helper thread
#: while their bytes are written: both release the GIL, so the checksum costs no time
#: where a second core is free (on one core, about what it costs inline).
CRC_BESIDE_BYTES = 1 << 20


class ChunkedOut:
    """A file written :data:`WRITEBACK` bytes at a time, its disk writes started every
    :data:`WRITEBACK` bytes when syncing: the final fsync then waits for the tail alone, not for
    the whole file. A checkpoint's data shards, ``.safetensors`` files and HF shards go through it."""

    def __init__(self, f: AtomicFile):
        self.f = f
        self.started = 0  # bytes whose writeback was started

    def put(self, buf: Any) -> int:
        """Write ``buf`` (any buffer); its length."""
        view = memoryview(buf).cast("B")
        for i in range(0, len(view), WRITEBACK):
            self.f.write(view[i:i + WRITEBACK])
            if self.f.sync and self.f.written - self.started >= WRITEBACK:
                self.f.start_writeback(self.started, self.f.written - self.started)
                self.started = self.f.written
        return len(view)


def retire_index(storage: Storage, prefix: str, finals: Iterable[str], sync: bool = True) -> bool:
    """Before data files are put in place over a checkpoint being replaced (``--force``),
    its ``.index`` goes if any of them would land on one of its data files (the same
    names): a crash in between must not leave the old index over new data, which fails
    verification. The checkpoint is then absent until the new index is in place. When
    no name collides the old checkpoint stays whole until the new index replaces it.
    Called once every new file is written (``publish``'s check), so always True."""
    index = bundle.index_filename(prefix)
    if storage.exists(index) and any(storage.exists(f) for f in finals):
        storage.remove(index)
        if sync:
            storage.fsync_dir(storage.dirname(prefix))
    return True


@dataclass
class WriteResult:
    """What a write produced."""

    prefix: str
    files: list[str]  # data shards, then the index
    variables: int  # entries written, slice entries excluded, the object graph included
    nbytes: int  # tensor bytes in the data shards
    object_graph: bool = False  # a synthesized object graph was added
    keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "files": list(self.files), "variables": self.variables,
                "bytes": self.nbytes}


class BundleWriter:
    """Write a V2 bundle tensor by tensor.

    ::

        with BundleWriter("out/ckpt-1") as w:
            w.add("w", np.zeros(3, np.float32))
        # PREFIX.index exists only once the block ends without an error

    ``num_shards > 1`` spreads tensors over that many data files, each tensor
    going to the shard holding the fewest bytes so far. ``force`` allows
    replacing an existing ``PREFIX.index`` (else :class:`RefusedError`).
    ``object_graph=True`` adds a synthesized ``_CHECKPOINTABLE_OBJECT_GRAPH``
    at :meth:`finish` when object-based keys were added without one.
    ``endianness`` is what the header records; :meth:`add` always encodes in
    the host's order, so a non-host value is only for :meth:`add_raw` copies.
    """

    def __init__(self, prefix: str, num_shards: int = 1, storage: Storage | None = None, force: bool = False,
                 object_graph: bool = False, endianness: int = bundle.HOST_ENDIANNESS,
                 sync: bool = True, sources: Iterable[str] = ()) -> None:
        if storage is None:
            storage, prefix = storage_for(prefix)
        if not isinstance(num_shards, int) or num_shards < 1:
            raise CkptError(f"{prefix}: the number of shards must be a positive integer, not {num_shards!r}")
        if not prefix or prefix.endswith(("/", storage.sep)):
            raise CkptError(f"{prefix!r}: a checkpoint prefix needs a file name part")
        self.prefix = prefix
        self.storage = storage
        self.num_shards = num_shards
        self.force = force
        self.endianness = endianness
        self.sync = sync
        self._auto_graph = object_graph
        self.index_path = bundle.index_filename(prefix)
        check_destination(storage, [self.index_path], force=force, sources=sources, label=prefix)
        self._entries: dict[bytes, bytes] = {}
        self._order: list[bytes] = []  # keys as added (listing order for results)
        self._slice_keys: set[bytes] = set()
        self._shard_bytes = [0] * num_shards
        self._files: list[AtomicFile] = []  # the data shards being written
        self._outs: list[ChunkedOut] = []  # each written through one
        self._crc_thread: ThreadPoolExecutor | None = None  # of one thread, started for the first big tensor
        self._closed = False
        self._finished = False
        make_output_dir(storage, storage.dirname(prefix))
        try:
            for i in range(num_shards):
                final = bundle.data_filename(prefix, i, num_shards)
                self._files.append(AtomicFile(storage, final, sync=sync))
                self._outs.append(ChunkedOut(self._files[-1]))
        except BaseException:
            self.abort()
            raise

    # -- context manager ---------------------------------------------------

    def __enter__(self) -> BundleWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            if not self._finished:
                self.finish()
        else:
            self.abort()

    # -- adding --------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise CkptError(f"{self.prefix}: the writer is already finished or aborted")

    def _claim(self, key: bytes) -> None:
        if key in self._entries:
            raise CkptError(f"{self.prefix}: adding duplicate key {shown(key)!r}")

    def _pick_shard(self) -> int:
        sizes = self._shard_bytes
        return min(range(len(sizes)), key=sizes.__getitem__)

    def _append(self, data: Any, shard: int) -> tuple[int, int]:
        """Write ``data`` (a buffer, or an iterable of buffers) to ``shard``; its offset and size."""
        offset = self._shard_bytes[shard]
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._write(shard, memoryview(data).cast("B"))
        elif hasattr(data, "__array_interface__"):  # an ndarray
            self._write(shard, memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8)))
        else:
            for chunk in data:
                self._write(shard, memoryview(chunk).cast("B"))
        return offset, self._shard_bytes[shard] - offset

    def _write(self, shard: int, view: memoryview) -> None:
        """Write to a shard (through its :class:`ChunkedOut`)."""
        self._shard_bytes[shard] += self._outs[shard].put(view)

    def add(self, name: str | bytes, value: object, shard: int | None = None) -> None:
        """Add a tensor: a numpy array (any TF dtype), a scalar, or bytes/str (DT_STRING)."""
        self._check_open()
        key = key_bytes(name)
        self._claim(key)
        dt, shape, data, crc = encode_tensor(key, value, checksum=False)
        shard = self._pick_shard() if shard is None else shard
        if crc is not None or data.nbytes < CRC_BESIDE_BYTES:  # type: ignore[union-attr]  # an ndarray
            crc = crc32c(data) if crc is None else crc
            offset, size = self._append(data, shard)
        else:
            if self._crc_thread is None:
                from concurrent.futures import ThreadPoolExecutor

                self._crc_thread = ThreadPoolExecutor(1, thread_name_prefix="ckptool-crc")
            pending = self._crc_thread.submit(crc32c, data)
            try:
                offset, size = self._append(data, shard)
            finally:
                crc = pending.result()
        self._entries[key] = bundle.encode_entry(dt, shape, shard, offset, size, mask_crc(crc))
        self._order.append(key)

    def add_raw(self, key: str | bytes, entry: Entry, data: Any, shard: int | None = None) -> None:
        """Copy a tensor's stored bytes (from another checkpoint) without decoding them.

        ``data`` is the entry's bytes exactly as stored (a buffer, or an iterable of
        buffers for big tensors); dtype, shape, size and the CRC are kept from
        ``entry``, only the shard and offset are rewritten. An entry with slices
        (a partitioned tensor's full entry) carries no data: pass ``data=None``.
        """
        self._check_open()
        key = key_bytes(key)
        self._claim(key)
        if entry.slices:
            if data not in (None, b""):
                raise CkptError(f"{self.prefix}: {shown(key)!r} is a sliced entry and holds no data")
            self._check_tiling(key, entry.shape, entry.slices)
            self._add_full_entry(key, entry.dtype, entry.shape, entry.slices)
            return
        shard = self._pick_shard() if shard is None else shard
        offset, size = self._append(b"" if data is None else data, shard)
        if size != entry.size:
            raise CkptError(f"{self.prefix}: copying {shown(key)!r}: got {size} bytes, its entry says "
                            f"{entry.size}")
        self._entries[key] = bundle.encode_entry(entry.dtype, entry.shape, shard, offset, size,
                                                 entry.crc32c)
        self._order.append(key)

    def add_sliced(self, key: str | bytes, dtype: Any, full_shape: Iterable[int],
                   slices: Iterable[Iterable[tuple[int, int]]]) -> None:
        """The full-tensor entry of a partitioned tensor: dtype, full shape, its slices.

        Each slice's data is added separately, under
        ``bundle.encode_tensor_name_slice(key, slice)``, with :meth:`add` or
        :meth:`add_raw`. A slice is a tuple of ``(start, length)`` per dimension,
        length -1 for a whole dimension.
        """
        self._check_open()
        key = key_bytes(key)
        self._claim(key)
        shape = tuple(int(d) for d in full_shape)
        bundle.check_shape(shape, f"tensor {shown(key)!r}")
        norm = tuple(tuple((int(s), int(n)) for s, n in sl) for sl in slices)
        self._check_tiling(key, shape, norm)
        self._add_full_entry(key, as_dtype(dtype), shape, norm)

    def _check_tiling(self, key: bytes, shape: Sequence[int], slices: Sequence[Slice]) -> None:
        """Refuse slices that do not tile ``shape`` exactly once (the reader's rule)."""
        problem = bundle.tiling_problem(shape, slices)
        if problem is not None:
            raise CkptError(f"{self.prefix}: partitioned tensor {shown(key)!r}: {problem}")

    def _add_full_entry(self, key: bytes, dt: dtypes.DType, shape: Sequence[int], slices: Sequence[Slice]) -> None:
        self._entries[key] = bundle.encode_entry(dt, shape, 0, 0, 0, 0, slices)
        self._order.append(key)
        for sl in slices:
            self._slice_keys.add(bundle.encode_tensor_name_slice(key, sl))

    def __contains__(self, name: object) -> bool:
        return key_bytes(name) in self._entries

    # -- finishing -----------------------------------------------------------

    def finish(self) -> WriteResult:
        """Close and rename the data shards, then write the index; the checkpoint exists after this."""
        self._check_open()
        synthesized = False
        try:
            if self._auto_graph and key_of(OBJECT_GRAPH_KEY) not in self._entries:
                names = [name_of(k) for k in self._order
                         if k not in self._slice_keys]
                if any(is_object_key(n) for n in names):
                    graph = ObjectGraph.from_keys(names)
                    self.add(OBJECT_GRAPH_KEY, graph.serialize())
                    synthesized = True
            index = index_file(self.storage, self.prefix, self.num_shards, self._entries.items(),
                               self.endianness, self.sync)
            finals = [f.target for f in self._files]
            check = (lambda: retire_index(self.storage, self.prefix, finals, self.sync)) if self.force else None
            self._files.append(index)
            publish(self._files, check=check)
            self._files.pop()
            old = self._stale_shards() if self.force else []
        except BaseException:
            self.abort()
            raise
        self._closed = True
        self._finished = True
        self._stop_crc_thread()
        for path in old:
            try:
                self.storage.remove(path)
            except OSError:
                pass
        hidden = self._slice_keys
        listed = [k for k in self._order if k not in hidden]
        return WriteResult(self.prefix, [f.target for f in self._files] + [self.index_path], len(listed),
                           sum(self._shard_bytes), synthesized,
                           [name_of(k) for k in listed])

    def _stale_shards(self) -> list[str]:
        """Data files of a checkpoint being replaced that the new one does not use."""
        st = self.storage
        d = st.dirname(self.prefix)
        ours = {st.basename(f.target) for f in self._files}
        from ckptool.io.layout.checkpoints import data_shards

        return [st.join(d, n) if d else n for n in data_shards(st, self.prefix) if n not in ours]

    def abort(self) -> None:
        """Close and delete the temporary files; idempotent."""
        self._closed = True
        self._stop_crc_thread()
        for f in self._files:
            f.discard()

    def _stop_crc_thread(self) -> None:
        if self._crc_thread is not None:
            self._crc_thread.shutdown()
            self._crc_thread = None


def index_file(storage: Storage, prefix: str, num_shards: int, entries: Iterable[tuple[bytes, bytes]],
               endianness: int = bundle.HOST_ENDIANNESS, sync: bool = True) -> AtomicFile:
    """``PREFIX.index`` (the header and ``entries``, sorted here) written in full under a
    temporary name, not yet published: pass it last to :func:`ckptool.io.safety.atomic.publish`."""
    path = bundle.index_filename(prefix)
    items = PackedEntries(entries)  # held packed, not as a list of pairs (a few bytes an entry)
    prev = None
    for k in items.keys():
        if not k:
            raise CkptError(f"{path}: the empty key is reserved for the bundle header")
        if prev == k:
            raise CkptError(f"{path}: duplicate key {shown(k)!r}")
        prev = k
    make_output_dir(storage, storage.dirname(prefix))
    f = AtomicFile(storage, path, sync=sync)
    try:
        table = TableBuilder(f)
        table.add(bundle.HEADER_KEY, bundle.encode_header(num_shards, endianness))
        for k, v in items:
            table.add(k, v)
        table.finish()
    except BaseException:
        f.discard()
        raise
    return f


def write_index(prefix: str, num_shards: int, entries: Iterable[tuple[bytes, bytes]], storage: Storage | None = None,
                force: bool = False, endianness: int = bundle.HOST_ENDIANNESS, sync: bool = True) -> str:
    """Write only ``PREFIX.index`` (temp file, then rename): the header and ``entries``.

    ``entries`` are ``(key, serialized BundleEntryProto)`` pairs. Used directly to
    re-point an index at data files that were copied or hard-linked whole. Returns the
    index path.
    """
    if storage is None:
        storage, prefix = storage_for(prefix)
    path = bundle.index_filename(prefix)
    check_destination(storage, [path], force=force)
    publish([index_file(storage, prefix, num_shards, entries, endianness, sync)])
    return path


def write(prefix: str, mapping: Mapping[Any, object] | Iterable[tuple[Any, object]], *, num_shards: int = 1,
          force: bool = False, storage: Storage | None = None, sync: bool = True) -> WriteResult:
    """Write ``{name: array}`` as a V2 checkpoint at ``prefix`` that TensorFlow restores.

    Values are numpy arrays of any TF dtype (ml_dtypes for bfloat16 / float8 /
    int4, TF's structured quantized dtypes), scalars, or bytes/str and object or
    bytes arrays for DT_STRING. ``mapping`` may also be an iterable of
    ``(name, value)`` pairs (a generator streams: one tensor in memory at a time).
    Data is appended in mapping order. Keys of the object-based form
    (``a/b/.ATTRIBUTES/VARIABLE_VALUE``) get a synthesized
    ``_CHECKPOINTABLE_OBJECT_GRAPH`` unless the mapping has one.
    """
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    with BundleWriter(prefix, num_shards=num_shards, storage=storage, force=force,
                      object_graph=True, sync=sync) as w:
        for name, value in items:
            w.add(name, value)
        return w.finish()


__all__ = ["write", "write_index", "index_file", "BundleWriter", "ChunkedOut", "WriteResult", "encode_tensor"]
