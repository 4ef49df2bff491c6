"""Which SRC name goes where (renamed, dropped), refused on collisions and on rules that match
nothing; and DST's object graph, with the plan brought in line with it."""

from __future__ import annotations

import fnmatch
import re
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter, lt
from typing import Any

from ckptool.errors import CkptError
from ckptool.format.objedit import edit_records
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph, is_object_key
from ckptool.format.slots import is_optimizer_name
from ckptool.ops.transform.rename.rules import EXACT, Renamer, Rule


@dataclass
class Plan:
    src: str
    dst: str
    renames: list[tuple[str, str]] = field(default_factory=list)  # (old, new), sorted by new
    dropped: list[str] = field(default_factory=list)
    # old keys the object graph moved, not a rule: a kept variable whose key ran through an object
    # cut out (a Keras model's weight keyed under optimizer/_trainable_variables, with strip_optimizer)
    # takes the key TF gives it without that object
    rekeyed: list[str] = field(default_factory=list)
    unmatched_rules: list[str] = field(default_factory=list)
    object_graph: str = "none"  # none | kept | rebuilt | template
    fast_path: bool = False
    linked: bool = False  # the fast path's data files are hard links of SRC's (not copies)
    template: dict[str, Any] | None = None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc = {"src": self.src, "dst": self.dst, "fast_path": self.fast_path,
               "object_graph": self.object_graph,
               "tensors": [{"old": o, "new": n} for o, n in self.renames],
               "renamed": sum(1 for o, n in self.renames if o != n),
               "dropped": self.dropped, "unmatched_rules": self.unmatched_rules}
        if self.rekeyed:
            doc["rekeyed"] = self.rekeyed
        if self.template is not None:
            doc["template"] = self.template
        if self.files:
            doc["files"] = self.files
        return doc


def plan_names(names: list[str], rules: list[Rule], drop: Any = (), strip_optimizer: bool = False, strict: bool = False,
               src: str = "", dst: str = "", allow_unused: bool = True) -> Plan:
    """Which SRC names go where; raises on collisions, and on rules (or ``drop`` globs) that
    match nothing unless ``allow_unused`` (``strict`` raises on them always)."""
    renamer = Renamer(rules)
    drops = [re.compile(fnmatch.translate(g)) for g in drop]
    used_drops = [0] * len(drops)
    plan = Plan(src, dst)
    targets: dict[str, str] = {}
    collisions = []
    for name in sorted(names):
        if name == OBJECT_GRAPH_KEY:
            continue
        hit = [i for i, p in enumerate(drops) if p.match(name)]
        for i in hit:
            used_drops[i] += 1
        if hit or (strip_optimizer and is_optimizer_name(name)):
            plan.dropped.append(name)
            continue
        new = renamer(name)
        if not new or new == OBJECT_GRAPH_KEY or new.startswith("\0"):
            raise CkptError(f"{name!r} would be renamed to the reserved name {new!r}")
        if new in targets:
            collisions.append(f"{targets[new]!r} and {name!r} -> {new!r}")
        targets[new] = name
    if collisions:
        raise CkptError("two sources land on one name: " + "; ".join(collisions) + " (nothing written)")
    plan.renames = sorted(((o, n) for n, o in targets.items()), key=lambda p: p[1])
    plan.unmatched_rules = renamer.unused() + [f"--drop {g}" for g, n in zip(drop, used_drops) if not n]
    if (strict or not allow_unused) and plan.unmatched_rules:
        raise CkptError("these rules match no source name: " + _unmatched(renamer, plan.unmatched_rules, names)
                        + " (nothing written; --allow-unused accepts them)")
    return plan


def _unmatched(renamer: Renamer, unmatched: list[str], names: list[str]) -> str:
    """The first few rules that match nothing, an exact name with the source names it may
    have meant, and how many more (suggestions from one index of the names, for those shown)."""
    from ckptool.ops.read.suggest import MAX_SHOWN, Suggester, did_you_mean, listed, shorten

    exact = {r.text(): r.old for r in renamer.rules if not r.used and r.kind == EXACT}
    index = Suggester(names)
    shown = []
    for u in unmatched[:MAX_SHOWN]:
        hint = did_you_mean(exact[u], index).lstrip("; ") if u in exact else ""
        shown.append(f"{shorten(u)} ({hint})" if hint else shorten(u))
    return listed(shown, len(unmatched))


class Renamed(Mapping[str, str]):
    """Old name -> new name of ``pairs`` (a plan's renames), found by a binary search of the pairs
    in order of their old names, not through a dict of them (~40 bytes a variable): 4 bytes a
    pair, none when they already lie in that order (a prefix renamed)."""

    def __init__(self, pairs: list[tuple[str, str]]):
        self.pairs = pairs
        olds = map(itemgetter(0), pairs)
        self.order = None if all(map(lt, olds, islice(map(itemgetter(0), pairs), 1, None))) else array(
            "i", sorted(range(len(pairs)), key=lambda i: pairs[i][0]))
        self.seq: Sequence[tuple[str, str]] = pairs if self.order is None else _InOrder(pairs, self.order)

    def __getitem__(self, old: str) -> str:
        i = bisect_left(self.seq, old, key=itemgetter(0))
        if i < len(self.seq) and self.seq[i][0] == old:
            return self.seq[i][1]
        raise KeyError(old)

    def __iter__(self) -> Iterator[str]:
        return map(itemgetter(0), self.seq)

    def __len__(self) -> int:
        return len(self.pairs)


class _InOrder(Sequence[tuple[str, str]]):
    def __init__(self, pairs: list[tuple[str, str]], order: array[int]):
        self.pairs, self.order = pairs, order

    def __getitem__(self, i: Any) -> Any:
        return self.pairs[self.order[i]]

    def __len__(self) -> int:
        return len(self.order)


def _rekeyed(plan: Plan, keys: dict[str, str | None]) -> list[tuple[str, str]]:
    """``plan.renames`` under the keys the graph gives them (what left it: dropped), refused when
    two land on one key."""
    renames: list[tuple[str, str]] = []
    targets: dict[str, str] = {}
    for old, new in plan.renames:
        final = keys.get(new, new)
        if final is None:
            plan.dropped.append(old)
            continue
        if final in targets:
            raise CkptError(f"{targets[final]!r} and {old!r} both land on {final!r} (nothing written)")
        targets[final] = old
        if final != new:
            plan.rekeyed.append(old)
        renames.append((old, final))
    plan.dropped.sort()
    return sorted(renames, key=lambda p: p[1])


def graph_for(src_graph: bytes | None, plan: Plan, strip_optimizer: bool, where: str = OBJECT_GRAPH_KEY
              ) -> bytes | bytearray | None:
    """DST's object graph, serialized, and ``plan`` brought in line with it.

    An object-based SRC (``src_graph``: its serialized graph) has its graph edited
    (objects moved, other paths and slot references kept, optimizers cut out with
    ``strip_optimizer``), a node record at a time (:func:`~ckptool.format.objedit.edit_records`):
    what left the graph is dropped and re-keyed variables take their new key. A
    name-based SRC gets a graph synthesized when new names are object keys.
    """
    if src_graph is None:
        if not any(is_object_key(n) for _, n in plan.renames):
            return None
        plan.object_graph = "rebuilt"
        return ObjectGraph.from_keys([n for _, n in plan.renames]).serialize()
    graph, keys = edit_records(src_graph, Renamed(plan.renames), set(plan.dropped),
                               strip_optimizer=strip_optimizer, where=where)
    if keys:  # some planned key changed (or left the graph): the plan follows
        plan.renames = _rekeyed(plan, keys)
    changed = any(o != n for o, n in plan.renames) or plan.dropped
    plan.object_graph = "rebuilt" if changed else "kept"
    return graph


__all__ = ["Plan", "graph_for", "plan_names"]
