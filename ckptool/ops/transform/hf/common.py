"""What several families' tables share beyond the engine: PyTorch's batch-norm counters, zero biases
the original had not, and TF tensors joined into one before the rules read them."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.read.spec import Spec
from ckptool.ops.transform.hf.steps import Ctx, parse_op
from ckptool.ops.transform.hf.weightmap import Placed, Plan, short


def batch_norm_counters(plan: Plan) -> list[Placed]:
    """PyTorch's batch norm also holds ``num_batches_tracked``, which TF has not: 0, as TF loaders and
    conversion scripts leave it (one for each ``.running_mean`` placed)."""
    import numpy as np

    out = []
    for p in plan.placed:
        if p.hf.endswith(".running_mean"):
            name = p.hf.removesuffix(".running_mean") + ".num_batches_tracked"
            out.append(Placed(Spec("(0)", "int64", (), lambda: np.zeros((), np.int64)), "(0)", name, "", (), ()))
    return out




def zero_biases(pattern: str) -> Callable[[Plan], list[Placed]]:
    """An ``Arch.constants``: a zero ``.bias`` (its length the weight's last axis: a ``Conv1D``'s
    outputs) beside each placed ``.weight`` whose HF name matches ``pattern``, where the original
    layer had no bias and the model's has one (zero computes what the original did)."""
    def constants(plan: Plan) -> list[Placed]:
        import numpy as np

        rx, out = re.compile(pattern), []
        for p in plan.placed:
            if rx.search(p.hf) and p.hf.endswith(".weight"):
                n, dtype = p.shape[-1], p.spec.dtype
                out.append(Placed(Spec("(0)", dtype, (n,), functools.partial(np.zeros, n, np.dtype(dtype))), "(0)",
                                  p.hf.removesuffix(".weight") + ".bias", "", (n,), ()))
        return out
    return constants


# --------------------------------------------------------------------------- joined tensors

_HOLE = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Join:
    """Several TF tensors read as one named ``name``: the ``parts`` (name templates, ``{g}`` a name
    segment shared by all) each transformed by its ``op`` (steps.STEPS, without config fields),
    then concatenated along ``axis`` in order (ImageGPT's ``wte`` and ``sos`` rows, its per-head
    ``q_proj``/``k_proj``/``v_proj`` as one ``c_attn``). A name with a part missing stays as it is."""

    name: str
    parts: tuple[tuple[str, str], ...]  # (template, op)
    axis: int


def _fill(template: str, groups: dict[str, str]) -> str:
    return _HOLE.sub(lambda h: groups[h[1]], template)


def _joined(join: Join, specs: list[Spec], groups: dict[str, str]) -> Spec:
    ops = [parse_op(op) for _, op in join.parts]
    name = _fill(join.name, groups)
    shapes = [op.shape(tuple(s.shape), Ctx({}, {}, short(s.name))) for op, s in zip(ops, specs)]
    shape = list(shapes[0])
    for s, sh in zip(specs[1:], shapes[1:]):
        if len(sh) != len(shape) or any(a != b for i, (a, b) in enumerate(zip(sh, shape)) if i != join.axis % len(sh)):
            raise CkptError(f"{short(s.name)!r} {list(sh)} does not join {short(specs[0].name)!r} {shape} along "
                            f"axis {join.axis} (as {name!r})")
        shape[join.axis] += sh[join.axis]

    def load() -> Any:
        import numpy as np

        return np.concatenate([op.apply(s.load(), Ctx({}, {}, short(s.name))) for op, s in zip(ops, specs)],
                              axis=join.axis)

    return Spec(name, specs[0].dtype, tuple(shape), load)


def joiner(joins: tuple[Join, ...]) -> Callable[[list[Spec]], list[Spec]]:
    """An ``Arch.prepare``: the specs with each complete set of ``joins``' parts replaced by their join."""
    def prepare(specs: list[Spec]) -> list[Spec]:
        by = {short(s.name): s for s in specs}
        gone: set[str] = set()
        made = []
        for j in joins:
            first = re.compile(_HOLE.sub(lambda m: f"(?P<{m[1]}>[^/]+)", re.escape(j.parts[0][0]).replace(
                r"\{", "{").replace(r"\}", "}")))
            for n in list(by):
                m = first.fullmatch(n)
                if m is None:
                    continue
                groups = m.groupdict()
                names = [_fill(t, groups) for t, _ in j.parts]
                if all(x in by for x in names):
                    made.append(_joined(j, [by[x] for x in names], groups))
                    gone.update(names)
        return [s for s in specs if short(s.name) not in gone] + made
    return prepare


__all__ = ["Join", "batch_norm_counters", "joiner", "zero_biases"]
