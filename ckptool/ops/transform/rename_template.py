"""``rewrite-names --template``: DST takes a template checkpoint's keys, dtypes, shapes and
object graph, with values from SRC through the rules.

Every template variable SRC does not fill is an error (``init_from_checkpoint``
raises in the same case), listed with the closest SRC names, unless
``allow_missing`` keeps the template's values (named in the plan). Training
bookkeeping (``save_counter``) and optimizer state are not required.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, OPTIMIZER_SLOT, object_key
from ckptool.format.objkeys import key_of
from ckptool.ops.read.suggest import MAX_SHOWN, Suggester, listed, shorten

if TYPE_CHECKING:
    from ckptool.format.bundle import Entry
    from ckptool.io.base import Storage
    from ckptool.ops.transform.rename import Plan
    from ckptool.ops.write.writer import BundleWriter


def with_template(ck: Any, plan: Plan, template: str, dprefix: str, storage: Storage, strict: bool, dry_run: bool,
                  force: bool, allow_missing: bool = False, sync: bool = True) -> Plan:
    """DST gets TEMPLATE's keys and graph, values from SRC (through the renames)."""
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.read.reader import open as open_checkpoint
    from ckptool.ops.write.writer import BundleWriter

    with open_checkpoint(template) as tp:
        tvars = {v.name: v for v in tp.variables() if v.name != OBJECT_GRAPH_KEY}
        graph = tp.object_graph() if tp.is_object_based else None
        by_full: dict[str, str] = {}
        if graph is not None:
            for node in graph.nodes:
                for attr in node.attributes:
                    by_full.setdefault(attr.full_name, attr.checkpoint_key)
        svars = {v.name: v for v in ck.variables()}
        supply: dict[str, str] = {}  # template key -> SRC name
        unused = []
        for old, new in plan.renames:
            t = new if new in tvars else object_key(new) if object_key(new) in tvars else by_full.get(new)
            if t is None or t not in tvars:
                unused.append(old)
                continue
            if t in supply:
                raise CkptError(f"two sources land on template key {t!r}: {supply[t]!r} and {old!r} "
                                "(nothing written)")
            supply[t] = old
        mismatched: list[dict[str, Any]] = []
        for t, old in list(supply.items()):
            a, b = tvars[t], svars[old]
            if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
                mismatched.append({"name": t, "source": old,
                                   "template": {"dtype": a.dtype, "shape": list(a.shape)},
                                   "src": {"dtype": b.dtype, "shape": list(b.shape)}})
                del supply[t]
        bad = {m["name"] for m in mismatched}
        missing = sorted(t for t in tvars if t not in supply and t not in bad and not (
            t.startswith("save_counter/") or t.startswith("optimizer/") or f"/{OPTIMIZER_SLOT}/" in t))
        plan.template = {"path": template, "from_src": [{"key": t, "source": s} for t, s in sorted(supply.items())],
                         "missing": missing, "unused": sorted(unused), "mismatched": mismatched}
        plan.object_graph = "template" if graph is not None else "none"
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
        plan.renames = [(supply.get(t, f"<template>:{t}"), t) for t in sorted(tvars)]
        if dry_run:  # the same plan, counts and names, as the real run reports
            return plan
        src_bundle = isinstance(ck, BundleCheckpoint)
        with BundleWriter(dprefix, storage=storage, force=force, sync=sync) as w:
            for t in sorted(tvars):
                s = supply.get(t)
                if s is not None:
                    e = ck.entry(key_of(s)) if src_bundle else None
                    if e is not None and not e.slices and not ck.header.big_endian:
                        w.add_raw(t, e, ck.read_raw(e))
                    else:
                        w.add(t, ck.read(s))
                else:
                    e = tp.entry(key_of(t)) if isinstance(tp, BundleCheckpoint) else None
                    if e is not None and isinstance(tp, BundleCheckpoint) and not tp.header.big_endian:
                        copy_raw(tp, e, t, w)
                    else:
                        w.add(t, tp.read(t))
            if graph is not None:
                w.add(OBJECT_GRAPH_KEY, graph.serialize())
            plan.files = w.finish().files
        return plan


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


def copy_raw(ck: Any, e: Entry, new: str, w: BundleWriter) -> None:
    if not e.slices:
        w.add_raw(new, e, ck.read_raw(e))
        return
    w.add_raw(new, e, None)
    nk = key_of(new)
    for sl in e.slices:
        part = ck.entry(bundle.encode_tensor_name_slice(e.key, sl))
        w.add_raw(bundle.encode_tensor_name_slice(nk, sl), part, ck.read_raw(part))
