"""``convert --ema``: a source whose variables read as their exponential moving averages.

:func:`ema_source` wraps what ``convert`` reads (an :class:`~ckptool.ops.read.source.Opened`:
any checkpoint, ``.safetensors`` with ckptool's metadata, a Keras 3 file) and returns another:
each variable that has an average (:mod:`ckptool.ops.read.ema` finds them) keeps its name but
takes the average's dtype, shape and value (a V2 average is still copied as stored bytes);
the averages themselves stay, or with ``strip_optimizer`` go with the optimizer's state (the
object graph edited to match, as ``rewrite-names --strip-optimizer`` does). Every writer that
takes an ``Opened`` (TF checkpoint, ``.safetensors``, ``.npz``; the Keras 3 bridge and
``--to hf`` alike) writes the evaluation weights through it. A checkpoint without averages is
an error; variables without one keep their value and are counted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph
from ckptool.format.slots import optimizer_keys
from ckptool.ops.read.ema import EmaPlan, plan_ema

if TYPE_CHECKING:
    from ckptool.ops.read.source import Opened, Spec


@dataclass
class EmaReport:
    """What ``--ema`` did: the layout found, the variables given their average's value, those
    without one (kept as they were), and what ``strip_optimizer`` dropped."""

    kind: str
    averaged: list[str] = field(default_factory=list)
    without: list[str] = field(default_factory=list)
    dropped: int = 0
    source: dict[str, str] = field(default_factory=dict, repr=False)  # output name -> the tensor it reads

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "averaged": len(self.averaged), "without_average": len(self.without),
                "kept_without_average": list(self.without), "dropped": self.dropped}


def _graph_bytes(spec: Spec) -> bytes:
    return bytes(spec.stored if spec.stored is not None else spec.load().reshape(())[()])


def _graph_spec(template: Spec, data: bytes) -> Spec:
    import numpy as np

    def load() -> Any:
        arr = np.empty((), dtype=object)
        arr[()] = data
        return arr

    return dataclasses.replace(template, load=load, raw=None, stored=data)


def plan_of(opened: Opened, where: str, keras_config: Any = None) -> EmaPlan:
    """The averages of an opened source; CkptError when it has none. ``keras_config``: a Keras 3
    source's model config where the file holds none (a ``.weights.h5`` and ``--template-config``)."""
    specs = opened.specs
    tensors = [(s.name, s.dtype, tuple(s.shape)) for s in specs]
    ck = opened.checkpoint
    if getattr(ck, "format", None) == "keras":
        config = keras_config if keras_config is not None else getattr(ck, "config", None)
        plan = plan_ema(tensors, keras_config=config, keras_layers=ck.layers(),  # type: ignore[attr-defined]
                        where=where)
    else:
        g = next((s for s in specs if s.name == OBJECT_GRAPH_KEY), None)
        graph = ObjectGraph.parse(_graph_bytes(g), f"{where}: {OBJECT_GRAPH_KEY}") if g is not None else None
        plan = plan_ema(tensors, graph, where=where)
    if plan is None:
        raise CkptError(f"{where}: no moving averages found (TF1 VAR/ExponentialMovingAverage, or an optimizer "
                        f"with use_ema=True in tf_keras or Keras 3): --ema has nothing to export")
    return plan


def ema_source(opened: Opened, *, ema: bool = True, strip_optimizer: bool = False,
               where: str = "", keras_config: Any = None) -> tuple[Opened, EmaReport | None]:
    """``opened`` with each variable read as its moving average (see the module docstring);
    ``ema=False`` with ``strip_optimizer``: only the optimizer's state (and any averages) dropped.
    The report's ``source`` names, for each output name that reads another tensor, that tensor.
    ``keras_config``: as for :func:`plan_of`."""
    plan = plan_of(opened, where, keras_config) if ema else _plan_or_none(opened, where)
    by = {s.name: s for s in opened.specs}
    specs = []
    source: dict[str, str] = {}
    for s in opened.specs:
        avg = by.get(plan.pairs.get(s.name, "")) if ema and plan is not None else None
        if avg is not None:
            source[s.name] = avg.name
            s = dataclasses.replace(avg, name=s.name)  # the average's value under the variable's name
        specs.append(s)
    report = EmaReport(plan.kind, list(plan.pairs), list(plan.without)) if ema and plan is not None else None
    if strip_optimizer:
        specs, dropped, renamed = _strip(specs, plan, where)
        source = {new: source.get(old, old) for old, new in renamed.items()} | {
            k: v for k, v in source.items() if k not in renamed}
        if report is not None:
            report.dropped = dropped
    if report is not None:
        report.source = source
    return dataclasses.replace(opened, specs=specs), report


def _plan_or_none(opened: Opened, where: str) -> EmaPlan | None:
    try:
        return plan_of(opened, where)
    except CkptError:
        return None


def _strip(specs: list[Spec], plan: EmaPlan | None, where: str) -> tuple[list[Spec], int, dict[str, str]]:
    """Drop the averages and the optimizer's state; an object graph is edited to match (the
    optimizer cut out, variables it alone keyed re-keyed by their first path, as TF keys them).
    ``(specs, how many dropped, {old name: new name} of those re-keyed)``."""
    names = [s.name for s in specs]
    averages = plan.averages if plan is not None else set()
    g = next((s for s in specs if s.name == OBJECT_GRAPH_KEY), None)
    if g is None:
        gone = averages | optimizer_keys(names)
        return [s for s in specs if s.name not in gone], len(gone & set(names)), {}
    graph = ObjectGraph.parse(_graph_bytes(g), f"{where}: {OBJECT_GRAPH_KEY}")
    dropped = averages | optimizer_keys(names, graph)
    new_graph, keys = graph.edited({}, frozenset(dropped), strip_optimizer=True)
    out = []
    renamed: dict[str, str] = {}
    for s in specs:
        if s.name == OBJECT_GRAPH_KEY:
            out.append(_graph_spec(s, new_graph.serialize()))
            continue
        if s.name in dropped or (s.name in keys and keys[s.name] is None):
            continue
        new = keys.get(s.name) or s.name
        if new != s.name:
            renamed[s.name] = new
            s = dataclasses.replace(s, name=new)
        out.append(s)
    return out, len(specs) - len(out), renamed


__all__ = ["EmaReport", "ema_source", "plan_of"]
