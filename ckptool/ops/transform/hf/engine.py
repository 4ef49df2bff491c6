"""The engine of ``convert --to hf``: an architecture is a table of rules, TF name -> HF name
and a transform; this module matches a checkpoint's names against one, computes the HF shapes,
and checks and completes the model's config from them.

A :class:`Rule` is ``tf`` (a regular expression matched whole against the TF name, without an
object key's ``/.ATTRIBUTES/VARIABLE_VALUE``), ``hf`` (the HF name, ``{group}`` filled from the
match; ``{n-4}``, ``{2*i-1}``: arithmetic on a numeric group), ``op`` (the transform, steps
separated by spaces, applied in order) and ``dims`` (per HF dimension the config field it must
equal: ``"hidden_size"``, ``"3*n_embd"``, ``"num_heads*d_kv"``; ``""`` is not checked).
``hf=None`` leaves the variable out on purpose, ``why`` saying why. Steps:

======================  ==============================================================
``T``                   transpose (all axes reversed, as ``np.transpose``)
``squeeze``             drop every axis of length 1
``merge:K``             reshape to 2-D: the first K axes, then the rest
``flat``                reshape to 1-D
``perm:A,B,C,D``        ``np.transpose(x, (A, B, C, D))``
``rows:FIELD``          the first ``config[FIELD]`` rows (a padded vocabulary)
``expand:A``            a new axis of length 1 at ``A`` (``np.expand_dims``; ``-1``: last)
======================  ==============================================================

Before the rules, every architecture leaves out what no model holds: training bookkeeping
(``global_step``, ``save_counter``, the object graph), optimizer state
(``ckptool.format.slots``, mesh TensorFlow's ``*_slot_*``) and ``ExponentialMovingAverage``
shadows (the raw weights are what transformers' loaders take).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UsageError
from ckptool.format.slots import is_optimizer_name

if TYPE_CHECKING:
    import numpy as np

    from ckptool.ops.transform.convert.source import Spec

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
BOOKKEEPING = "training bookkeeping"
OPTIMIZER = "optimizer state"
AVERAGE = "moving average (the raw weight is exported)"
_BOOKKEEPING = re.compile(r"(.*/)?(global_step|save_counter|_CHECKPOINTABLE_OBJECT_GRAPH)")
_MESH_SLOT = re.compile(r".*_slot_[A-Za-z0-9]+")  # mesh TensorFlow's Adafactor / Adam slots
_OPTIMIZER_SCOPE = re.compile(r"(.*/)?(AdamWeightDecayOptimizer(_\d+)?|LAMB(_\d+)?)(/.*)?")
_EMA = re.compile(r".*/ExponentialMovingAverage")
_INDEX = re.compile(r"(?:(\d+)\*)?(\w+)(?:([+-])(\d+))?")


@dataclass(frozen=True)
class Rule:
    tf: str
    hf: str | None
    op: str = ""
    dims: tuple[str, ...] = ()
    why: str = ""


def dense(tf: str, hf: str, out: str, inn: str, op: str = "T", w: str = "kernel", b: str = "bias",
          bias_op: str = "") -> list[Rule]:
    """A dense layer's two rules: ``TF/kernel`` -> ``HF.weight`` (transposed) and ``TF/bias``."""
    return [Rule(f"{tf}/{w}", f"{hf}.weight", op, (out, inn)), Rule(f"{tf}/{b}", f"{hf}.bias", bias_op, (out,))]


def norm(tf: str, hf: str, dim: str, w: str = "gamma", b: str = "beta", op: str = "") -> list[Rule]:
    """A layer norm's two rules: ``TF/gamma`` -> ``HF.weight``, ``TF/beta`` -> ``HF.bias``."""
    return [Rule(f"{tf}/{w}", f"{hf}.weight", op, (dim,)), Rule(f"{tf}/{b}", f"{hf}.bias", op, (dim,))]


#: a family's hook: completes ``config`` from the plan (fields only the family knows how to set)
Finish = Callable[["Plan", dict[str, Any], str], None]


@dataclass(frozen=True)
class Arch:
    """One exported model: its rules, how it is recognised and what its config needs."""

    name: str  # --arch NAME (the family's name picks among its archs by variable names)
    family: str
    model_type: str
    architecture: str  # the transformers class in config.json's "architectures"
    rules: tuple[Rule, ...]
    detect: tuple[str, ...]  # the arch is a candidate when each pattern matches a TF name (re.search)
    counts: Mapping[str, str] = field(default_factory=dict)  # HF-name regex (one group) -> config field
    required: tuple[str, ...] = ()  # config fields the tensors cannot tell
    keys: Mapping[str, str] = field(default_factory=dict)  # release config key -> HF key
    passthrough: bool = False  # keep release keys not in `keys` (configs that use HF's names)
    defaults: Mapping[str, Any] = field(default_factory=dict)  # set unless the config says
    finish: Finish | None = None
    constants: Callable[[Plan], list[Placed]] | None = None  # tensors the model has that TF never held
    tokenizer: str = ""  # the tokenizer class written with --vocab ("" takes the vocab's kind)
    aliases: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # ... and no TF name matches any of these (RoFormer: no position embeddings)


@dataclass
class Placed:
    spec: Spec
    name: str  # the TF name without the object-key suffix
    hf: str
    op: str
    shape: tuple[int, ...]  # the HF shape
    dims: tuple[str, ...]


@dataclass
class Plan:
    arch: Arch
    placed: list[Placed]
    dropped: list[tuple[str, str]]  # (TF name, why)
    unplaced: list[str]

    def has(self, pattern: str) -> bool:
        """Whether some placed tensor's HF name matches ``pattern`` (re.search)."""
        rx = re.compile(pattern)
        return any(rx.search(p.hf) for p in self.placed)

    def shape_of(self, pattern: str) -> tuple[int, ...] | None:
        rx = re.compile(pattern)
        return next((p.shape for p in self.placed if rx.search(p.hf)), None)


def short(name: str) -> str:
    return name.removesuffix(SUFFIX)


def left_out(name: str, dtype: str) -> str | None:
    """Why a variable no architecture holds is left out, or None."""
    if dtype == "string" or _BOOKKEEPING.fullmatch(name):
        return BOOKKEEPING
    if is_optimizer_name(name) or _MESH_SLOT.fullmatch(name.rsplit("/", 1)[-1]) or _OPTIMIZER_SCOPE.fullmatch(name):
        return OPTIMIZER
    if _EMA.fullmatch(name):
        return AVERAGE
    return None


def _index(expr: str, groups: Mapping[str, str | None]) -> str:
    m = _INDEX.fullmatch(expr)
    if m is None or groups.get(m[2]) is None:
        raise UsageError(f"rule template {{{expr}}}: no such group")  # a table bug, found by the tests
    value = groups[m[2]] or ""
    if m[1] is None and m[3] is None:
        return str(int(value)) if value.isdigit() else value
    n = int(value) * int(m[1] or 1)
    n += int(m[4]) if m[3] == "+" else -int(m[4] or 0)
    return str(n)


def _fill(template: str, groups: Mapping[str, str | None]) -> str:
    return re.sub(r"\{([^}]+)\}", lambda m: _index(m[1], groups), template)


def plan(arch: Arch, specs: list[Spec], config: Mapping[str, Any]) -> Plan:
    """Place every spec by the first rule whose pattern matches its name."""
    compiled = [(re.compile(r.tf), r) for r in arch.rules]
    out = Plan(arch, [], [], [])
    for s in specs:
        name = short(s.name)
        why = left_out(name, s.dtype)
        if why is not None:
            out.dropped.append((name, why))
            continue
        for rx, rule in compiled:
            m = rx.fullmatch(name)
            if m is None:
                continue
            if rule.hf is None:
                out.dropped.append((name, rule.why))
            else:
                shape = out_shape(rule.op, tuple(s.shape), config, name)
                out.placed.append(Placed(s, name, _fill(rule.hf, m.groupdict()), rule.op, shape, rule.dims))
            break
        else:
            out.unplaced.append(name)
    seen: dict[str, str] = {}
    for p in out.placed:
        if p.hf in seen:
            raise CkptError(f"{seen[p.hf]!r} and {p.name!r} both become {p.hf!r}")
        seen[p.hf] = p.name
    return out


# --------------------------------------------------------------------------- transforms


def _steps(op: str) -> list[tuple[str, str]]:
    return [(s.partition(":")[0], s.partition(":")[2]) for s in op.split()]


def out_shape(op: str, shape: tuple[int, ...], config: Mapping[str, Any], name: str) -> tuple[int, ...]:
    for step, arg in _steps(op):
        if step == "T":
            shape = shape[::-1]
        elif step == "squeeze":
            shape = tuple(d for d in shape if d != 1)
        elif step == "merge":
            k = int(arg)
            shape = (math.prod(shape[:k]), math.prod(shape[k:]))
        elif step == "flat":
            shape = (math.prod(shape),)
        elif step == "perm":
            axes = [int(a) for a in arg.split(",")]
            if len(axes) != len(shape):
                raise CkptError(f"tensor {name!r} has shape {list(shape)}, not the {len(axes)} axes expected")
            shape = tuple(shape[a] for a in axes)
        elif step == "rows":
            n = config.get(arg)
            if isinstance(n, int) and shape and n <= shape[0]:
                shape = (n,) + shape[1:]
        elif step == "expand":
            at = int(arg) if int(arg) >= 0 else len(shape) + 1 + int(arg)
            shape = shape[:at] + (1,) + shape[at:]
        else:
            raise UsageError(f"unknown transform step {step!r}")
    return shape


def apply(op: str, arr: np.ndarray, config: Mapping[str, Any]) -> np.ndarray:
    import numpy as np

    for step, arg in _steps(op):
        if step == "T":
            arr = np.transpose(arr)
        elif step == "squeeze":
            arr = np.squeeze(arr)
        elif step == "merge":
            k = int(arg)
            arr = arr.reshape(math.prod(arr.shape[:k]), math.prod(arr.shape[k:]))
        elif step == "flat":
            arr = arr.reshape(-1)
        elif step == "perm":
            arr = np.transpose(arr, [int(a) for a in arg.split(",")])
        elif step == "rows":
            arr = arr[:config[arg]] if isinstance(config.get(arg), int) else arr
        elif step == "expand":
            arr = np.expand_dims(arr, int(arg))
    return arr


def describe(op: str) -> str:
    """A transform as --dry-run shows it."""
    words = {"T": "transpose", "squeeze": "squeeze", "flat": "flatten"}
    out = []
    for step, arg in _steps(op):
        out.append(words.get(step) or {"merge": f"merge axes at {arg}", "perm": f"axes ({arg})",
                                       "rows": f"first {arg} rows",
                                       "expand": f"new axis at {arg}"}.get(step, step))
    return ", ".join(out)


# --------------------------------------------------------------------------- the config


def _terms(expr: str) -> tuple[int, list[str]]:
    k, fields = 1, []
    for part in expr.split("*"):
        if part.isdigit():
            k *= int(part)
        else:
            fields.append(part)
    return k, fields


def complete(plan_: Plan, config: dict[str, Any], where: str) -> None:
    """Check ``config`` against the tensors' shapes and fill what it does not say from them.

    A field the config gives that a shape contradicts is an error naming the field, its value
    and the tensor; one it leaves out is taken from the first tensor that tells it."""
    told: dict[str, str] = {}  # field -> the tensor that told it
    for p in plan_.placed:
        if len(p.dims) not in (0, len(p.shape)):
            raise CkptError(f"tensor {p.name!r} has shape {list(p.shape)} for {p.hf!r}, which takes "
                            f"{len(p.dims)} dimensions")
        for size, expr in zip(p.shape, p.dims):
            if expr:
                _check_dim(config, told, expr, size, p, where)
    for pattern, fld in plan_.arch.counts.items():
        rx = re.compile(pattern)
        seen = {int(m[1]) for p in plan_.placed if (m := rx.search(p.hf))}
        if not seen:
            continue
        n = max(seen) + 1
        missing = sorted(set(range(n)) - seen)
        if missing:
            raise CkptError(f"the checkpoint's layers counted as {fld} are {sorted(seen)}: {missing[0]} is missing")
        _check_value(config, told, fld, n, f"the checkpoint's {n} layers", where)
    if plan_.arch.finish is not None:
        plan_.arch.finish(plan_, config, where)
    missing_fields = [f for f in plan_.arch.required if config.get(f) is None]
    if missing_fields:
        raise CkptError(f"{where or 'the config'}: no {missing_fields[0]}, which the tensors cannot tell "
                        f"({plan_.arch.name} needs {', '.join(plan_.arch.required)}; give --config)")


def _check_dim(config: dict[str, Any], told: dict[str, str], expr: str, size: int, p: Placed, where: str) -> None:
    k, fields = _terms(expr)
    unknown = [f for f in fields if not _is_int(config.get(f))]
    by = f"tensor {p.name!r} {list(p.spec.shape)}"
    if len(unknown) == 1:
        rest = k * math.prod(config[f] for f in fields if f != unknown[0])
        if rest and size % rest == 0:
            config[unknown[0]] = size // rest
            told[unknown[0]] = by
            return
        raise CkptError(f"{by}: dimension {size} is not a multiple of {rest} ({expr})")
    if unknown:
        return  # two fields unknown: the required check names them
    want = k * math.prod(config[f] for f in fields)
    if want == size:
        return
    if len(fields) == 1:
        _disagree(fields[0], config[fields[0]], size // k if size % k == 0 else size, by, told, where)
    values = ", ".join(f"{f}={config[f]}" for f in fields)
    raise CkptError(f"{where + ': ' if where else ''}{expr} is {want} ({values}), but {by} has {size} there")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _disagree(fld: str, have: Any, value: Any, by: str, told: Mapping[str, str], where: str) -> None:
    if fld in told:
        raise CkptError(f"the tensors disagree on {fld}: {told[fld]} gives {have}, {by} gives {value}")
    raise CkptError(f"{where or 'the config'}: {fld} is {have}, but {by} gives {value}")


def _check_value(config: dict[str, Any], told: dict[str, str], fld: str, value: Any, by: str, where: str) -> None:
    if config.get(fld) is None:
        config[fld] = value
        told[fld] = by
    elif config[fld] != value:
        _disagree(fld, config[fld], value, by, told, where)


def check_value(config: dict[str, Any], fld: str, value: Any, by: str, where: str) -> None:
    """A family's check: ``config[fld]`` is ``value`` (set when absent), else an error naming both."""
    _check_value(config, {}, fld, value, by, where)


__all__ = ["AVERAGE", "BOOKKEEPING", "OPTIMIZER", "Arch", "Placed", "Plan", "Rule", "apply", "check_value",
           "complete", "dense", "describe", "left_out", "norm", "out_shape", "plan", "short"]
