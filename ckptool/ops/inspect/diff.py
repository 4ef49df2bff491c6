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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ckptool.format.json_numbers import json_float
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.objkeys import key_of
from ckptool.ops.read.chunks import CHUNK_BYTES, tensor_chunks
from ckptool.ops.read.prefetch import DEFAULT_JOBS, prefetch
from ckptool.ops.read.select import compile_filter, filter_words, nothing_selected

if TYPE_CHECKING:
    from ckptool.ops.read.checkpoint import Checkpoint


def _brief(v: Tensor, name: str | None = None) -> dict[str, Any]:
    return {"name": v.name if name is None else name, "dtype": v.dtype, "shape": list(v.shape),
            "nbytes": v.nbytes}


@dataclass
class ValueChange:
    name: str
    dtype: str
    shape: list[int]
    count: int  # elements
    differing: int  # elements that differ (beyond atol)
    max_abs_diff: float | None  # None for string/variant tensors, or when every difference involves NaN

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": self.shape, "count": self.count,
                "differing": self.differing, "max_abs_diff": _json_num(self.max_abs_diff)}


def _json_num(x: float | None) -> float | str | None:
    return None if x is None else json_float(x)


@dataclass
class DiffReport:
    a: str
    b: str
    atol: float
    rtol: float = 0.0
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)  # dtype or shape differs: {"name", "a", "b"}
    values: list[ValueChange] = field(default_factory=list)
    unchanged: int = 0

    @property
    def identical(self) -> bool:
        return not (self.added or self.removed or self.changed or self.values)

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "atol": self.atol, "rtol": self.rtol, "identical": self.identical,
                "added": self.added, "removed": self.removed, "changed": self.changed,
                "values": [v.to_json() for v in self.values], "unchanged": self.unchanged}


class Tensor(Protocol):
    """What :func:`diff_sides` needs of a listed tensor (a :class:`ckptool.Variable` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def numel(self) -> int: ...


class Side(Protocol):
    """One side of a comparison: a label, its tensors, and each tensor's elements as flat chunks.

    :class:`CheckpointSide` is an open checkpoint: :func:`open_side` makes one of any source
    ``convert`` reads (``.safetensors``, ``.npz``, ``.npy``, a Hugging Face folder, ...)."""

    prefix: str

    @property
    def checkpoint(self) -> Checkpoint | None: ...  # an open checkpoint's reads are fetched ahead

    def variables(self) -> Sequence[Tensor]: ...

    def chunks(self, name: str, chunk_bytes: int) -> Iterator[np.ndarray]: ...


class CheckpointSide:
    """An open checkpoint as a :class:`Side` (chunked reads: :func:`tensor_chunks`); as a context
    manager, it closes the checkpoint."""

    def __init__(self, checkpoint: Checkpoint):
        self.checkpoint = checkpoint
        self.prefix: str = checkpoint.prefix

    def __enter__(self) -> CheckpointSide:
        return self

    def __exit__(self, *exc: object) -> None:
        self.checkpoint.close()

    def variables(self) -> Sequence[Tensor]:
        return self.checkpoint.variables()

    def chunks(self, name: str, chunk_bytes: int) -> Iterator[np.ndarray]:
        return tensor_chunks(self.checkpoint, name, chunk_bytes=chunk_bytes)


def open_side(path: str) -> CheckpointSide:
    """One side of ``diff``: any source ``convert`` reads, opened as a checkpoint
    (:func:`ckptool.ops.read.reader.open`)."""
    from ckptool.ops.read.reader import open as open_checkpoint

    return CheckpointSide(open_checkpoint(path))


def diff(a: Checkpoint, b: Checkpoint, atol: float = 0.0, progress: Callable[[int, int], None] | None = None,
         chunk_bytes: int = CHUNK_BYTES, *, rtol: float = 0.0, match: Sequence[str] = (),
         rename: Callable[[str], str] | None = None, jobs: int | None = None) -> DiffReport:
    """Compare open checkpoints ``a`` and ``b`` (see :func:`diff_sides`)."""
    return diff_sides(CheckpointSide(a), CheckpointSide(b), atol, progress, chunk_bytes,
                      rtol=rtol, match=match, rename=rename, jobs=jobs)


def diff_sides(a: Side, b: Side, atol: float = 0.0, progress: Callable[[int, int], None] | None = None,
               chunk_bytes: int = CHUNK_BYTES, *, rtol: float = 0.0, match: Sequence[str] = (),
               rename: Callable[[str], str] | None = None, jobs: int | None = None) -> DiffReport:
    """Compare ``a`` and ``b``; ``progress(done_bytes, total_bytes)`` as values are compared.

    Two elements are equal as the module doc says, or when ``|a - b| <= atol + rtol * |b|``
    (numpy's ``isclose``). ``rename`` maps A's names into B's (an assignment map, to check
    a migration): the report names tensors as B does, and the object graph, which a
    migration rebuilds, is not compared. ``match``: compare only names (after ``rename``)
    matching one of these globs. ``jobs``: ranged GETs in flight reading sides on an object
    store, shared between the two (default 8 in all)."""
    from ckptool.errors import CkptError

    for what, tol in (("--atol", atol), ("--rtol", rtol)):
        if not tol >= 0:
            raise CkptError(f"{what} must be a non-negative number, not {tol}")
    va = _listing(a, rename)
    vb = _listing(b, None)
    if rename is not None:
        va.pop(OBJECT_GRAPH_KEY, None)
        vb.pop(OBJECT_GRAPH_KEY, None)
    if match:  # a --match that selects nothing on either side is an error, not "identical"
        keep = compile_filter(match)
        total = len(set(va) | set(vb))
        va = {n: v for n, v in va.items() if keep(n)}
        vb = {n: v for n, v in vb.items() if keep(n)}
        if total and not va and not vb:
            raise nothing_selected(f"{a.prefix} and {b.prefix}", total, filter_words(match))
    report = DiffReport(a.prefix, b.prefix, atol, rtol=rtol)
    common: list[tuple[str, Tensor, Tensor]] = []
    for name in sorted(set(va) | set(vb), key=key_of):
        x, y = va.get(name), vb.get(name)
        if x is None:
            if y is not None:
                report.added.append(_brief(y))
        elif y is None:
            report.removed.append(_brief(x, name))
        elif x.dtype != y.dtype or list(x.shape) != list(y.shape):
            report.changed.append({"name": name, "a": {"dtype": x.dtype, "shape": list(x.shape)},
                                   "b": {"dtype": y.dtype, "shape": list(y.shape)}})
        else:
            common.append((name, x, y))
    total = sum(y.nbytes for _, _, y in common)
    done = 0
    # fetched ahead from an object store, in the order compared
    each = max(1, (jobs or DEFAULT_JOBS) // 2)  # the two sides share the requests in flight
    with prefetch(a.checkpoint, [x.name for _, x, _ in common], each), \
            prefetch(b.checkpoint, [y.name for _, _, y in common], each):
        for name, x, y in common:
            differing, max_abs = _compare(a.chunks(x.name, chunk_bytes), b.chunks(y.name, chunk_bytes), atol, rtol)
            if differing:
                report.values.append(ValueChange(name, y.dtype, list(y.shape), y.numel, differing, max_abs))
            else:
                report.unchanged += 1
            done += y.nbytes
            if progress:
                progress(done, total)
    return report


def _listing(side: Side, rename: Callable[[str], str] | None) -> dict[str, Tensor]:
    """Name (after ``rename``) -> tensor; two names landing on one is an error."""
    out: dict[str, Tensor] = {}
    for v in side.variables():
        name = v.name if rename is None or v.name == OBJECT_GRAPH_KEY else rename(v.name)
        if name in out:
            from ckptool.errors import CkptError

            raise CkptError(f"{side.prefix}: {out[name].name!r} and {v.name!r} both map to {name!r}")
        out[name] = v
    return out


def _aligned(xs: Iterator[np.ndarray], ys: Iterator[np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pairs of equally long pieces of two chunk streams of one element count (a chunk is
    used up before the next one of its stream is asked for: chunks may share a buffer)."""
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    while True:
        if x is None or not len(x):
            x = next(xs, None)
        if y is None or not len(y):
            y = next(ys, None)
        if x is None or y is None:
            return
        n = min(len(x), len(y))
        yield x[:n], y[:n]
        x, y = x[n:], y[n:]


def _compare(xs: Iterator[np.ndarray], ys: Iterator[np.ndarray], atol: float,
             rtol: float) -> tuple[int, float | None]:
    differing = 0
    max_abs: float | None = None
    for x, y in _aligned(xs, ys):
        if x.dtype == object or y.dtype == object:
            differing += int(np.count_nonzero(x != y))
            continue
        if x.dtype == y.dtype and x.tobytes() == y.tobytes():
            continue
        n, m = _numeric_diff(x, y, atol, rtol)
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


def _numeric_diff(x: np.ndarray, y: np.ndarray, atol: float, rtol: float = 0.0) -> tuple[int, float | None]:
    if x.dtype.names and y.dtype.names:  # one dtype: both or neither
        x, y = x[x.dtype.names[0]], y[y.dtype.names[0]]
    if x.dtype.kind in "iu" and y.dtype.kind in "iu" and atol == 0 and rtol == 0:
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
        within = d <= atol + rtol * np.abs(fy) if rtol else d <= atol
        differ = ~same & ~within
    n = int(np.count_nonzero(differ))
    if not n:
        return 0, None
    numeric = differ & ~nx & ~ny
    m = float(d[numeric].max()) if numeric.any() else None
    return n, m


__all__ = ["diff", "diff_sides", "open_side", "CheckpointSide", "Side", "DiffReport", "ValueChange"]
