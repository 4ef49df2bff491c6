"""Statistics of tensors (``inspect --stats``), streamed in chunks.

Many small tensors at once (``inspect --stats`` on 20,000 variables): per tensor,
:func:`tensor_stats` costs a dozen numpy calls and a read whatever its size: for a checkpoint of many tiny variables
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

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptool.errors import CkptError
from ckptool.format import dtypes
from ckptool.format.bundle import Entry
from ckptool.format.coding import crc32c, unmask_crc
from ckptool.ops.read.chunks import CHUNK_BYTES, tensor_chunks
from ckptool.ops.read.prefetch import prefetch
from ckptool.ops.read.v2 import BundleCheckpoint

if TYPE_CHECKING:
    from ckptool.ops.read.checkpoint import Checkpoint


@dataclass
class _Acc:
    count: int = 0
    finite: int = 0
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations, divided by scale**2 (no overflow near float64 max)
    scale: float = 1.0  # a power of two >= every |value| seen
    lo: int | float | None = None  # an int for integer tensors (exact)
    hi: int | float | None = None
    nan: int = 0
    inf: int = 0
    zeros: int = 0

    # Small tensors are the many: each numpy call costs about a microsecond whatever the
    # size, so the common case (every element finite) is found with the min and max the
    # statistics need anyway, and the values computed are those of the plain formulas.

    def add_float(self, f: np.ndarray) -> None:
        """A chunk of real floats (any width; min, max and zeros are taken at its width, the
        sums in float64 in a scratch buffer: ``f`` is left as it is)."""
        self.count += f.size
        if f.size == 0:
            return
        lo, hi = float(f.min()), float(f.max())  # a NaN makes both NaN; an infinity is one of them
        if not (math.isfinite(lo) and math.isfinite(hi)):
            fin = np.isfinite(f)
            self.nan += int(np.isnan(f).sum())
            self.inf += int(np.isinf(f).sum())
            f = f[fin]
            if not f.size:
                return
            lo, hi = float(f.min()), float(f.max())
        self.zeros += f.size - int(np.count_nonzero(f))
        g = _float64(f)
        if lo == 0.0 or hi == 0.0:  # which of 0.0 and -0.0 min/max give depends on the width
            lo, hi = float(g.min()), float(g.max())
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self._add_finite(g, max(abs(lo), abs(hi)))

    def add_int(self, a: np.ndarray) -> None:
        self.count += a.size
        if a.size == 0:
            return
        lo, hi = a.min().item(), a.max().item()
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.zeros += a.size - int(np.count_nonzero(a))
        self._add_finite(_float64(a), float(max(abs(lo), abs(hi))))

    def _add_finite(self, f: np.ndarray, biggest: float) -> None:
        """Chan et al.'s parallel update of (count, mean, M2), in units of ``scale``; ``f``
        (float64) is used as scratch space: each step in place, the values those of
        ``g = f / scale; d = g - mean; d * d``."""
        scale = max(self.scale, math.ldexp(1.0, min(math.frexp(biggest)[1], 1023)) if biggest else 1.0)
        if scale != self.scale:
            self.m2 *= (self.scale / scale) ** 2
            self.scale = scale
        g = f if scale == 1.0 else np.divide(f, scale, out=f)
        n, tot = f.size, self.finite + f.size
        mean = float(np.add.reduce(g)) / n  # what g.mean() computes, without its Python layer
        d = np.subtract(g, mean, out=g)
        m2 = float(np.add.reduce(np.multiply(d, d, out=d)))
        delta = mean - self.mean / scale
        self.mean = (self.mean / scale + delta * n / tot) * scale
        self.m2 += m2 + delta * delta * self.finite * n / tot
        self.finite = tot

    def std(self) -> float:
        return math.sqrt(max(self.m2, 0.0) / self.finite) * self.scale


_SCRATCH = threading.local()


def _float64(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 in this thread's scratch buffer (kept between chunks: a fresh
    buffer per chunk costs its page faults, as much as the arithmetic)."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.size < a.size:
        buf = _SCRATCH.buf = np.empty(a.size, np.float64)
    out: np.ndarray = buf[:a.size]
    np.copyto(out, a.reshape(-1), casting="unsafe")
    return out


def tensors_stats(ck: Checkpoint, names: list[str], chunk_bytes: int = CHUNK_BYTES, jobs: int | None = None,
                  on_bytes: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """:func:`tensor_stats` of each of ``names``, in order, their data fetched ahead on an
    object store (``jobs`` ranged GETs in flight; memory bounded by those). Small tensors
    are done in batches (:func:`iter_batched`), with the same values."""
    return list(iter_tensors_stats(ck, names, chunk_bytes, jobs, on_bytes))


def iter_tensors_stats(ck: Checkpoint, names: list[str], chunk_bytes: int = CHUNK_BYTES, jobs: int | None = None,
                       on_bytes: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`tensors_stats`, each tensor's as soon as it is done: memory holds a batch of small
    tensors' statistics at most, not every tensor's (``inspect --stats --json`` writes them so)."""
    def single(name: str) -> dict[str, Any]:
        return tensor_stats(ck, name, chunk_bytes, on_bytes)

    with prefetch(ck, names, jobs, fixed_only=True):
        bundle = batchable_checkpoint(ck)
        if bundle is None:
            yield from map(single, names)
        else:
            yield from iter_batched(bundle, names, single, on_bytes)


def tensor_stats(ck: Checkpoint, name: str, chunk_bytes: int = CHUNK_BYTES,
                 on_bytes: Callable[[int], None] | None = None) -> dict[str, Any]:
    """min, max, mean, std, NaN, Inf and zero counts of one tensor, read in chunks.

    min/max/mean/std are over the finite elements (std is the population
    standard deviation); complex tensors give them over the magnitudes;
    booleans count as 0 and 1; string and variant tensors give counts only.
    ``on_bytes(n)`` is called with the bytes of each chunk read (for progress).
    """
    v = ck.variable(name)
    doc = {"name": v.name, "dtype": v.dtype, "shape": list(v.shape), "count": v.numel,
           "min": None, "max": None, "mean": None, "std": None, "nan": 0, "inf": 0, "zeros": 0}
    dt = dtypes.from_name(v.dtype)
    if not dt.is_fixed:
        doc["nan"] = doc["inf"] = doc["zeros"] = None
        return doc
    acc = _Acc()
    for chunk in tensor_chunks(ck, name, ordered=False, chunk_bytes=chunk_bytes):
        if on_bytes is not None:
            on_bytes(chunk.nbytes)
        if chunk.dtype.names:
            chunk = chunk[chunk.dtype.names[0]]
        kind = chunk.dtype.kind
        if kind == "b":
            acc.add_int(chunk.view(np.uint8))
        elif kind in "iu":
            acc.add_int(chunk)
        elif kind == "c":
            acc.add_float(np.abs(chunk))
        elif kind == "f":
            acc.add_float(chunk)
        else:  # ml_dtypes
            f = chunk.astype(np.float64)
            if dt.name.startswith(("int", "uint")):
                acc.add_int(f.astype(np.int64))
            else:
                acc.add_float(f)
    doc.update(nan=acc.nan, inf=acc.inf, zeros=acc.zeros)
    if acc.finite:
        doc.update(min=acc.lo, max=acc.hi, mean=acc.mean, std=acc.std())
    return doc


# --------------------------------------------------------------------------- many small tensors at once

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
