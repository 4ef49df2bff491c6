"""Statistics of many small tensors at once (``inspect --stats`` on 20,000 variables).

Per tensor, :func:`ckptool.ops.inspect.stats.tensor_stats` costs a dozen numpy
calls and a read whatever its size: for a checkpoint of many tiny variables
that is the whole run. Here small plain tensors of a V2 bundle are read
together (adjacent ones in one read, each CRC32C checked), grouped by dtype
and element count into 2-D arrays, and reduced along rows: the same
operations in the same order per row as the single-tensor path
(``np.add.reduce`` along a contiguous row sums pairwise exactly as it does on
the row alone), so every value is bit for bit what ``tensor_stats`` gives.
A tensor that needs anything else (a NaN or an infinity, a checksum that
does not match, a shard that is missing) is left to ``tensor_stats``, which
reports it as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ckptool.errors import CkptError
from ckptool.format.bundle import Entry
from ckptool.format.coding import crc32c, unmask_crc
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.v2 import BundleCheckpoint

#: Tensors of at most this many elements are batched.
SMALL_ELEMS = 4096
#: A batch holds at most this many bytes of tensor data.
BATCH_BYTES = 4 << 20
#: ... and at most this many tensors (memory per batch: their entries and results, not the checkpoint's)
BATCH_TENSORS = 4096
_KINDS = "fiub"  # numpy kinds batched: real floats, integers, booleans


def batchable_checkpoint(ck: Checkpoint) -> BundleCheckpoint | None:
    """``ck`` when its tensors' statistics can be batched: a V2 bundle whose stored bytes are
    the values as they are read (rows are viewed as stored), else None."""
    return ck if isinstance(ck, BundleCheckpoint) and ck.header.raw_copy else None


def iter_batched(ck: BundleCheckpoint, names: list[str], single: Callable[[str], dict[str, Any]],
                 on_bytes: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """The statistics of each of ``names`` of a :func:`batchable_checkpoint`, in order: the small
    tensors in batches of at most :data:`BATCH_BYTES` and :data:`BATCH_TENSORS`
    (:func:`batch_stats`), the others by ``single``; each batch read in order."""
    batch: list[tuple[int, str, Entry]] = []
    size = 0

    def flush() -> list[Any]:
        out: list[Any] = [None] * len(batch)
        batch_stats(ck, [(k, name, e) for k, (_, name, e) in enumerate(batch)], out, single, on_bytes)
        return out

    for i, name in enumerate(names):
        e = batchable(ck, name)
        if e is None:
            if batch:  # read in order: the batch before this tensor
                yield from flush()
                batch, size = [], 0
            yield single(name)
            continue
        batch.append((i, name, e))
        size += e.size
        if size >= BATCH_BYTES or len(batch) >= BATCH_TENSORS:
            yield from flush()
            batch, size = [], 0
    if batch:
        yield from flush()


def batchable(ck: BundleCheckpoint, name: str) -> Entry | None:
    """The entry of ``name`` of a :func:`batchable_checkpoint` when its statistics can be
    batched, else None."""
    try:
        e = ck.lookup(name)
    except CkptError:
        return None
    dt = e.dtype
    if e.slices or not dt.is_fixed or not 0 < e.numel <= SMALL_ELEMS or dt.numpy.kind not in _KINDS \
            or dt.numpy.names:
        return None
    return e


def batch_stats(ck: BundleCheckpoint, batch: list[tuple[int, str, Entry]], out: list[Any],
                single: Callable[[str], dict[str, Any]], on_bytes: Callable[[int], None] | None = None) -> None:
    """Fill ``out[i]`` for each ``(i, name, entry)`` of ``batch`` (read in this order), with
    ``single(name)`` for a tensor the batch cannot do; ``on_bytes(n)`` with the bytes of
    each tensor done here (for progress)."""
    raw = _read(ck, batch)
    groups: dict[tuple[str, int], list[tuple[int, str, Entry, memoryview]]] = {}
    for (i, name, e), data in zip(batch, raw):
        if data is None:
            out[i] = single(name)
        else:
            groups.setdefault((e.dtype.name, e.numel), []).append((i, name, e, data))
    for rows in groups.values():
        e0 = rows[0][2]
        a = np.frombuffer(b"".join(r[3] for r in rows), dtype=e0.dtype.numpy).reshape(len(rows), e0.numel)
        if a.dtype.kind == "b":
            a = a.view(np.uint8)
        docs = _floats(a) if a.dtype.kind == "f" else _ints(a)
        for (i, name, e, _), doc in zip(rows, docs):
            if doc is None:
                out[i] = single(name)
                continue
            out[i] = {"name": name, "dtype": e.dtype.name, "shape": list(e.shape), "count": e.numel, **doc}
            if on_bytes is not None:
                on_bytes(e.size)


def _read(ck: BundleCheckpoint, batch: list[tuple[int, str, Entry]]) -> list[memoryview | None]:
    """Each entry's bytes (None: bounds, shard or checksum trouble), adjacent ones read at once."""
    out: list[memoryview | None] = [None] * len(batch)
    k = 0
    while k < len(batch):
        e = batch[k][2]
        j, end = k + 1, e.offset + e.size
        while j < len(batch) and batch[j][2].shard_id == e.shard_id and batch[j][2].offset == end:
            end += batch[j][2].size
            j += 1
        try:
            reader = ck.shard_reader(e)
            if end > reader.size:
                raise CkptError("past the end")  # each tensor then reports its own bounds
            buf = memoryview(reader.read(e.offset, end - e.offset))
        except CkptError:
            k = j
            continue
        for m in range(k, j):
            p = batch[m][2]
            data = buf[p.offset - e.offset: p.offset - e.offset + p.size]
            if crc32c(data) == unmask_crc(p.crc32c):
                out[m] = data
        k = j
    return out


def _scaled(a: np.ndarray, biggest: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, std, scale)`` per row, as :meth:`ckptool.ops.inspect.stats._Acc._add_finite`
    computes them for a fresh accumulator (scale a power of two >= 1 and >= each |value|)."""
    with np.errstate(all="ignore"):
        _, exp = np.frexp(biggest)
        scale = np.where(biggest != 0, np.maximum(1.0, np.ldexp(1.0, np.minimum(exp, 1023))), 1.0)
        n = a.shape[1]
        g = a.astype(np.float64) / scale[:, None]
        mean = np.add.reduce(g, axis=1) / n
        d = g - mean[:, None]
        m2 = np.add.reduce(d * d, axis=1)
        acc_mean = (0.0 + (mean * n) / n) * scale  # (self.mean / scale + delta * n / tot) * scale
        std = np.sqrt(np.maximum(0.0 + m2, 0.0) / n) * scale
    return acc_mean, std, scale


def _floats(a: np.ndarray) -> list[dict[str, Any] | None]:
    lo, hi = a.min(axis=1), a.max(axis=1)
    ok = np.isfinite(lo) & np.isfinite(hi)  # a NaN makes both NaN; an infinity is one of them
    zeros = a.shape[1] - np.count_nonzero(a, axis=1)
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    for r in np.flatnonzero(ok & ((lo64 == 0) | (hi64 == 0))).tolist():
        row = a[r].astype(np.float64)  # which of 0.0 and -0.0 min/max give: as on the tensor alone
        lo64[r], hi64[r] = row.min(), row.max()
    biggest = np.where(ok, np.maximum(np.abs(lo64), np.abs(hi64)), 0.0)
    mean, std, _ = _scaled(a, biggest)
    out: list[dict[str, Any] | None] = []
    for f, x, y, m, s, z in zip(ok.tolist(), lo64.tolist(), hi64.tolist(), mean.tolist(), std.tolist(),
                                zeros.tolist()):
        out.append({"min": x, "max": y, "mean": m, "std": s, "nan": 0, "inf": 0, "zeros": z} if f else None)
    return out


def _ints(a: np.ndarray) -> list[dict[str, Any] | None]:
    lo, hi = a.min(axis=1).tolist(), a.max(axis=1).tolist()
    zeros = (a.shape[1] - np.count_nonzero(a, axis=1)).tolist()
    biggest = np.array([float(max(abs(x), abs(y))) for x, y in zip(lo, hi)], dtype=np.float64)
    mean, std, _ = _scaled(a, biggest)
    return [{"min": x, "max": y, "mean": m, "std": s, "nan": 0, "inf": 0, "zeros": z}
            for x, y, m, s, z in zip(lo, hi, mean.tolist(), std.tolist(), zeros)]
