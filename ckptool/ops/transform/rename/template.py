"""``rewrite-names --template``: DST takes a template checkpoint's keys, dtypes, shapes and
object graph, with values from SRC through the rules.

Every template variable SRC does not fill is an error (``init_from_checkpoint``
raises in the same case), listed with the closest SRC names, unless
``allow_missing`` keeps the template's values (named in the plan). Training
bookkeeping (``save_counter``) and optimizer state are not required.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, OPTIMIZER_SLOT, ObjectGraph, object_key
from ckptool.format.objkeys import key_of
from ckptool.ops.read.suggest import MAX_SHOWN, Suggester, listed, shorten
from ckptool.ops.transform.rename.transfer import copy_raw

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.transform.rename.assignment import Plan


@dataclass
class Fill:
    """Which template key each SRC name fills (``supply``: template key -> SRC name), and what does
    not fit: SRC names with no template key (``unused``), pairs whose dtype or shape differ
    (``mismatched``), template keys SRC leaves empty (``missing``)."""

    supply: dict[str, str] = field(default_factory=dict)
    unused: list[str] = field(default_factory=list)
    mismatched: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def with_template(ck: Any, plan: Plan, template: str, dprefix: str, storage: Storage, strict: bool, dry_run: bool,
                  force: bool, allow_missing: bool = False, sync: bool = True) -> Plan:
    """DST gets TEMPLATE's keys and graph, values from SRC (through the renames)."""
    from ckptool.ops.read.reader import open as open_checkpoint

    with open_checkpoint(template) as tp:
        tvars = {v.name: v for v in tp.variables() if v.name != OBJECT_GRAPH_KEY}
        graph = tp.object_graph() if tp.is_object_based else None
        svars = {v.name: v for v in ck.variables()}
        fill = _fill(plan, tvars, svars, graph)
        plan.template = {"path": template,
                         "from_src": [{"key": t, "source": s} for t, s in sorted(fill.supply.items())],
                         "missing": fill.missing, "unused": sorted(fill.unused), "mismatched": fill.mismatched}
        plan.object_graph = "template" if graph is not None else "none"
        _refuse(fill, strict, allow_missing, svars)
        plan.renames = [(fill.supply.get(t, f"<template>:{t}"), t) for t in sorted(tvars)]
        if dry_run:  # the same plan, counts and names, as the real run reports
            return plan
        plan.files = _write(ck, tp, sorted(tvars), fill.supply, graph, dprefix, storage, force, sync)
        return plan


def _fill(plan: Plan, tvars: dict[str, Any], svars: dict[str, Any], graph: ObjectGraph | None) -> Fill:
    """Each renamed SRC name's template key: the new name itself, its object key, or (an object-based
    template) the variable whose full name it is."""
    by_full: dict[str, str] = {}
    if graph is not None:
        for node in graph.nodes:
            for attr in node.attributes:
                by_full.setdefault(attr.full_name, attr.checkpoint_key)
    fill = Fill()
    supply = fill.supply
    for old, new in plan.renames:
        t = new if new in tvars else object_key(new) if object_key(new) in tvars else by_full.get(new)
        if t is None or t not in tvars:
            fill.unused.append(old)
            continue
        if t in supply:
            raise CkptError(f"two sources land on template key {t!r}: {supply[t]!r} and {old!r} "
                            "(nothing written)")
        supply[t] = old
    for t, old in list(supply.items()):
        a, b = tvars[t], svars[old]
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            fill.mismatched.append({"name": t, "source": old,
                                    "template": {"dtype": a.dtype, "shape": list(a.shape)},
                                    "src": {"dtype": b.dtype, "shape": list(b.shape)}})
            del supply[t]
    bad = {m["name"] for m in fill.mismatched}
    fill.missing = sorted(t for t in tvars if t not in supply and t not in bad and not (
        t.startswith("save_counter/") or t.startswith("optimizer/") or f"/{OPTIMIZER_SLOT}/" in t))
    return fill


def _refuse(fill: Fill, strict: bool, allow_missing: bool, svars: dict[str, Any]) -> None:
    """What the template check refuses, nothing written: with ``strict`` anything that does not fit;
    always a dtype or shape mismatch; template variables SRC leaves empty unless ``allow_missing``."""
    missing, unused, mismatched = fill.missing, fill.unused, fill.mismatched
    if strict and (missing or unused or mismatched):
        parts = []
        if missing:
            parts.append("missing: " + listed([shorten(t) for t in missing[:MAX_SHOWN]], len(missing)))
        if unused:
            parts.append("not in the template: " + listed([shorten(u) for u in sorted(unused)[:MAX_SHOWN]],
                                                          len(unused)))
        if mismatched:
            parts.append("shape/dtype mismatch: " + _mismatches(mismatched))
        raise CkptError("--strict template check failed: " + "; ".join(parts) + " (nothing written)")
    if mismatched:
        raise CkptError("shape/dtype mismatch with the template: " + _mismatches(mismatched) + " (nothing written)")
    if missing and not allow_missing:
        index = Suggester(svars)
        raise CkptError("template variables that SRC does not fill: " + listed(
            [_closest(t, index) for t in missing[:MAX_SHOWN]], len(missing), sep="; ")
            + " (nothing written; --allow-missing keeps the template's values)")


def _write(ck: Any, tp: Any, keys: list[str], supply: dict[str, str], graph: ObjectGraph | None, dprefix: str,
           storage: Storage, force: bool, sync: bool) -> list[str]:
    """DST: each template key's value from SRC (stored bytes copied where they can be), else the
    template's; then the template's object graph. The files written."""
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.write.writer import BundleWriter

    src_bundle = isinstance(ck, BundleCheckpoint)
    with BundleWriter(dprefix, storage=storage, force=force, sync=sync) as w:
        for t in keys:
            s = supply.get(t)
            if s is not None:
                e = ck.entry(key_of(s)) if src_bundle else None
                if e is not None and not e.slices and ck.header.raw_copy:
                    w.add_raw(t, e, ck.read_raw(e))
                else:
                    w.add(t, ck.read(s))
            else:
                e = tp.entry(key_of(t)) if isinstance(tp, BundleCheckpoint) else None
                if e is not None and isinstance(tp, BundleCheckpoint) and tp.header.raw_copy:
                    copy_raw(tp, e, t, w)
                else:
                    w.add(t, tp.read(t))
        if graph is not None:
            w.add(OBJECT_GRAPH_KEY, graph.serialize())
        files: list[str] = w.finish().files
    return files


def _mismatches(mismatched: list[dict[str, Any]]) -> str:
    return listed([f"{shorten(m['name'])} ({m['template']['dtype']}{m['template']['shape']} vs "
                   f"{m['src']['dtype']}{m['src']['shape']})" for m in mismatched[:MAX_SHOWN]], len(mismatched))


def _closest(name: str, index: Suggester) -> str:
    """``name`` with the SRC names closest to it, to show what a rule missed."""
    from ckptool.format.objgraph import parse_object_key

    parsed = parse_object_key(name)
    close = index.closest("/".join(parsed[0]) if parsed else name)
    return (f"{shorten(name)} (closest in SRC: {', '.join(shorten(c) for c in close)})" if close
            else f"{shorten(name)} (nothing close in SRC)")


__all__ = ["with_template"]
