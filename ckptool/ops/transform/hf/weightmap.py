r"""The one weight-map engine of ``convert --to hf``: a family is a table of rules (TF name -> HF
name and a transform); this module checks a table when it is built, matches a checkpoint's names
against it, computes the HF shapes, finds the model's weights no variable fills, and checks and
completes the model's config from the shapes.

How a family's table is written (one module per family, ``ARCHS = [Arch(...), ...]``, registered in
``ckptool.ops.transform.hf.ARCHS``)::

    Rule(tf, hf, op="", dims=(), why="", optional=False, fan="")

- ``tf``: a regular expression matched whole against the TF name (without an object key's
  ``/.ATTRIBUTES/VARIABLE_VALUE``); the first rule that matches places the variable. Named groups
  (``(?P<n>\d+)``, ``(?P<p>query|key|value)``) feed ``hf`` and the steps.
- ``hf``: the HF name, ``{group}`` filled from the match (a number without its leading zeros);
  ``{n-4}``, ``{2*i-1}``: arithmetic on a numeric group. ``hf=None`` leaves the variable out on
  purpose, ``why`` saying why (``--dry-run`` shows it).
- ``op``: the transform, steps separated by spaces, applied in order; the steps and their arguments
  are the table :data:`ckptool.ops.transform.hf.steps.STEPS`: ``T`` (reverse the axes), ``squeeze``,
  ``merge:K`` (2-D: the first K axes, the rest), ``flat``, ``perm:A,B,..`` (``np.transpose`` axes),
  ``rows:FIELD`` (the first ``config[FIELD]`` rows), ``pad:FIELD`` (zero rows up to it),
  ``reshape:D,D,..`` (each D an integer, ``-1`` or a product of integers and config fields),
  ``take:AXIS,I`` (index I of an axis, dropped), ``part:AXIS,I,N`` (the I-th of N equal parts), where
  I is an integer or a group's name (``take:0,k``). An unknown step, a bad argument, a template
  group the pattern lacks or a pattern that does not compile raise :class:`TableError` when the
  :class:`Rule` or :class:`Arch` is built, so at import.
- ``dims``: per HF dimension, the config field it must equal (``"hidden_size"``, ``"3*n_embd"``,
  ``"num_heads*d_kv"``; ``""`` unchecked); a field the config lacks is taken from the shape.
- ``optional``: the model may lack this weight (ELECTRA's ``embeddings_project`` exists only when the
  embedding size differs). Every other rule's HF weight is required: for each layer the placed names
  show (the template up to its last numeric group), and for every alternative of a group written as
  ``a|b|c`` or ``[abc]``; a required weight no variable fills is an error naming it (transformers
  would initialise it at random). What the model computes (sinusoidal positions) simply has no rule.
- ``fan``: ``"k:AXIS"`` makes one HF tensor per index along the TF tensor's AXIS, the index in group
  ``k`` (``hf="layer.{k}.r_w_bias"``, ``op="take:0,k"``).

Helpers: :func:`dense` (kernel transposed, bias) and :func:`norm` (gamma/beta -> weight/bias).
:class:`Arch` holds one exported model: ``detect`` patterns (each must match some name), ``counts``
(HF-name regex with one group -> config field: the layer count), ``required`` config fields,
``keys`` (release config key -> HF key), ``passthrough``, ``defaults``, ``values`` (HF key ->
{release value -> transformers value}: what the original code computed, e.g. mesh TF's ``gelu`` is
``gelu_new``; applied to release configs, not to an HF ``config.json``), ``finish`` (a hook
completing the config), ``constants`` (tensors TF never held), ``tokenizer``, ``aliases``, ``rename``
(names read as others), ``average`` (EMA shadows taken), ``prepare`` (tensors joined: ``common.joiner``).
Detection tries every arch whose patterns match and takes the first that places every variable
and leaves no weight unfilled.

Before the rules, every architecture leaves out what no model holds: training bookkeeping
(``global_step``, ``save_counter``, the object graph), optimizer state
(``ckptool.format.slots``, mesh TensorFlow's ``*_slot_*``) and ``ExponentialMovingAverage``
shadows (the raw weights are what transformers' loaders take; under ``--ema`` the averages are
exported as the weights, see ``export``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.slots import is_optimizer_name
from ckptool.ops.transform.hf.shadows import averaged
from ckptool.ops.transform.hf.steps import Ctx, Op, TableError, parse_op

if TYPE_CHECKING:
    import numpy as np

    from ckptool.ops.read.source import Spec

SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
BOOKKEEPING = "training bookkeeping"
OPTIMIZER = "optimizer state"
AVERAGE = "moving average (the raw weight is exported)"
_BOOKKEEPING = re.compile(r"(.*/)?(global_step|save_counter|_CHECKPOINTABLE_OBJECT_GRAPH)")
_MESH_SLOT = re.compile(r".*_slot_[A-Za-z0-9]+")  # mesh TensorFlow's Adafactor / Adam slots
_OPTIMIZER_SCOPE = re.compile(r"(.*/)?(AdamWeightDecayOptimizer(_\d+)?|LAMB(_\d+)?)(/.*)?")
_EMA = re.compile(r".*/ExponentialMovingAverage")
_INDEX = re.compile(r"(?:(\d+)\*)?(\w+)(?:([+-])(\d+))?")
_PLACEHOLDER = re.compile(r"\{([^}]+)\}")
_FAN = re.compile(r"([A-Za-z_]\w*):(-?\d+)")


@dataclass(frozen=True)
class Rule:
    tf: str
    hf: str | None
    op: str = ""
    dims: tuple[str, ...] = ()
    why: str = ""
    optional: bool = False
    fan: str = ""

    def __post_init__(self) -> None:
        parsed = parse_op(self.op)  # a typo in the steps fails here, when the table is built
        try:
            rx = re.compile(self.tf)
        except re.error as e:
            raise TableError(f"rule {self.tf!r}: the pattern does not compile ({e})") from None
        groups = set(rx.groupindex) | ({self.fan_group} if self.fan else set())
        if self.fan and _FAN.fullmatch(self.fan) is None:
            raise TableError(f"rule {self.tf!r}: fan {self.fan!r} is not NAME:AXIS")
        for expr in _PLACEHOLDER.findall(self.hf or ""):
            m = _INDEX.fullmatch(expr)
            if m is None or m[2] not in groups:
                raise TableError(f"rule {self.tf!r}: {{{expr}}} in {self.hf!r} names no group of the pattern")
        for g in parsed.groups() - groups:
            raise TableError(f"rule {self.tf!r}: transform {self.op!r} reads group {g!r}, which the pattern lacks")

    @property
    def fan_group(self) -> str:
        return self.fan.partition(":")[0]

    @property
    def parsed(self) -> Op:
        return parse_op(self.op)


def dense(tf: str, hf: str, out: str, inn: str, op: str = "T", w: str = "kernel", b: str = "bias",
          bias_op: str = "", optional: bool = False) -> list[Rule]:
    """A dense layer's two rules: ``TF/kernel`` -> ``HF.weight`` (transposed) and ``TF/bias``."""
    return [Rule(f"{tf}/{w}", f"{hf}.weight", op, (out, inn), optional=optional),
            Rule(f"{tf}/{b}", f"{hf}.bias", bias_op, (out,), optional=optional)]


def norm(tf: str, hf: str, dim: str, w: str = "gamma", b: str = "beta", op: str = "",
         optional: bool = False) -> list[Rule]:
    """A layer norm's two rules: ``TF/gamma`` -> ``HF.weight``, ``TF/beta`` -> ``HF.bias``."""
    return [Rule(f"{tf}/{w}", f"{hf}.weight", op, (dim,), optional=optional),
            Rule(f"{tf}/{b}", f"{hf}.bias", op, (dim,), optional=optional)]


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
    # HF key -> {a release config's value -> transformers' value}: what the original code computed,
    # not the key's spelling (mesh TF's "gelu" is transformers' "gelu_new"); another value is an error
    values: Mapping[str, Mapping[Any, Any]] = field(default_factory=dict)
    finish: Finish | None = None
    constants: Callable[[Plan], list[Placed]] | None = None  # tensors the model has that TF never held
    tokenizer: str = ""  # the tokenizer class written with --vocab ("" takes the vocab's kind)
    aliases: tuple[str, ...] = ()
    # TF names -> the names the rules match instead, where the whole list tells (Keras's layer_with_weights-N)
    rename: Callable[[list[str]], dict[str, str]] | None = None
    average: str = ""  # names whose ExponentialMovingAverage the 4.57 loader takes in their place (shadows.py)
    prepare: Callable[[list[Spec]], list[Spec]] | None = None  # the specs as the rules read them (common.joiner)
    absent: tuple[str, ...] = ()  # ... and no TF name matches any of these (RoFormer: no position embeddings)

    def __post_init__(self) -> None:
        for p in (*self.detect, *self.counts):
            try:
                re.compile(p)
            except re.error as e:
                raise TableError(f"arch {self.name}: pattern {p!r} does not compile ({e})") from None
        bad = [r for r in self.rules if not isinstance(r, Rule)]
        if bad:
            raise TableError(f"arch {self.name}: {bad[0]!r} is not a Rule")


@dataclass
class Placed:
    spec: Spec
    name: str  # the TF name without the object-key suffix
    hf: str
    op: str
    shape: tuple[int, ...]  # the HF shape
    dims: tuple[str, ...]
    groups: Mapping[str, str] = field(default_factory=dict)  # the rule's matched groups (and fan index)
    rule: Rule | None = None


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
        raise CkptError(f"rule template {{{expr}}}: no such group")  # Rule checks the names when built
    value = groups[m[2]] or ""
    if m[1] is None and m[3] is None:
        return str(int(value)) if value.isdigit() else value
    n = int(value) * int(m[1] or 1)
    n += int(m[4]) if m[3] == "+" else -int(m[4] or 0)
    return str(n)


def fill(template: str, groups: Mapping[str, str | None]) -> str:
    return _PLACEHOLDER.sub(lambda m: _index(m[1], groups), template)


def _fan(rule: Rule, shape: tuple[int, ...], name: str) -> list[dict[str, str]]:
    if not rule.fan:
        return [{}]
    group, _, axis = rule.fan.partition(":")
    if not -len(shape) <= int(axis) < len(shape):
        raise CkptError(f"tensor {name!r} has shape {list(shape)}: no axis {axis} to fan out")
    return [{group: str(i)} for i in range(shape[int(axis)])]


def match(arch: Arch, specs: list[Spec], config: Mapping[str, Any] | None = None) -> Plan:
    """Place every spec by the first rule whose pattern matches its name; with ``config``, the HF
    shapes too (without, the names only: what detection compares)."""
    compiled = [(re.compile(r.tf), r) for r in arch.rules]
    out = Plan(arch, [], [], [])
    specs = arch.prepare(specs) if arch.prepare is not None else specs
    names = [short(s.name) for s in specs]
    alias = arch.rename(names) if arch.rename is not None else {}
    left, read_as = averaged(arch.average, names)
    for s in specs:
        name = short(s.name)
        why = left.get(name) or (None if name in read_as else left_out(name, s.dtype))
        if why is not None:
            out.dropped.append((name, why))
            continue
        for rx, rule in compiled:
            m = rx.fullmatch(read_as.get(name) or alias.get(name, name))
            if m is None:
                continue
            if rule.hf is None:
                out.dropped.append((name, rule.why))
                break
            for extra in _fan(rule, tuple(s.shape), name):
                groups = {k: v for k, v in m.groupdict().items() if v is not None} | extra
                shape = rule.parsed.shape(tuple(s.shape), Ctx(config, groups, name)) if config is not None else ()
                out.placed.append(Placed(s, name, fill(rule.hf, groups), rule.op, shape, rule.dims, groups, rule))
            break
        else:
            out.unplaced.append(name)
    seen: dict[str, str] = {}
    for p in out.placed:
        if p.hf in seen:
            raise CkptError(f"{seen[p.hf]!r} and {p.name!r} both become {p.hf!r}")
        seen[p.hf] = p.name
    return out


def plan(arch: Arch, specs: list[Spec], config: Mapping[str, Any]) -> Plan:
    """Place every spec (:func:`match`) with its HF shape under ``config``."""
    return match(arch, specs, config)


def out_shape(op: str | Op, shape: tuple[int, ...], config: Mapping[str, Any], name: str,
              groups: Mapping[str, str] | None = None) -> tuple[int, ...]:
    return (parse_op(op) if isinstance(op, str) else op).shape(shape, Ctx(config, groups or {}, name))


def apply(op: str | Op, arr: np.ndarray, config: Mapping[str, Any], groups: Mapping[str, str] | None = None,
          name: str = "") -> np.ndarray:
    return (parse_op(op) if isinstance(op, str) else op).apply(arr, Ctx(config, groups or {}, name))


def describe(op: str | Op) -> str:
    """A transform as --dry-run shows it."""
    return (parse_op(op) if isinstance(op, str) else op).text()


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


__all__ = ["AVERAGE", "BOOKKEEPING", "OPTIMIZER", "Arch", "Placed", "Plan", "Rule", "TableError", "apply",
           "check_value", "complete", "dense", "describe", "fill", "left_out", "match", "norm", "out_shape", "plan",
           "short"]
