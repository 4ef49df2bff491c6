"""Statistics of tensors (``inspect --stats``), streamed in chunks."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptool.format import dtypes
from ckptool.ops.read.chunks import CHUNK_BYTES, tensor_chunks
from ckptool.ops.read.plan import prefetch

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
    are done in batches (:mod:`ckptool.ops.inspect.stats_small`), with the same values."""
    return list(iter_tensors_stats(ck, names, chunk_bytes, jobs, on_bytes))


def iter_tensors_stats(ck: Checkpoint, names: list[str], chunk_bytes: int = CHUNK_BYTES, jobs: int | None = None,
                       on_bytes: Callable[[int], None] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`tensors_stats`, each tensor's as soon as it is done: memory holds a batch of small
    tensors' statistics at most, not every tensor's (``inspect --stats --json`` writes them so)."""
    from ckptool.ops.inspect.stats_small import batchable_checkpoint, iter_batched

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

