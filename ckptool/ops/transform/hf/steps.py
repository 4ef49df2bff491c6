"""The weight map's transforms: the one table of steps (:data:`STEPS`) and their parsed form (:class:`Op`).

A rule's ``op`` is steps separated by spaces, applied in order, each ``NAME`` or ``NAME:ARGS``.
:func:`parse_op` parses it once, when the rule is built (an unknown step or a malformed
argument raises :class:`TableError` then, at import); the HF shape (:meth:`Op.shape`), the
values (:meth:`Op.apply`) and ``--dry-run``'s words (:meth:`Op.text`) all read that parsed form.

Arguments: an ``AXIS`` or ``K`` is an integer; a ``FIELD`` a config field; a ``DIM`` an integer,
``-1`` or a product of integers and config fields (``num_heads*d_kv``); an ``I`` an integer or
the name of a group of the rule's pattern (or of its ``fan``), whose value is a number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError

if TYPE_CHECKING:
    import numpy as np

Shape = tuple[int, ...]
_FIELD = re.compile(r"[A-Za-z_]\w*")
_DIM = re.compile(r"-1|(\d+|[A-Za-z_]\w*)(\*(\d+|[A-Za-z_]\w*))*")


class TableError(CkptError):
    """A family's rule table is malformed (a bug of the table, raised when it is built)."""


@dataclass(frozen=True)
class Ctx:
    """What a step reads besides the tensor: the config and the rule's matched groups."""

    config: Mapping[str, Any]
    groups: Mapping[str, str]
    name: str = ""

    def index(self, arg: str) -> int:
        if arg.lstrip("-").isdigit():
            return int(arg)
        value = self.groups.get(arg)
        if value is None or not value.isdigit():
            raise CkptError(f"tensor {self.name!r}: group {arg!r} is {value!r}, not a number")
        return int(value)

    def dim(self, expr: str) -> int:
        n = 1
        for part in expr.split("*"):
            if part.lstrip("-").isdigit():
                n *= int(part)
                continue
            v = self.config.get(part)
            if not isinstance(v, int) or isinstance(v, bool):
                raise CkptError(f"tensor {self.name!r}: config field {part!r} is {v!r}, which the reshape needs")
            n *= v
        return n


@dataclass(frozen=True)
class Kind:
    """One step: how many arguments and of what form, its shape, its values, its words."""

    args: str  # one letter per argument: a AXIS/K (int), f FIELD, d DIM, i I; "+" after: one or more
    shape: Callable[[Shape, tuple[str, ...], Ctx], Shape]
    apply: Callable[[Any, tuple[str, ...], Ctx], Any]
    text: Callable[[tuple[str, ...]], str]


def _np() -> Any:
    import numpy as np

    return np


def _axis(shape: Shape, axis: int, ctx: Ctx) -> int:
    if not -len(shape) <= axis < len(shape):
        raise CkptError(f"tensor {ctx.name!r} has shape {list(shape)}: no axis {axis}")
    return axis % len(shape)


def _transpose(x: Any) -> Any:
    """``x`` with its axes reversed, contiguous (a matrix: by :func:`transpose_rows`)."""
    np = _np()
    if x.ndim != 2 or x.size < 1 << 16:
        return np.transpose(x)
    out = np.empty(x.shape[::-1], x.dtype)
    transpose_rows(out, 0, x)
    return out


def strip_rows(itemsize: int) -> int:
    """How many input rows :func:`transpose_rows` moves at once: as many as fill one 64-byte
    cache line of each output row."""
    return max(1, _LINE // itemsize)


def transpose_rows(out: Any, i: int, rows: Any) -> None:
    """``out[:, i:i + len(rows)] = rows.T``, a strip of :func:`strip_rows` rows at a time: each
    output cache line written whole once, the strip's input rows read in order (1024x4096
    float32 in 7 ms of CPU, where numpy's strided copy of the whole transpose takes 24 ms
    and 256x256 tiles 15 ms). The one transpose of a matrix, whole or a block of rows at a time."""
    t = strip_rows(rows.dtype.itemsize)
    for k in range(0, rows.shape[0], t):
        out[:, i + k:i + k + t] = rows[k:k + t].T


_LINE = 64


def _perm_shape(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    if len(a) != len(shape):
        raise CkptError(f"tensor {ctx.name!r} has shape {list(shape)}, not the {len(a)} axes expected")
    return tuple(shape[int(x)] for x in a)


def _rows(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    n = ctx.config.get(a[0])
    return (n, *shape[1:]) if isinstance(n, int) and shape and n <= shape[0] else shape


def _pad(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    n = ctx.config.get(a[0])
    return (n, *shape[1:]) if isinstance(n, int) and shape and n >= shape[0] else shape


def _reshape(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    dims = [-1 if x == "-1" else ctx.dim(x) for x in a]
    known = math.prod(d for d in dims if d != -1)
    total = math.prod(shape)
    if dims.count(-1) == 1 and known and total % known == 0:
        dims[dims.index(-1)] = total // known
    if -1 in dims or math.prod(dims) != total:
        raise CkptError(f"tensor {ctx.name!r} has shape {list(shape)}, which cannot be reshaped to {list(a)}")
    return tuple(dims)


def _take(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    axis, i = _axis(shape, int(a[0]), ctx), ctx.index(a[1])
    if not 0 <= i < shape[axis]:
        raise CkptError(f"tensor {ctx.name!r} has shape {list(shape)}: no index {i} on axis {axis}")
    return shape[:axis] + shape[axis + 1:]


def _part(shape: Shape, a: tuple[str, ...], ctx: Ctx) -> Shape:
    axis, i, n = _axis(shape, int(a[0]), ctx), ctx.index(a[1]), int(a[2])
    if shape[axis] % n or not 0 <= i < n:
        raise CkptError(f"tensor {ctx.name!r} has shape {list(shape)}: axis {axis} is not {n} parts")
    return shape[:axis] + (shape[axis] // n,) + shape[axis + 1:]


def _take_apply(x: Any, a: tuple[str, ...], ctx: Ctx) -> Any:
    return _np().take(x, ctx.index(a[1]), axis=int(a[0]))


def _part_apply(x: Any, a: tuple[str, ...], ctx: Ctx) -> Any:
    axis, i, n = int(a[0]) % x.ndim, ctx.index(a[1]), int(a[2])
    k = x.shape[axis] // n
    return x[(slice(None),) * axis + (slice(i * k, (i + 1) * k),)]


def _pad_apply(x: Any, a: tuple[str, ...], ctx: Ctx) -> Any:
    n = ctx.config.get(a[0])
    if not isinstance(n, int) or n <= x.shape[0]:
        return x
    return _np().concatenate([x, _np().zeros((n - x.shape[0], *x.shape[1:]), x.dtype)])


#: The steps, one row each: the only place a step's meaning is written.
STEPS: dict[str, Kind] = {
    "T": Kind("", lambda s, a, c: s[::-1], lambda x, a, c: _transpose(x), lambda a: "transpose"),
    "squeeze": Kind("", lambda s, a, c: tuple(d for d in s if d != 1), lambda x, a, c: _np().squeeze(x),
                    lambda a: "squeeze"),
    "merge": Kind("a", lambda s, a, c: (math.prod(s[:int(a[0])]), math.prod(s[int(a[0]):])),
                  lambda x, a, c: x.reshape(math.prod(x.shape[:int(a[0])]), -1), lambda a: f"merge axes at {a[0]}"),
    "flat": Kind("", lambda s, a, c: (math.prod(s),), lambda x, a, c: x.reshape(-1), lambda a: "flatten"),
    "perm": Kind("a+", _perm_shape, lambda x, a, c: _np().transpose(x, [int(v) for v in a]),
                 lambda a: f"axes ({','.join(a)})"),
    "rows": Kind("f", _rows, lambda x, a, c: x[:c.config[a[0]]] if isinstance(c.config.get(a[0]), int) else x,
                 lambda a: f"first {a[0]} rows"),
    "pad": Kind("f", _pad, _pad_apply, lambda a: f"zero rows up to {a[0]}"),
    "reshape": Kind("d+", _reshape, lambda x, a, c: x.reshape(_reshape(x.shape, a, c)),
                    lambda a: f"reshape to ({','.join(a)})"),
    "take": Kind("ai", _take, _take_apply, lambda a: f"index {a[1]} of axis {a[0]}"),
    "part": Kind("aia", _part, _part_apply, lambda a: f"part {a[1]} of {a[2]} along axis {a[0]}"),
}

_ARG = {"a": re.compile(r"-?\d+"), "f": _FIELD, "d": _DIM, "i": re.compile(r"\d+|[A-Za-z_]\w*")}


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[str, ...]

    @property
    def kind(self) -> Kind:
        return STEPS[self.name]


@dataclass(frozen=True)
class Op:
    """A parsed transform: its steps, in order."""

    steps: tuple[Step, ...] = ()

    def shape(self, shape: Shape, ctx: Ctx) -> Shape:
        for s in self.steps:
            shape = tuple(s.kind.shape(tuple(shape), s.args, ctx))
        return shape

    def apply(self, arr: np.ndarray, ctx: Ctx) -> np.ndarray:
        for s in self.steps:
            arr = s.kind.apply(arr, s.args, ctx)
        return arr

    def text(self) -> str:
        return ", ".join(s.kind.text(s.args) for s in self.steps)

    def groups(self) -> set[str]:
        """The group names the steps read (``take:0,k``'s ``k``)."""
        return {a for s in self.steps for letter, a in zip(_letters(s), s.args)
                if letter == "i" and not a.isdigit()}


def _letters(step: Step) -> str:
    spec = step.kind.args
    return spec[:-1] + spec[-2] * (len(step.args) - len(spec) + 1) if spec.endswith("+") else spec


def _step(word: str, op: str) -> Step:
    name, colon, rest = word.partition(":")
    kind = STEPS.get(name)
    if kind is None:
        raise TableError(f"transform {op!r}: unknown step {name!r} (known: {', '.join(STEPS)})")
    args = tuple(rest.split(",")) if colon else ()
    spec = kind.args
    many = spec.endswith("+")
    if (len(args) < len(spec) - 1) if many else (len(args) != len(spec)):
        raise TableError(f"transform {op!r}: step {name!r} takes {len(spec) - many}{'+' if many else ''} "
                         f"arguments, not {len(args)}")
    step = Step(name, args)
    for letter, a in zip(_letters(step), args):
        if not _ARG[letter].fullmatch(a):
            raise TableError(f"transform {op!r}: step {name!r}: bad argument {a!r}")
    if name == "perm" and sorted(int(a) for a in args) != list(range(len(args))):
        raise TableError(f"transform {op!r}: perm:{rest} is not a permutation")
    return step


@cache
def parse_op(op: str) -> Op:
    """``op``'s steps, parsed (cached: a rule's op is parsed once)."""
    return Op(tuple(_step(w, op) for w in op.split()))


__all__ = ["STEPS", "Ctx", "Kind", "Op", "Step", "TableError", "parse_op", "strip_rows", "transpose_rows"]
