"""Comparing two checkpoints: added, removed, dtype/shape-changed and value-changed tensors.

Values are compared chunk by chunk (:data:`ckptool.ops.read.chunks.CHUNK_BYTES`
at a time for fixed-size tensors), so memory stays bounded. Two elements
are equal when they are bit-identical, numerically equal (``0.0 == -0.0``,
``inf == inf``), both NaN, or, with ``atol``, no more than ``atol`` apart.
``max_abs_diff`` is the largest ``|a - b|`` over the elements that differ and
where neither side is NaN (``inf`` when an infinity meets a finite value);
an element that is NaN on one side only counts as differing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ckptool.ops.read.chunks import CHUNK_BYTES, tensor_chunks


def _brief(v) -> dict:
    return {"name": v.name, "dtype": v.dtype, "shape": list(v.shape), "nbytes": v.nbytes}


@dataclass
class ValueChange:
    name: str
    dtype: str
    shape: list[int]
    count: int  # elements
    differing: int  # elements that differ (beyond atol)
    max_abs_diff: float | None  # None for string/variant tensors, or when every difference involves NaN

    def to_json(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "count": self.count,
                "differing": self.differing, "max_abs_diff": _json_num(self.max_abs_diff)}


def _json_num(x):
    if x is None or np.isfinite(x):
        return x
    return "Infinity"


@dataclass
class DiffReport:
    a: str
    b: str
    atol: float
    added: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    changed: list[dict] = field(default_factory=list)  # dtype or shape differs: {"name", "a", "b"}
    values: list[ValueChange] = field(default_factory=list)
    unchanged: int = 0

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed or self.values)

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b, "atol": self.atol, "identical": self.identical,
                "added": self.added, "removed": self.removed, "changed": self.changed,
                "values": [v.to_json() for v in self.values], "unchanged": self.unchanged}


def diff(a, b, atol: float = 0.0, progress: Callable[[int, int], None] | None = None,
         chunk_bytes: int = CHUNK_BYTES) -> DiffReport:
    """Compare open checkpoints ``a`` and ``b``; ``progress(done_bytes, total_bytes)``."""
    if not atol >= 0:
        from ckptool.errors import CkptError

        raise CkptError(f"--atol must be a non-negative number, not {atol}")
    va = {v.name: v for v in a.variables()}
    vb = {v.name: v for v in b.variables()}
    report = DiffReport(a.prefix, b.prefix, atol)
    common = []
    for name in sorted(set(va) | set(vb), key=lambda n: n.encode("utf-8", "surrogateescape")):
        x, y = va.get(name), vb.get(name)
        if x is None:
            report.added.append(_brief(y))
        elif y is None:
            report.removed.append(_brief(x))
        elif x.dtype != y.dtype or x.shape != y.shape:
            report.changed.append({"name": name, "a": {"dtype": x.dtype, "shape": list(x.shape)},
                                   "b": {"dtype": y.dtype, "shape": list(y.shape)}})
        else:
            common.append(x)
    total = sum(v.nbytes for v in common)
    done = 0
    for v in common:
        differing, max_abs = _compare(a, b, v.name, atol, chunk_bytes)
        if differing:
            report.values.append(ValueChange(v.name, v.dtype, list(v.shape), v.numel, differing, max_abs))
        else:
            report.unchanged += 1
        done += v.nbytes
        if progress:
            progress(done, total)
    return report


def _compare(a, b, name: str, atol: float, chunk_bytes: int) -> tuple[int, float | None]:
    differing = 0
    max_abs: float | None = None
    for x, y in zip(tensor_chunks(a, name, chunk_bytes=chunk_bytes),
                    tensor_chunks(b, name, chunk_bytes=chunk_bytes)):
        if x.dtype == object:
            differing += int(np.count_nonzero(x != y))
            continue
        if x.tobytes() == y.tobytes():
            continue
        n, m = _numeric_diff(x, y, atol)
        differing += n
        if m is not None:
            max_abs = m if max_abs is None else max(max_abs, m)
    return differing, max_abs


def _as_float(x: np.ndarray) -> np.ndarray:
    if x.dtype.names:
        x = x[x.dtype.names[0]]
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind == "b":
        return x.astype(np.float64)
    return x.astype(np.float64)


def _numeric_diff(x: np.ndarray, y: np.ndarray, atol: float) -> tuple[int, float | None]:
    if x.dtype.names and y.dtype.names:  # one dtype: both or neither
        x, y = x[x.dtype.names[0]], y[y.dtype.names[0]]
    if x.dtype.kind in "iu" and atol == 0:
        neq = x != y
        n = int(np.count_nonzero(neq))
        if not n:
            return 0, None
        d = np.abs(x[neq].astype(np.float64) - y[neq].astype(np.float64))
        return n, float(d.max())
    fx, fy = _as_float(x), _as_float(y)
    nx, ny = np.isnan(fx), np.isnan(fy)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (fx == fy) | (nx & ny)
        d = np.abs(fx - fy)
        d = np.where(np.isinf(fx) | np.isinf(fy), np.where(same, 0.0, np.inf), d)
        differ = ~same & ~(d <= atol)
    n = int(np.count_nonzero(differ))
    if not n:
        return 0, None
    numeric = differ & ~nx & ~ny
    m = float(d[numeric].max()) if numeric.any() else None
    return n, m


__all__ = ["diff", "DiffReport", "ValueChange"]
