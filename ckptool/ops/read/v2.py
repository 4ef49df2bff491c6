"""Reading a V2 tensor bundle: ``PREFIX.index`` plus ``PREFIX.data-*`` shards.

Opening reads the ``.index`` (its footer first) and splits it into keys and
serialized entries; nothing else. Listing decodes only what it shows, a
lookup is one dict probe, and an entry is parsed when it is first needed. A
tensor is read lazily from its shard with positioned reads straight into the
array it becomes, its CRC32C checked unless ``verify=False``; only the shards
that entries reference are ever opened.
"""

from __future__ import annotations

import threading
import warnings
from bisect import bisect_left
from collections.abc import Iterator
from itertools import repeat
from typing import TYPE_CHECKING

from ckptool.errors import CkptWarning, CorruptError, MissingError, TensorNotFoundError, UnsupportedError
from ckptool.format import bundle, dtypes, tensors
from ckptool.format.bundle import Entry
from ckptool.format.bundle_heads import group_entries, members, picked
from ckptool.format.coding import crc32c
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.slices import key_text, slice_text
from ckptool.format.table import read_table
from ckptool.io.layout.checkpoints import Located
from ckptool.ops.read import shards
from ckptool.ops.read.checkpoint import (
    Checkpoint,
    Variable,
    check_numpy_shape,
    check_tiling,
    gc_paused,
    key_of,
    name_of,
)

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.slices import Slice
    from ckptool.io.base import Reader

#: Parsed entries kept at most (a few hundred bytes each).
ENTRY_CACHE = 4096
#: Up to this many shards, :meth:`BundleCheckpoint.shard_paths` names every shard the
#: header counts; above it (a header can claim 2^31 - 1), only those entries reference.
SHARD_LIST_MAX = 4096


class BundleCheckpoint(Checkpoint):
    """A V2 tensor bundle."""

    def __init__(self, located: Located):
        super().__init__(located)
        self.index_path = bundle.index_filename(self.prefix)
        reader = self.storage.open_reader(self.index_path)
        try:
            table = read_table(reader, self.index_path)
        finally:
            reader.close()
        self.index_size = table.size
        with gc_paused():
            entries = table.entries()
        del table
        if not len(entries):
            raise CorruptError(f"{self.index_path}: table has no header entry")
        if entries.names[0] != "":
            raise CorruptError(f"{self.index_path}: first entry is not the bundle header")
        self.header = bundle.parse_header(entries.value(0), self.index_path)
        entries.drop_first()
        self._table = entries  # names once, values as offsets into the index's bytes
        # Slice keys (EncodeTensorNameSlice) start with a NUL byte and so sort first.
        self._may_slice = bool(len(entries)) and entries.names[0][:1] == "\x00"
        self._pos: dict[str, int] | None = None
        self._entries: dict[int, Entry] = {}
        self._variables: list[Variable] | None = None
        self._slice_keys: set[bytes] | None = None
        self._readers: dict[int, Reader] = {}
        self._missing: dict[int, str] = {}
        self._lock = threading.Lock()

    # -- index ---------------------------------------------------------------

    def _index(self) -> dict[str, int]:
        """Name -> position in the index (slice keys included), built once."""
        if self._pos is None:
            names = self._table.names
            self._pos = dict(zip(names, range(len(names))))
        return self._pos

    def _position(self, name: str) -> int | None:
        """The position of ``name`` in the index, or None: a binary search of the names when
        they sort as strings as their keys sort as bytes (ASCII names: a big index read in
        bulk), which takes no memory; else a probe of :meth:`_index`."""
        names = self._table.names
        if self._table.ascii:
            i = bisect_left(names, name)
            return i if i < len(names) and names[i] == name else None
        return self._index().get(name)

    def _entry_at(self, i: int, key: bytes | None = None) -> Entry:
        """Entry ``i`` (whose key is ``key``, when the caller has it), parsed, kept among the last
        :data:`ENTRY_CACHE` used (an operation asks for a tensor's entry a few times in a row;
        memory stays flat, whatever the count)."""
        e = self._entries.get(i)
        if e is None:
            if len(self._entries) >= ENTRY_CACHE:
                self._entries.clear()
            e = self._entries[i] = bundle.parse_entry(key_of(self._table.names[i]) if key is None else key,
                                                      self._table.value(i), self.index_path)
        return e

    def entry(self, key: bytes) -> Entry:
        i = self._position(name_of(key))
        if i is None:
            raise TensorNotFoundError(f"{self.prefix}: key {key!r} not found in checkpoint")
        return self._entry_at(i, key if type(key) is bytes else None)

    def keys(self) -> list[bytes]:
        """Every key of the index but the header, slice keys included, sorted."""
        return list(map(key_of, self._table.names))

    def raw_entry(self, key: bytes) -> bytes:
        """The serialized BundleEntryProto of ``key``, exactly as stored."""
        i = self._position(name_of(key))
        if i is None:
            raise TensorNotFoundError(f"{self.prefix}: key {key!r} not found in checkpoint")
        return bytes(self._table.value(i))

    def _all_entries(self) -> list[Entry]:
        """Every entry parsed (once), in key order."""
        return [self._entry_at(i) for i in range(len(self._table))]

    def slice_keys(self) -> set[bytes]:
        """Keys of the slice entries that partitioned tensors refer to (hidden from listings)."""
        if self._slice_keys is None:
            if not self._may_slice:
                self._slice_keys = set()
            else:
                enc = bundle.encode_tensor_name_slice
                self._slice_keys = {enc(e.key, sl) for e in self._all_entries() if e.slices for sl in e.slices}
        return self._slice_keys

    def names(self) -> list[str]:
        """The variable names, sorted: an index without slice keys lists them itself (no
        :class:`Variable` made for each, as a rename of 100,000 needs none)."""
        if self._may_slice or self._variables is not None:
            return super().names()
        return list(self._table.names)

    def variables(self) -> list[Variable]:
        if self._variables is None:
            with gc_paused(keep=True):
                out = self._list_plain() if not self._may_slice else None
                self._variables = out if out is not None else self._list_all()
        return self._variables

    def _list_plain(self) -> list[Variable] | None:
        """The listing of an index without slice keys, built in bulk from each entry's
        dtype and shape fields (parsed once per distinct serialization); None if an
        entry turns out to be partitioned after all (its slices then have no entries:
        :meth:`_list_all` says so)."""
        names = self._table.names
        ids, heads = group_entries(self._table)
        info = [bundle.listing_head(h) for h in heads]
        # dtype, shape and size from each entry's group; a group listing_head cannot read (a string
        # tensor, an entry not laid out as TF writes it) is parsed entry by entry
        odd = {k for k, g in enumerate(info) if g is None}
        rows = [picked([g[k] if g is not None else None for g in info], ids) for k in (1, 2, 3)]
        out: list[Variable] = list(map(tuple.__new__, repeat(Variable), zip(names, *rows, repeat(0))))
        if odd:
            for i in members(ids, odd):
                e = self._entry_at(i)
                if e.slices:
                    return None
                out[i] = Variable(names[i], e.dtype.name, e.shape, e.size, 0)
        return out

    def _list_all(self) -> list[Variable]:
        hidden = self.slice_keys()
        out = []
        for e in self._all_entries():
            if e.key in hidden:
                continue
            if not e.slices:
                out.append(Variable(name_of(e.key), e.dtype.name, e.shape, e.size, 0))
                continue
            stored = {}  # a slice listed twice is stored once
            for sl in e.slices:
                part = self.slice_entry(e, sl)
                stored[part.key] = part.size
            out.append(Variable(name_of(e.key), e.dtype.name, e.shape, sum(stored.values()), len(e.slices)))
        return out

    def __contains__(self, name: str) -> bool:
        return self._position(name) is not None and (not self._may_slice or key_of(name) not in self.slice_keys())

    def variable(self, name: str) -> Variable:
        if self._may_slice:  # positions in the index are not positions in the listing
            return super().variable(name)
        i = self._position(name)
        if i is None:
            raise self._not_found(name)
        return (self._variables if self._variables is not None else self.variables())[i]

    def lookup(self, name: str) -> Entry:
        """The entry of tensor ``name`` (a slice entry's key is no tensor's name)."""
        i = self._position(name)
        if i is None or (self._may_slice and key_of(name) in self.slice_keys()):
            raise self._not_found(name)
        return self._entry_at(i)

    def slice_entry(self, full: Entry, sl: Slice) -> Entry:
        """The entry of slice ``sl`` of partitioned ``full``, checked to agree with it."""
        i = self._position(name_of(bundle.encode_tensor_name_slice(full.key, sl)))
        if i is None:
            raise CorruptError(
                f"{self.index_path}: slice {slice_text(name_of(full.key), sl)!r} has no entry in the index"
            )
        e = self._entry_at(i)
        if e.slices:
            raise CorruptError(f"{self.index_path}: slice entry of {name_of(full.key)!r} is itself sliced")
        if e.dtype != full.dtype:
            raise CorruptError(f"{self.index_path}: slice of {name_of(full.key)!r} has dtype {e.dtype.name}, "
                               f"the tensor {full.dtype.name}")
        if e.shape != bundle.slice_shape(sl, full.shape):
            raise CorruptError(f"{self.index_path}: slice {slice_text(name_of(full.key), sl)!r} has shape "
                               f"{list(e.shape)}")
        return e

    def slice_parts(self, e: Entry) -> list[tuple[Entry, tuple[slice, ...]]]:
        """``(slice entry, numpy region)`` of each slice of partitioned ``e``, after
        checking that they tile its shape exactly once and that each lies inside its
        data file: all from the index and file sizes, before anything is allocated."""
        check_tiling(e.slices, e.shape, self.index_path, name_of(e.key))
        parts = []
        for sl in e.slices:
            part = self.slice_entry(e, sl)
            self.shard_reader(part)
            parts.append((part, bundle.slice_region(sl, e.shape)))
        return parts

    # -- data ----------------------------------------------------------------

    def shard_path(self, shard_id: int) -> str:
        return bundle.data_filename(self.prefix, shard_id, self.header.num_shards)

    def referenced_shards(self) -> list[int]:
        """The shard ids that entries name, sorted (entries that do not parse are skipped)."""
        ids = set()
        for i in range(len(self._table)):
            try:
                e = self._entry_at(i)
            except CorruptError:
                continue
            if not e.slices:
                ids.add(e.shard_id)
        return sorted(ids)

    def shard_paths(self) -> list[str]:
        """Every shard's path, or, above :data:`SHARD_LIST_MAX`, those entries reference."""
        n = self.header.num_shards
        ids = range(n) if n <= SHARD_LIST_MAX else [i for i in self.referenced_shards() if i < n]
        return [self.shard_path(i) for i in ids]

    def missing_shards(self) -> tuple[int, list[tuple[int, int]]]:
        """The shards the header counts that have no data file (:func:`shards.missing_shards`)."""
        return shards.missing_shards(self.storage, self.prefix, self.header.num_shards)

    def _reader(self, shard_id: int, key: bytes) -> Reader:
        if not 0 <= shard_id < self.header.num_shards:
            raise CorruptError(
                f"{self.index_path}: entry {key_text(key)!r} names shard {shard_id}, "
                f"but the header says num_shards = {self.header.num_shards}"
            )
        r = self._readers.get(shard_id)
        if r is None:
            with self._lock:
                r = self._readers.get(shard_id)
                if r is None:
                    path = self.shard_path(shard_id)
                    if shard_id in self._missing:
                        raise MissingError(f"{self._missing[shard_id]} (needed for {key_text(key)!r})")
                    try:
                        r = self.storage.open_reader(path)
                    except MissingError:
                        r = self._misnumbered_shard(shard_id)
                        if r is None:
                            self._missing[shard_id] = (f"{path}: data shard {shard_id} of "
                                                       f"{self.header.num_shards} is missing")
                            raise MissingError(f"{self._missing[shard_id]} (needed for {key_text(key)!r})") from None
                    self._readers[shard_id] = r
        return r

    def _misnumbered_shard(self, shard_id: int) -> Reader | None:
        """The data file of ``shard_id`` under another count of shards (docs/FORMAT.md §1.3),
        when it is the only candidate."""
        path = shards.misnumbered_shard(self.storage, self.prefix, shard_id)
        if path is None:
            return None
        warnings.warn(f"{self.index_path}: header says {self.header.num_shards} shards; "
                      f"reading shard {shard_id} from {path}", CkptWarning, stacklevel=5)
        return self.storage.open_reader(path)

    def shard_reader(self, e: Entry) -> Reader:
        """The reader of plain entry ``e``'s data file, once its bytes are known to lie inside it."""
        reader = self._reader(e.shard_id, e.key)
        if e.offset + e.size > reader.size:
            raise CorruptError(
                f"{reader.path}: tensor {key_text(e.key)!r} at offset {e.offset} ({e.size} bytes) runs past "
                f"the end of the file ({reader.size} bytes)"
            )
        return reader

    def iter_fixed(self, e: Entry, buf: memoryview, verify: bool = True) -> Iterator[memoryview]:
        """The stored bytes of plain fixed-size entry ``e``, read into ``buf`` a part at a time
        (each part a prefix of ``buf``: use it before asking for the next), their CRC32C chained
        across the parts and checked after the last unless told not to."""
        reader = self.shard_reader(e)
        crc, pos, end = 0, e.offset, e.offset + e.size
        while pos < end:
            part = buf[:min(len(buf), end - pos)]
            reader.readinto(pos, part)
            if verify:
                crc = crc32c(part, crc)
            pos += len(part)
            yield part
        if verify:
            tensors.check_crc_value(crc, e, reader.path, e.size)

    def read_raw(self, e: Entry, verify: bool = True) -> bytearray:
        """The stored bytes of a plain (unsliced) entry, CRC-checked unless told not to."""
        reader = self.shard_reader(e)
        buf = reader.read(e.offset, e.size)
        if verify and e.dtype.is_fixed:
            tensors.check_crc(buf, e, reader.path)
        return buf

    def _read_plain(self, e: Entry, verify: bool) -> np.ndarray:
        if not e.dtype.is_fixed:
            return tensors.object_array(self.varlen_values(e, verify), e.shape)
        import numpy as np
        reader = self.shard_reader(e)
        raw = np.empty(e.numel, dtype=e.dtype.numpy).view(np.uint8)  # aligned for the dtype: read in place
        if e.size:
            reader.readinto(e.offset, raw)
        if verify:
            tensors.check_crc(raw, e, reader.path)
        return tensors.decode_fixed(raw, e, self.header.swaps(e.dtype))

    def varlen_values(self, e: Entry, verify: bool = True) -> list[bytes]:
        """The elements of a plain string or variant entry, as bytes (no numpy needed)."""
        reader = self.shard_reader(e)
        buf = reader.read(e.offset, e.size)
        if e.dtype.kind == dtypes.STRING:
            return tensors.string_values(buf, e, self.header.big_endian, reader.path, verify)
        if self.header.big_endian:
            raise UnsupportedError(f"{reader.path}: big-endian variant tensor {key_text(e.key)!r}")
        return tensors.variant_values(buf, e, reader.path, verify)

    def object_graph_bytes(self) -> bytes | None:
        """The serialized object graph of an object-based checkpoint, else None; its string scalar
        is decoded without numpy (as :meth:`varlen_values` reads strings)."""
        if not self.is_object_based:
            return None
        e = self.lookup(OBJECT_GRAPH_KEY)
        if e.dtype.kind != dtypes.STRING or e.slices or e.numel != 1:
            raise CorruptError(f"{self.prefix}: {OBJECT_GRAPH_KEY} is not a string scalar "
                               f"({e.dtype.name} {list(e.shape)})")
        return self.varlen_values(e, True)[0]

    def read(self, name: str, verify: bool = True) -> np.ndarray:
        e = self.lookup(name)
        check_numpy_shape(e.shape, e.dtype, f"{self.index_path}: tensor {name!r}")
        if not e.slices:
            return self._read_plain(e, verify)
        import numpy as np

        parts = self.slice_parts(e)  # checked before the full shape is allocated
        out = np.empty(e.shape, dtype=e.dtype.numpy)
        for part, region in parts:
            out[region] = self._read_plain(part, verify)
        return out

    def plain_entries(self) -> Iterator[Entry]:
        """Every entry that holds data (slice entries included), in key order."""
        for i in range(len(self._table)):
            e = self._entry_at(i)
            if not e.slices:
                yield e

    def release_shard(self, shard_id: int) -> None:
        """Close shard ``shard_id``'s file (reopened if read again): bounds the files held open."""
        with self._lock:
            r = self._readers.pop(shard_id, None)
        if r is not None:
            r.close()

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()

