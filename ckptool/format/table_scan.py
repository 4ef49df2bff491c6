"""Every entry of a table, in bulk: keys as names, values as offsets into the table's bytes.

Listing a checkpoint is this scan. Entry by entry in Python it costs a loop of a dozen
steps per entry (three varints, two slices, a comparison, two appends); here the work
per entry that Python must do is one slice and one concatenation (the key rebuilt
from its shared prefix), and the rest is done with numpy a restart group at a time:

* every block entry's three varints are read for all restart groups at once, one step
  per entry of a group (TF writes a restart point every 16 entries: 16 steps for the
  whole table, whatever its size);
* values are not copied: each is a ``(start, end)`` into the table's bytes, sliced when
  an entry is parsed (:class:`TableEntries`);
* keys are rebuilt as text (the table's bytes read as Latin-1, one character a byte, so
  that string slices are byte slices) and checked strictly increasing by comparing the
  strings, which compare as their bytes do; names that are not ASCII are decoded from
  UTF-8 afterwards, as :func:`ckptool.format.objkeys.name_of` decodes a key.

The CRC32C of every block is checked before its entries are read, as
:meth:`ckptool.format.table.TableReader.scan` checks it. Anything this path does not
expect (a compressed block, restart points that do not start the groups of entries the
blocks hold, an entry that runs past its group, a key at a restart point that shares a
prefix, keys out of order) makes :func:`bulk_entries` return None: the caller then
scans entry by entry, which reads every table TF can write and names what is wrong
with one that is damaged. Small tables are scanned entry by entry too (numpy is not
imported to list a small checkpoint).
"""

from __future__ import annotations

from array import array
from itertools import islice
from operator import lt
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format.coding import FIXED32, MAX_VARINT32_BYTES, decode_varint
from ckptool.format.objkeys import name_of

if TYPE_CHECKING:
    import numpy as np

#: Tables of at least this many bytes are scanned in bulk (about 2,000 entries).
BULK_MIN_BYTES = 64 << 10
#: A restart group of more entries than this (TF writes 16) is left to the entry-by-entry scan.
MAX_GROUP = 64
#: Keys rebuilt this many at a time (bounds the Python ints their positions take).
CHUNK = 8192


class TableEntries:
    """The entries of a table after its header, in key order: ``names[i]`` (the key as
    :func:`~ckptool.format.objkeys.name_of` gives it) and :meth:`value` ``(i)``, the
    value's bytes, sliced from the table's bytes when asked for (or held, when the table
    was scanned entry by entry)."""

    __slots__ = ("buf", "names", "starts", "ends", "values", "ascii")

    def __init__(self, names: list[str], buf: bytes | bytearray = b"", starts: array[int] | None = None,
                 ends: array[int] | None = None, values: list[bytes] | None = None):
        self.names = names
        self.buf = buf
        self.starts = array("q") if starts is None else starts
        self.ends = array("q") if ends is None else ends
        self.values = values
        #: every name ASCII (read in bulk): they sort as strings as their keys sort as bytes
        self.ascii = False

    def __len__(self) -> int:
        return len(self.names)

    def value(self, i: int) -> bytes:
        if self.values is not None:
            return self.values[i]
        return bytes(self.buf[self.starts[i]:self.ends[i]])

    def drop_first(self) -> None:
        """Forget the first entry (a bundle's header, once parsed)."""
        del self.names[0]
        if self.values is not None:
            del self.values[0]
        else:
            del self.starts[0], self.ends[0]

    def all_values(self) -> list[bytes]:
        """Every value (as many bytes objects)."""
        if self.values is not None:
            return self.values
        buf = self.buf
        return [bytes(buf[a:b]) for a, b in zip(self.starts, self.ends)]


def bulk_entries(buf: bytes | bytearray, blocks: list[tuple[int, int, memoryview | bytes]]
                 ) -> TableEntries | None:
    """Every entry of the data ``blocks`` (each ``(offset, size, verified contents)`` of a
    block of the table ``buf``, as its handle gives them), header included; None when the
    table is not laid out as this path expects (see the module doc)."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    starts, ends, limits = [], [], []
    for off, n, contents in blocks:
        if not isinstance(contents, memoryview) or contents.obj is not buf:
            return None  # decompressed: not in ``buf``
        if n < 4:
            return None
        (nr,) = FIXED32.unpack_from(buf, off + n - 4)
        if nr > (n - 4) // 4:
            return None
        limit = n - 4 - 4 * nr
        if nr == 0:
            if limit:
                return None
            continue
        r = np.frombuffer(buf, "<u4", nr, off + limit).astype(np.int64)
        if r[0] != 0 or r[-1] >= limit or (nr > 1 and bool((r[1:] <= r[:-1]).any())):
            return None
        e = np.empty(nr, np.int64)
        e[:-1] = r[1:]
        e[-1] = limit
        starts.append(r + off)
        ends.append(e + off)
        limits.append(np.full(nr, off + limit, np.int64))
    if not starts:
        return TableEntries([], buf)
    got = _groups(buf, u8, np.concatenate(starts), np.concatenate(ends), np.concatenate(limits))
    if got is None:
        return None
    shared, key_start, key_end, value_end = got
    text = buf.decode("latin-1")  # one character a byte: string slices are byte slices
    # a key is the previous one's first ``s`` characters and its own; consecutive keys often
    # share as many (a scope's variables): that prefix is then the one just made
    names: list[str] = []
    key = prefix = ""
    last = -1
    for lo in range(0, len(shared), CHUNK):  # a chunk at a time: its positions as ints, not all
        part = slice(lo, lo + CHUNK)
        names += [key := (prefix if s == last else (prefix := key[:(last := s)])) + text[a:b]
                  for s, a, b in zip(shared[part].tolist(), key_start[part].tolist(), key_end[part].tolist())]
    del text
    if not all(map(lt, names, islice(names, 1, None))):
        return None  # out of order (or repeated): the entry-by-entry scan says where
    ascii = all("".join(names[lo:lo + CHUNK]).isascii() for lo in range(0, len(names), CHUNK))
    if not ascii:
        names = [name_of(n.encode("latin-1")) for n in names]
    out_start, out_end = array("q"), array("q")
    out_start.frombytes(key_end.astype("=i8").tobytes())
    out_end.frombytes(value_end.astype("=i8").tobytes())
    out = TableEntries(names, buf, out_start, out_end)
    out.ascii = ascii
    return out


def _groups(buf: bytes | bytearray, u8: np.ndarray, start: np.ndarray, end: np.ndarray, limit: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(shared, key start, key end, value end)`` of every entry, in order: the entries of
    each restart group ``[start, end)`` read one step per entry, all groups at once."""
    import numpy as np

    groups = len(start)
    active = np.arange(groups)
    cur = start
    prev_len = np.zeros(groups, np.int64)
    steps = []
    for step in range(MAX_GROUP + 1):
        if step == MAX_GROUP:
            return None
        # cur < end <= limit <= the block's size - 4: the three bytes are there
        b0, b1, b2 = u8[cur].astype(np.int64), u8[cur + 1].astype(np.int64), u8[cur + 2].astype(np.int64)
        key_start = cur + 3
        long = np.flatnonzero((b0 | b1 | b2) >= 0x80)
        if len(long):  # a varint of more than one byte: read those entries one by one
            key_start = key_start.copy()
            for i in long.tolist():
                pos, lim = int(cur[i]), int(limit[active[i]])
                try:
                    b0[i], pos = decode_varint(buf, pos, lim, MAX_VARINT32_BYTES)
                    b1[i], pos = decode_varint(buf, pos, lim, MAX_VARINT32_BYTES)
                    b2[i], pos = decode_varint(buf, pos, lim, MAX_VARINT32_BYTES)
                except CkptError:
                    return None
                key_start[i] = pos
        if step == 0:
            if b0.any():
                return None  # a key at a restart point shares no prefix
        elif bool((b0 > prev_len).any()):
            return None
        key_end = key_start + b1
        value_end = key_end + b2
        group_end = end[active]
        if bool((value_end > group_end).any()):
            return None
        steps.append((active, b0, key_start, key_end, value_end))
        more = value_end < group_end
        if not more.any():
            break
        active, cur, prev_len = active[more], value_end[more], (b0 + b1)[more]
    # entry order: group by group, each group's steps in turn
    width = len(steps)
    out = [np.full((groups, width), -1, np.int64) for _ in range(4)]
    for j, (act, *cols) in enumerate(steps):
        for o, c in zip(out, cols):
            o[act, j] = c
    kept = out[0].reshape(-1) >= 0
    shared, key_start, key_end, value_end = (o.reshape(-1)[kept] for o in out)
    return shared, key_start, key_end, value_end
