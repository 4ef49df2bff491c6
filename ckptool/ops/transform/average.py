"""Checkpoint averaging: the library side of ``ckptool average``.

Float tensors (float16, bfloat16, float32, float64, float8) of every input
are averaged in float64 as a running mean (:func:`running_mean`: n identical
inputs give that input back bit for bit, finite inputs a finite mean within
their bounds) and rounded once to their dtype (nearest even, as ``astype``). Everything else (integers,
booleans, strings, the object graph) and the optimizer state come from the
newest input, as stored; ``strip_optimizer`` drops the optimizer state
(``ckptool.format.slots``). The inputs must agree on names, shapes and dtypes.

Streaming: for each tensor, one input's value at a time is read and folded into
a float64 running mean (in blocks, so temporaries stay small), so memory holds one
tensor and its mean, never the N checkpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UsageError
from ckptool.format.dtypes import AVERAGED as FLOATS
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.objkeys import key_of
from ckptool.ops.read.prefetch import DEFAULT_JOBS, prefetch

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ckptool.format.bundle import Entry
    from ckptool.ops.read.checkpoint import Checkpoint, Variable



@dataclass
class AverageResult:
    inputs: list[str]
    prefix: str
    averaged: list[str] = field(default_factory=list)
    from_newest: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    nbytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "newest": self.inputs[-1] if self.inputs else None,
                "prefix": self.prefix, "averaged": list(self.averaged), "from_newest": list(self.from_newest),
                "dropped": list(self.dropped), "files": list(self.files), "bytes": self.nbytes}


def resolve_inputs(paths: Iterable[str], last: int | None = None) -> list[str]:
    """Checkpoint prefixes, oldest first (the newest last).

    One directory with ``last``: its ``last`` newest complete checkpoints (by
    step number when each has one, else by the time of their ``.index``). Several checkpoints: ordered by their
    step (``ckpt-N``) when every one has one, else as given.
    """
    from ckptool.format import bundle
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.layout.checkpoints import list_checkpoints, locate, step_of

    paths = list(paths)
    if not paths:
        raise UsageError("average needs checkpoints: CKPT... or DIR --last N")
    if last is not None:
        if last < 1:
            raise UsageError(f"--last must be at least 1, not {last}")
        if len(paths) != 1:
            raise UsageError("--last takes one directory")
        storage, d = storage_for(paths[0])
        if not storage.isdir(d):
            raise UsageError(f"{paths[0]}: --last needs a directory")
        found = list_checkpoints(storage, d)
        if all(step_of(p) is not None for p in found):
            prefixes = sorted(found, key=lambda p: (step_of(p), p))
        else:
            prefixes = sorted(found, key=lambda p: (storage.mtime(bundle.index_filename(p)), p))
        if len(prefixes) < last:
            raise CkptError(f"{paths[0]}: --last {last} asks for more checkpoints than the "
                            f"{len(prefixes)} there")
        return prefixes[-last:]
    prefixes = [locate(p).prefix for p in paths]
    if len(set(prefixes)) != len(prefixes):
        raise UsageError("a checkpoint is given twice: " + ", ".join(p for p in prefixes if prefixes.count(p) > 1))
    steps = [step_of(p) for p in prefixes]
    if all(s is not None for s in steps) and len(set(steps)) == len(steps):
        prefixes = [p for _, p in sorted(zip(steps, prefixes))]
    return prefixes


def _check_agree(cks: Sequence[Checkpoint], inputs: Sequence[str]) -> None:
    ref = {v.name: v for v in cks[-1].variables()}
    for ck, path in zip(cks[:-1], inputs[:-1]):
        other = {v.name: v for v in ck.variables()}
        for name in sorted(set(ref) | set(other)):
            a, b = ref.get(name), other.get(name)
            if a is None or b is None:
                where = inputs[-1] if a is None else path
                raise CkptError(f"tensor {name!r} is not in {where} (inputs must have the same tensors)")
            if name == OBJECT_GRAPH_KEY:
                continue
            if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
                raise CkptError(f"tensor {name!r} differs: {b.dtype}{list(b.shape)} in {path}, "
                                f"{a.dtype}{list(a.shape)} in {inputs[-1]}")


def _plan(newest: Checkpoint, strip_optimizer: bool) -> tuple[dict[str, str | None], set[str], bytes | None]:
    """``(name -> output name or None, optimizer names, graph bytes to write or None)``."""
    from ckptool.format.slots import optimizer_keys

    names = [n for n in newest.names() if n != OBJECT_GRAPH_KEY]
    graph = newest.object_graph() if newest.is_object_based else None
    opt = optimizer_keys(names, graph)
    out: dict[str, str | None] = {n: n for n in names}
    graph_bytes: bytes | None = None
    if strip_optimizer:
        if graph is not None:
            g2, keys = graph.edited({}, frozenset(), strip_optimizer=True)
            out = {n: keys.get(n, n) for n in names}
            graph_bytes = g2.serialize()
        else:
            out = {n: (None if n in opt else n) for n in names}
    return out, opt, graph_bytes


def average(paths: Iterable[str], out: str, *, last: int | None = None, strip_optimizer: bool = False,
            force: bool = False, num_shards: int = 1, dry_run: bool = False, sync: bool = True,
            progress: Callable[[int, int], None] | None = None, jobs: int | None = None) -> AverageResult:
    """Average ``paths`` into ``out`` (see the module doc); ``progress(done_bytes, total_bytes)``
    as output tensors are written. ``jobs``: ranged GETs in flight reading inputs on an object
    store, shared between the inputs (at least one each; default 8 in all)."""
    from ckptool.format import bundle
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.safety.destination import check_destination, checkpoint_identity
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.read.reader import open as open_checkpoint
    from ckptool.ops.write.writer import BundleWriter

    inputs = resolve_inputs(paths, last)
    cks = []
    try:
        for p in inputs:
            cks.append(open_checkpoint(p))
        # the one same-file rule: the output is none of the inputs (through any link), not even with --force
        sources = [f for ck in cks for f in checkpoint_identity(ck)]
        out_storage, out_path = storage_for(out)
        check_destination(out_storage, [bundle.index_filename(out_path)], force=force, sources=sources, label=out)
        _check_agree(cks, inputs)
        newest = cks[-1]
        plan, opt, graph_bytes = _plan(newest, strip_optimizer)
        result = AverageResult(inputs, out)
        for name, target in plan.items():
            if target is None:
                result.dropped.append(name)
            elif name in opt or newest.variable(name).dtype not in FLOATS:
                result.from_newest.append(name)
            else:
                result.averaged.append(name)
        raw = isinstance(newest, BundleCheckpoint) and newest.header.raw_copy
        if dry_run:  # the bytes the real run writes, from the index (and the edited graph)
            kept = [n for n, t in plan.items() if t is not None]
            if newest.is_object_based:
                kept.append(OBJECT_GRAPH_KEY)
            result.nbytes = sum(_stored_bytes(newest, n, raw, graph_bytes) for n in kept)
            return result
        averaged = set(result.averaged)
        total = sum(newest.variable(n).nbytes for n, t in plan.items() if t is not None) if progress else 0
        done = 0
        kept = [n for n, t in plan.items() if t is not None]
        each = max(1, (jobs or DEFAULT_JOBS) // len(cks))  # the inputs share the requests in flight
        with ExitStack() as fetching:  # each input's reads fetched ahead from an object store
            for ck in cks[:-1]:
                fetching.enter_context(prefetch(ck, result.averaged, each))
            fetching.enter_context(prefetch(newest, kept + [OBJECT_GRAPH_KEY] * (graph_bytes is None), each))
            w = fetching.enter_context(BundleWriter(out, num_shards=num_shards, force=force, sync=sync,
                                                    sources=sources))
            for name, target in plan.items():
                if target is None:
                    continue
                if name in averaged:
                    w.add(target, _mean(cks, name))
                elif raw and isinstance(newest, BundleCheckpoint) and not newest.variable(name).num_slices:
                    e = newest.entry(key_of(name))
                    w.add_raw(target, e, newest.read_raw(e))
                else:
                    w.add(target, newest.read(name))
                if progress:
                    done += newest.variable(name).nbytes
                    progress(done, total)
            if newest.is_object_based:
                if graph_bytes is not None:
                    w.add(OBJECT_GRAPH_KEY, graph_bytes)
                elif raw and isinstance(newest, BundleCheckpoint):
                    e = newest.entry(key_of(OBJECT_GRAPH_KEY))
                    w.add_raw(OBJECT_GRAPH_KEY, e, newest.read_raw(e))
                else:
                    w.add(OBJECT_GRAPH_KEY, newest.read(OBJECT_GRAPH_KEY))
            res = w.finish()
        result.files, result.nbytes = list(res.files), res.nbytes
        return result
    finally:
        for ck in cks:
            ck.close()


def _mean(cks: Sequence[Checkpoint], name: str) -> np.ndarray:
    """The mean of ``name`` over the inputs (:func:`running_mean`), rounded once to its dtype."""
    dtypes: list[Any] = []

    def values() -> Iterator[Any]:
        for ck in cks:
            value = ck.read(name)
            dtypes.append(value.dtype)
            yield value

    mean = running_mean(values())
    return mean.astype(dtypes[0])


#: Elements updated per step of :func:`running_mean`: its temporaries are this big, not a tensor big.
BLOCK = 1 << 16


def running_mean(values: Iterable[NDArray[Any]]) -> NDArray[np.float64]:
    """The float64 mean of equally shaped arrays, taken one at a time (memory: the mean and one
    input; for float64 inputs also a compensation term).

    The running mean ``m += (x - m) / k`` rather than a sum divided at the end: for n identical
    inputs every step adds exactly 0, so the mean is the input bit for bit (a float64 sum is not:
    0.1 three times sums to 0.30000000000000004, and 1.7e308 twice to inf). Each step lands
    between ``m`` and ``x``, so the mean stays within the inputs' bounds and finite inputs give a
    finite mean; where ``x - m`` itself overflows (opposite signs near the float64 limit), the
    step is ``x / k - m / k``. An infinite or NaN input makes that element inf or NaN as IEEE
    sums would (inf and finite: inf; +inf and -inf: NaN).

    Float64 inputs carry the rounding error of every step along in a second array (the exact
    error of ``x - m`` and of ``m + q`` by TwoSum, of ``q * k`` by Dekker's product): their mean
    is the exact mean rounded once (a plain float64 sum gets about half of random means wrong in
    the last bit), short of near-ties finer than the pair's 106 bits (inputs 2**50 apart in
    magnitude), where it is the other neighbour of the exact mean. Narrower inputs need none:
    float64 holds their mean far beyond their precision.
    """
    import numpy as np

    acc: NDArray[np.float64] | None = None
    comp: NDArray[np.float64] | None = None
    k = 0
    for value in values:
        x = np.asarray(value)
        k += 1
        if acc is None:
            acc = np.array(x, dtype=np.float64)  # a copy: never a view of the input
            if x.dtype == np.float64:
                comp = np.zeros_like(acc)
            continue
        if x.shape != acc.shape:
            raise CkptError(f"cannot average shapes {list(acc.shape)} and {list(x.shape)}")
        flat_acc, flat_x = acc.reshape(-1), x.reshape(-1)
        flat_comp = comp.reshape(-1) if comp is not None else None
        for lo in range(0, flat_acc.size, BLOCK):
            _step(flat_acc[lo:lo + BLOCK], None if flat_comp is None else flat_comp[lo:lo + BLOCK],
                  flat_x[lo:lo + BLOCK], k)
    if acc is None:
        raise CkptError("cannot average nothing")
    if comp is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            np.add(acc, comp, out=acc, where=(comp != 0) & np.isfinite(acc))
    return acc


def _step(m: NDArray[np.float64], c: NDArray[np.float64] | None, x: NDArray[Any], k: int) -> None:
    """``m`` (a block of the running mean, updated in place; ``c`` its compensation, or None)
    takes in its ``k``-th input ``x``."""
    import numpy as np

    x = x.astype(np.float64, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        d = np.subtract(x, m)
        finite = np.isfinite(d)
        if finite.all():
            if c is not None:
                _compensated(m, c, x, d, k)
                return
            d /= k
            np.add(m, d, out=m, where=d != 0)  # not m + 0.0: that turns -0.0 into 0.0
            return
        if c is not None:  # the finite part compensated, the rest as below with no compensation
            mf_, cf_ = m[finite], c[finite]
            _compensated(mf_, cf_, x[finite], d[finite], k)
            m[finite], c[finite] = mf_, cf_
            c[~finite] = 0.0
            d[finite] = 0.0
        xf, mf = np.isfinite(x), np.isfinite(m)
        over = ~finite & xf & mf  # both finite, the difference beyond float64: halve first
        d /= k
        d[over] = x[over] / k - m[over] / k
        special = ~(xf & mf)  # an inf or NaN: what the IEEE sum makes of it
        d[special] = 0.0
        m[special] += x[special]
        np.add(m, d, out=m, where=d != 0)


_SPLIT = 134217729.0  # 2**27 + 1: Dekker's splitter for float64
_SPLIT_LIMIT = 2.0 ** 995  # beyond it the splitter overflows: no product correction there


def _compensated(m: NDArray[np.float64], c: NDArray[np.float64], x: NDArray[np.float64], d: NDArray[np.float64],
                 k: int) -> None:
    """One compensated step where ``d = fl(x - m)`` is finite: ``m + c`` moves to the running mean
    of ``k`` inputs, ``m`` by its rounded step and ``c`` by every rounding error made."""
    import numpy as np

    bb = d - x  # TwoSum(x, -m): e1 is the exact error of d
    e1 = (x - (d - bb)) - (m + bb)
    q = d / k
    p = q * k  # Dekker: p + perr == q * k exactly (k < 2**26 is its own split)
    t = _SPLIT * q
    qh = t - (t - q)
    residual = (d - p) - ((qh * k - p) + (q - qh) * k)  # d - q * k, exactly
    residual[~(np.abs(q) < _SPLIT_LIMIT)] = 0.0  # p may overflow there: that step uncorrected
    q_lo = ((residual + e1) - c) / k
    s = m + q  # TwoSum(m, q): e3 is the exact error of s
    bb = s - m
    e3 = (m - (s - bb)) + (q - bb)
    np.copyto(m, s, where=q != 0)  # not m + 0.0: that turns -0.0 into 0.0
    c += e3 + q_lo  # m + c moved by q + q_lo, of which m took s - m = q - e3


def _stored_bytes(ck: Any, name: str, raw: bool, graph_bytes: bytes | None) -> int:
    """Bytes ``name`` takes in the output's data files."""
    from ckptool.format import dtypes
    from ckptool.ops.write.writer import encode_tensor

    if name == OBJECT_GRAPH_KEY and graph_bytes is not None:
        value = graph_bytes
    else:
        v: Variable = ck.variable(name)
        dt = dtypes.from_name(v.dtype)
        if dt.is_fixed:
            return v.numel * dt.itemsize
        if raw and not v.num_slices:
            e: Entry = ck.entry(key_of(name))
            return e.size
        value = ck.read(name)
    data = encode_tensor(key_of(name), value)[2]
    if isinstance(data, (bytes, bytearray, memoryview)):
        return len(memoryview(data).cast("B"))
    if hasattr(data, "nbytes"):
        return int(data.nbytes)
    return sum(len(memoryview(c).cast("B")) for c in data)
