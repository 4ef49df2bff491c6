"""The entries of a big index grouped by their leading ``dtype`` and ``shape`` fields, with numpy.

Listing reads a tensor's dtype and shape from those fields alone
(:func:`ckptool.format.bundle.listing_head`), parsed once per distinct serialization:
a checkpoint of 300,000 variables has a few dozen. :func:`group_heads` finds which
entries share a serialization without a Python step per entry: the head bytes of every
entry are read as 8-byte words (a column of words per 8 bytes of the longest head), hashed,
grouped by the hash, and each entry's words compared with its group's first (a hash that two
heads share never merges them: the comparison finds it, and the caller groups entry by entry).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.table_scan import TableEntries

#: Heads are compared in words of this many bytes, up to :data:`MAX_HEAD` bytes.
WORD = 8
MAX_HEAD = 64


def group_heads(buf: bytes | bytearray, starts: array[int], ends: array[int]) -> tuple[np.ndarray, list[bytes]] | None:
    """``(group of each entry, head of each group)`` (the groups a numpy array) for the entries whose values are
    ``buf[starts[i]:ends[i]]`` (``starts`` and ``ends`` int64 buffers). An entry's head is
    its ``dtype`` and ``shape`` fields when it begins with them as TF writes them (tag 0x08,
    a one-byte dtype, tag 0x12, a one-byte length; :func:`ckptool.format.bundle._entry_head`),
    else its whole value. None when a head is longer than :data:`MAX_HEAD` bytes (or lies
    too close to the end of the table to read in words), or two heads hash alike."""
    import numpy as np

    u8 = np.frombuffer(buf, np.uint8)
    s = np.frombuffer(starts, np.int64)
    e = np.frombuffer(ends, np.int64)
    n = len(s)
    if not n:
        return np.zeros(0, np.int64), []
    size = e - s
    at = np.where(size >= 4, s, 0)  # an entry under 4 bytes reads the table's first (its head is itself)
    b1, b3 = u8[at + 1], u8[at + 3].astype(np.int64)
    tf = (size >= 4) & (u8[at] == 0x08) & (b1 < 0x80) & (u8[at + 2] == 0x12) & (b3 < 0x80) & (4 + b3 <= size)
    length = np.where(tf, 4 + b3, size)
    longest = int(length.max())
    if longest > MAX_HEAD or int((s + longest).max()) > len(buf) - WORD:
        return None  # a long head, or one too close to the end of the table to read in words
    # every byte offset of the table as the start of a little-endian 8-byte word (no copy)
    word_at = np.ndarray((len(buf) - WORD + 1,), "<u8", buf, 0, (1,))
    masks = np.array([(1 << (8 * k)) - 1 for k in range(WORD + 1)], np.uint64)
    columns = [word_at[s + j] & masks[np.clip(length - j, 0, WORD)] for j in range(0, longest, WORD)]
    with np.errstate(over="ignore"):
        hashes = length.astype(np.uint64)
        for j, col in enumerate(columns):
            hashes = hashes * np.uint64(0x9E3779B97F4A7C15) + col + np.uint64(j)
    first, group = _grouped(hashes)
    for col in [length, *columns]:  # every head the same bytes as its group's first: no collision
        if bool((col != col[first][group]).any()):
            return None
    heads = [bytes(buf[int(s[i]):int(s[i]) + int(length[i])]) for i in first.tolist()]
    return group, heads


#: Up to this many distinct heads, each group is found with one comparison of every hash.
FEW = 32


def _grouped(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first entry of each group, group of each entry)`` of equal ``hashes``, groups in order
    of first appearance when there are few (a pass over the hashes each), else in hash order."""
    import numpy as np

    group = np.full(len(hashes), -1, np.int64)
    first: list[int] = []
    at = 0
    while at >= 0 and len(first) < FEW:
        first.append(at)
        group[hashes == hashes[at]] = len(first) - 1
        left = np.flatnonzero(group < 0)
        at = int(left[0]) if len(left) else -1
    if at < 0:
        return np.array(first, np.int64), group
    _, where, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    return where, inverse.reshape(-1)


def group_entries(table: TableEntries) -> tuple[np.ndarray | list[int], list[bytes]]:
    """``(group of each entry, head of each group)`` of a table's entries: :func:`group_heads`
    when its values lie in its bytes (read in bulk), else :func:`group_values`."""
    got = group_heads(table.buf, table.starts, table.ends) if table.values is None else None
    return got if got is not None else group_values(table.all_values())


def group_values(values: list[bytes]) -> tuple[list[int], list[bytes]]:
    """:func:`group_heads` of values held one by one, grouped by a dict of their heads."""
    groups: dict[bytes, int] = {}
    ids = []
    for v in values:
        h = v[:4 + v[3]] if len(v) > 3 and v[0] == 0x08 and v[2] == 0x12 and v[1] < 0x80 and v[3] < 0x80 else v
        ids.append(groups.setdefault(h, len(groups)))
    return ids, list(groups)


def picked(values: list[Any], group: np.ndarray | list[int]) -> list[Any]:
    """``[values[g] for g in group]``, for a numpy ``group`` without a Python step per entry."""
    if isinstance(group, list):
        return [values[g] for g in group]
    import numpy as np

    table = np.empty(len(values), object)
    for i, v in enumerate(values):  # one by one: a tuple given to numpy whole would become a row
        table[i] = v
    out: list[Any] = table[group].tolist()
    return out


def members(group: np.ndarray | list[int], which: set[int]) -> list[int]:
    """The positions of the entries whose group is one of ``which``, in order."""
    if isinstance(group, list):
        return [i for i, g in enumerate(group) if g in which]
    import numpy as np

    out: list[int] = np.flatnonzero(np.isin(group, sorted(which))).tolist()
    return out
