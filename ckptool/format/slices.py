"""Slices of partitioned tensors: their keys in the index (EncodeTensorNameSlice of
saved_tensor_slice_util.cc, with OrderedCode of ordered_code.cc), their place in the
full tensor, and the rule that they tile it exactly once. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence

from ckptool.errors import CorruptError
from ckptool.format.objkeys import name_of

Slice = tuple[tuple[int, int], ...]  # per dim (start, length); length -1 = whole dim


_SIGNED_HEADERS = [
    (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0),
    (0xFC, 0), (0xFE, 0), (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0),
]


def _num_increasing(v: int) -> bytes:
    body = v.to_bytes((v.bit_length() + 7) // 8, "big") if v else b""
    return bytes((len(body),)) + body


def _signed_num_increasing(v: int) -> bytes:
    x = ~v if v < 0 else v
    n = x.bit_length() // 7 + 1
    raw = bytearray((v & ((1 << 80) - 1)).to_bytes(10, "big")[-n:])
    h0, h1 = _SIGNED_HEADERS[n - 1]
    raw[0] ^= h0
    if n > 1:
        raw[1] ^= h1
    return bytes(raw)


def encode_tensor_name_slice(name: bytes, sl: Slice) -> bytes:
    escaped = name.replace(b"\xff", b"\xff\x00").replace(b"\x00", b"\x00\xff")
    parts = [b"\x00", escaped, b"\x00\x01", _num_increasing(len(sl))]
    for start, length in sl:
        if length == -1:
            start = 0
        parts.append(_signed_num_increasing(start))
        parts.append(_signed_num_increasing(length))
    return b"".join(parts)


def _decode_signed(buf: bytes, pos: int) -> tuple[int, int]:
    """The inverse of :func:`_signed_num_increasing`: (value, position after it)."""
    if pos >= len(buf):
        raise ValueError("truncated")
    neg = not buf[pos] & 0x80
    flip = 0xFF if neg else 0
    head = ((buf[pos] ^ flip) << 8) | ((buf[pos + 1] ^ flip) if pos + 1 < len(buf) else 0)
    n = 0
    while n < 16 and head & (0x8000 >> n):
        n += 1
    if not 1 <= n <= 10 or pos + n > len(buf):
        raise ValueError("bad length")
    raw = bytearray(b ^ flip for b in buf[pos:pos + n])
    h0, h1 = _SIGNED_HEADERS[n - 1]
    raw[0] ^= h0
    if n > 1:
        raw[1] ^= h1
    x = int.from_bytes(raw, "big")
    return (~x if neg else x), pos + n


def decode_tensor_name_slice(key: bytes) -> tuple[bytes, Slice] | None:
    """The inverse of :func:`encode_tensor_name_slice`: (name, slice), or None when ``key`` is
    not a well-formed slice key."""
    if not key.startswith(b"\x00"):
        return None
    try:
        name, pos = bytearray(), 1
        while True:
            b = key[pos]
            if b == 0x00:
                if key[pos + 1] == 0x01:
                    pos += 2
                    break
                if key[pos + 1] != 0xFF:
                    return None
                name.append(0x00)
                pos += 2
            elif b == 0xFF:
                if key[pos + 1] != 0x00:
                    return None
                name.append(0xFF)
                pos += 2
            else:
                name.append(b)
                pos += 1
        width = key[pos]
        rank = int.from_bytes(key[pos + 1:pos + 1 + width], "big")
        pos += 1 + width
        if rank > 64:
            return None
        dims = []
        for _ in range(rank):
            start, pos = _decode_signed(key, pos)
            length, pos = _decode_signed(key, pos)
            dims.append((start, length))
    except (IndexError, ValueError):
        return None
    return (bytes(name), tuple(dims)) if pos == len(key) else None


def slice_text(name: str, sl: Slice) -> str:
    """A slice of tensor ``name`` as users write it: ``emb/weights[0:4,:]`` (':' a whole dimension)."""
    return name + "[" + ",".join(":" if length == -1 else f"{start}:{start + length}" for start, length in sl) + "]"


def key_text(key: bytes) -> str:
    """An index key as error messages name it: a tensor name as it is, the key of one slice of a
    partitioned tensor as ``name[0:4,:]``, never as its encoded bytes."""
    decoded = decode_tensor_name_slice(key) if key.startswith(b"\x00") else None
    if decoded is None:
        return name_of(key)
    return slice_text(name_of(decoded[0]), decoded[1])


def slice_region(sl: Slice, shape: Sequence[int]) -> tuple[slice, ...]:
    """numpy index of a slice inside the full tensor; an error if out of bounds."""
    out = []
    for (start, length), dim in zip(sl, shape):
        if length == -1:
            out.append(slice(0, dim))
            continue
        if start + length > dim:
            raise CorruptError(f"slice ({start}, {length}) exceeds dimension {dim}")
        out.append(slice(start, start + length))
    return tuple(out)


def slice_shape(sl: Slice, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(dim if length == -1 else length for (start, length), dim in zip(sl, shape))


def is_full_slice(sl: Slice, shape: Sequence[int]) -> bool:
    return all(length == -1 or (start == 0 and length == dim) for (start, length), dim in zip(sl, shape))


#: Largest grid of distinct slice boundaries :func:`tiling_problem` counts cell by cell.
TILING_GRID_MAX = 1 << 22
#: Pairs of slices compared, past that grid, before the layout is refused as unverifiable.
TILING_SWEEP_MAX = 1 << 22


def tiling_problem(shape: Sequence[int], slices: Sequence[Slice]) -> str | None:
    """Why ``slices`` do not tile a tensor of ``shape`` exactly once, or None if they do.

    Each slice must lie inside the shape, no two may repeat or overlap, and
    together they must cover every element (docs/FORMAT.md: a partitioned tensor is
    read by placing each slice once). Cost is linear in the slices for the
    layouts partitioners write (one partitioned axis, or a grid), bounded in
    every case; nothing the size of the tensor is allocated.
    """
    shape = tuple(shape)
    rank = len(shape)
    if not slices:
        return "has no slices"
    boxes: list[tuple[tuple[int, int], ...]] = []
    seen = set()
    volume = 0
    for sl in slices:
        if len(sl) != rank:
            return f"slice {list(sl)} has {len(sl)} dimensions, the tensor {rank}"
        span: list[tuple[int, int]] = []  # (lo, hi) per dim
        n = 1
        for (start, length), dim in zip(sl, shape):
            if length == -1:
                start, length = 0, dim
            if start < 0 or length < 0 or start + length > dim:
                return f"slice {list(sl)} falls outside the shape {list(shape)}"
            span.append((start, start + length))
            n *= length
        box = tuple(span)
        if box in seen:
            return f"slice {list(sl)} is listed more than once"
        seen.add(box)
        boxes.append(box)
        volume += n
    total = 1
    for d in shape:
        total *= d
    if volume != total:
        how = "overlap" if volume > total else "leave gaps"
        return f"{len(slices)} slices hold {volume} elements, the shape {list(shape)} {total}: they {how}"
    if total == 0 or len(boxes) == 1:
        return None  # distinct, in bounds, volumes add up: a single box is the whole
    return _overlap(boxes, rank)


def _overlap(boxes: list[tuple[tuple[int, int], ...]], rank: int) -> str | None:
    """With the volumes adding up to the whole, an exact tiling is one with no overlap.
    Count each cell of the grid the slice boundaries make (coordinate compression)."""
    cuts = [sorted({b[d][0] for b in boxes} | {b[d][1] for b in boxes}) for d in range(rank)]
    cells = 1
    for c in cuts:
        cells *= len(c) - 1
    if cells <= TILING_GRID_MAX:
        import numpy as np

        pos = [{x: i for i, x in enumerate(c)} for c in cuts]
        grid = np.zeros(tuple(len(c) - 1 for c in cuts), dtype=np.uint8)
        covered = 0
        for box in boxes:
            region = tuple(slice(pos[d][lo], pos[d][hi]) for d, (lo, hi) in enumerate(box))
            covered += grid[region].size
            if covered > cells:
                return "slices overlap"
            grid[region] += 1
        return None if covered == cells and int(grid.max()) == 1 else "slices overlap"
    # A grid too fine to count: sweep along the first axis, comparing the boxes alive together.
    order = sorted(boxes)
    active: list[tuple[tuple[int, int], ...]] = []
    budget = TILING_SWEEP_MAX
    for box in order:
        active = [a for a in active if a[0][1] > box[0][0]]
        budget -= len(active)
        if budget < 0:
            return f"{len(boxes)} slices are laid out too irregularly to check that they tile the shape"
        for a in active:
            if all(a[d][0] < box[d][1] and box[d][0] < a[d][1] for d in range(rank)):
                return "slices overlap"
        active.append(box)
    return None
