"""The object graph's edit (renames, drops, optimizers cut out), done on its serialized node
records: the one editor, behind ``rewrite-names`` and :meth:`ObjectGraph.edited
<ckptool.format.objgraph.ObjectGraph.edited>` (convert, average, the Keras bridge, the slots'
strip), in well under a kilobyte a variable.

The graph's structure is held in arrays (each node's first edge, the edges' child ids and
shared local names, flags a byte a node); a node's record is decoded when it is read, and the
new graph is written a node at a time. The steps, in order: attributes renamed and dropped
(objects moving with their keys), optimizers cut out, movers detached then attached, emptied
objects cut, the unreachable removed and the rest renumbered, keys through removed paths
re-keyed, ``has_checkpoint_values`` marked.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Collection, Mapping

from ckptool.errors import CkptError, CorruptError
from ckptool.format.objkeys import ATTRIBUTES, escape, parse_object_key
from ckptool.format.objnodes import (
    Attribute,
    Node,
    SlotVariable,
    node_from_proto,
    node_spans,
    parse_node,
    parse_nodes,
    record_at,
)
from ckptool.format.objnodes import serialize_nodes as serialize_nodes
from ckptool.format.objstruct import Edges

ATTRS, SLOTS, SAVER, SLOT_NODE, OPTIMIZER, ATTRS_KEPT = 1, 2, 4, 8, 16, 32
Move = tuple[tuple[str, ...] | None, tuple[str, ...], str]


class RecordGraph:
    """A serialized TrackableObjectGraph, its nodes decoded one at a time."""

    def __init__(self, data: bytes, where: str):
        self.data, self.where = bytes(data), where
        spans = node_spans(self.data, where)
        if spans is None:  # anything but node records at the top level: written anew, node by node
            self.data = serialize_nodes(parse_nodes(self.data, where))
            spans = node_spans(self.data, where)
            if spans is None:
                raise CorruptError(f"{where}: unparsable object graph")
        self.spans = spans
        self.n = len(spans) - 1
        self.shared: dict[str, str] = {}

    def node(self, i: int) -> Node:
        rec = record_at(self.data, self.spans, i)
        return node_from_proto(i, parse_node(rec, self.where), self.n, self.where, self.shared)


def _attributes(node: Node, renames: Mapping[str, str], dropped: Collection[str], slot: bool
                ) -> tuple[list[Attribute], Move | None]:
    """``node``'s attributes renamed and dropped, and where the node moves."""
    kept, move = [], None
    for a in node.attributes:
        key = a.checkpoint_key
        if key in dropped:
            continue
        new = renames.get(key, key)
        if new != key:
            parsed = parse_object_key(new)
            if parsed is None:  # now a plain tensor, outside the graph
                continue
            path, attr, slot_of = parsed
            a = Attribute(attr, a.full_name, new)
            old = parse_object_key(key)
            if slot_of is None and not slot and (old is None or old[0] != path):
                if move is None:
                    move = (old[0] if old else None, path, new)
                elif move[1] != path:
                    raise CkptError(f"{key!r} -> {new!r} splits one object between "
                                    f"{'/'.join(move[1])!r} and {'/'.join(path)!r}")
        kept.append(a)
    return kept, move


def edit_records(data: bytes, renames: Mapping[str, str], dropped: Collection[str] = frozenset(),
                 strip_optimizer: bool = False, where: str = "object graph"
                 ) -> tuple[bytearray, dict[str, str | None]]:
    """The serialized graph ``data`` with keys renamed and dropped, each renamed object moved,
    optimizers cut out with ``strip_optimizer`` (the rules: :meth:`ObjectGraph.edited
    <ckptool.format.objgraph.ObjectGraph.edited>`), serialized (a bytearray: not copied again
    here); the keys map holds only the planned keys whose final key differs (None: left the
    graph)."""
    g = RecordGraph(data, where)
    n = g.n
    if not n:
        return bytearray(), {}
    flags = bytearray(n)
    edges = Edges(n)
    movers = array("i")
    moved_to: list[str] = []  # each mover's new key (the renames' own string)
    for i in range(n):
        node = g.node(i)
        f = (ATTRS if node.attributes else 0) | (SLOTS if node.slot_variables else 0) | (
            SAVER if node.registered_saver else 0)
        flags[i] |= f
        for s in node.slot_variables:
            flags[s.slot_variable_node_id] |= SLOT_NODE
        edges.add_node(i, node.children)
    for name, c in edges.children(0):
        if name == "optimizer":
            flags[c] |= OPTIMIZER
    for i in range(n):
        if flags[i] & SLOTS:
            flags[i] |= OPTIMIZER
    for i in range(n):  # SLOT_NODE is final now: the moves (and any split refused) in node order
        if flags[i] & ATTRS:
            kept, move = _attributes(g.node(i), renames, dropped, bool(flags[i] & SLOT_NODE))
            if kept:
                flags[i] |= ATTRS_KEPT
            if move is not None:
                movers.append(i)
                moved_to.append(move[2])
    before = edges.valued(bytearray(bool(f & (ATTRS | SLOTS | SAVER)) for f in flags))
    if strip_optimizer:
        edges.cut(lambda c: c < n and bool(flags[c] & OPTIMIZER))
    for i in movers:  # detach every mover first: swaps work
        old = _move(g, i, renames, dropped)
        if old[0] and edges.walk(old[0]) == i:
            edges.detach(edges.walk(old[0][:-1]), old[0][-1], i)  # type: ignore[arg-type]  # a walked prefix walks
    edges.index = {}  # the old scopes' indexes (rebuilt where a walk passes again)
    for i, new in zip(movers, moved_to):
        parsed = parse_object_key(new)  # a mover's new key parses
        path = parsed[0] if parsed else ()
        edges.attach(i, tuple(g.shared.setdefault(name, name) for name in path), new)
    edges.index = {}  # let go: a walk left to do indexes only the nodes it passes
    slots_kept = not strip_optimizer
    own = bytearray(bool(f & (ATTRS_KEPT | SAVER)) or (slots_kept and bool(f & SLOTS)) for f in flags)
    own += bytes(edges.size - n)
    after = edges.valued(own)
    emptied = bytearray(a and not b for a, b in zip(before + bytes(edges.size - n), after))
    if any(emptied):
        edges.cut(lambda c: bool(emptied[c]))
    return _compacted(g, edges, flags, own, renames, dropped, slots_kept)


def _move(g: RecordGraph, i: int, renames: Mapping[str, str], dropped: Collection[str]) -> Move:
    move = _attributes(g.node(i), renames, dropped, False)[1]
    if move is None:
        raise CorruptError(f"{g.where}: node {i} changed while edited")
    return move


def _slots(g: RecordGraph, i: int, flags: bytearray, slots_kept: bool) -> list[SlotVariable]:
    return g.node(i).slot_variables if slots_kept and i < g.n and flags[i] & SLOTS else []


def _reach(g: RecordGraph, edges: Edges, flags: bytearray, slots_kept: bool) -> bytearray:
    seen = bytearray(edges.size)
    seen[0] = 1
    queue = deque([0])
    while queue:
        nid = queue.popleft()
        refs = [c for _, c in edges.children(nid)]
        for s in _slots(g, nid, flags, slots_kept):
            refs += [s.original_variable_node_id, s.slot_variable_node_id]
        for r in refs:
            if not seen[r]:
                seen[r] = 1
                queue.append(r)
    return seen


def _compacted(g: RecordGraph, edges: Edges, flags: bytearray, own: bytearray, renames: Mapping[str, str],
               dropped: Collection[str], slots_kept: bool) -> tuple[bytearray, dict[str, str | None]]:
    n, size = g.n, edges.size
    seen = _reach(g, edges, flags, slots_kept)
    new_id = array("i", [-1]) * size
    count = 0
    for i in range(size):
        if seen[i]:
            new_id[i] = count
            count += 1
    slot_node = bytearray(size)
    for i in range(n):
        if seen[i]:
            for s in _slots(g, i, flags, slots_kept):
                slot_node[s.slot_variable_node_id] = 1
    parent, pname = edges.first_paths()
    paths = parent, pname, edges.distinct_names()
    keys: dict[str, str | None] = {}
    for i in range(n):  # what left the graph, unless a node kept finds it again
        if not seen[i] and flags[i] & ATTRS_KEPT:
            for a in _attributes(g.node(i), renames, dropped, True)[0]:
                keys[a.checkpoint_key] = None
    valued = edges.valued(bytearray(o & s for o, s in zip(own, seen)))
    out = bytearray()
    for i in range(size):
        if not seen[i]:
            continue
        src = g.node(i) if i < n else Node(i)
        attrs = _attributes(src, renames, dropped, True)[0] if i < n and flags[i] & ATTRS else []
        for k, a in enumerate(attrs):
            parsed = parse_object_key(a.checkpoint_key)
            key = a.checkpoint_key
            if not slot_node[i] and parent[i] != -2 and (parsed is None or not _walks(parsed[0], i, paths, edges)):
                key = f"{_path(i, parent, pname)}/{ATTRIBUTES}/{escape(a.name)}"
                attrs[k] = Attribute(a.name, a.full_name, key)
            if key != a.checkpoint_key:
                keys[a.checkpoint_key] = key
            else:
                keys.pop(key, None)
        node = Node(new_id[i], [(nm, new_id[c]) for nm, c in edges.children(i)], attrs,
                    [SlotVariable(new_id[s.original_variable_node_id], s.slot_name, new_id[s.slot_variable_node_id])
                     for s in _slots(g, i, flags, slots_kept)], src.registered_saver, bool(valued[i]))
        out += serialize_nodes([node])
    return out, keys


def _walks(path: tuple[str, ...], i: int, paths: tuple[array[int], list[str], bytearray], edges: Edges) -> bool:
    """Whether ``path`` walks to node ``i`` (``edges.walk``): read off ``i``'s first path where
    it is ``path`` through parents whose children's names are all distinct (no index of names
    built: it held ~60 bytes a child); else walked."""
    parent, pname, distinct = paths
    j, k = i, len(path)
    while k and j > 0 and pname[j] == path[k - 1] and distinct[parent[j]]:
        j, k = parent[j], k - 1
    return (j == 0 and k == 0) or edges.walk(path) == i


def _path(i: int, parent: array[int], pname: list[str]) -> str:
    """Node ``i``'s first path breadth first, as ``ObjectGraph.paths`` spells it."""
    names = []
    while i:
        names.append(pname[i])
        i = parent[i]
    base = ""
    for name in reversed(names):
        base = f"{base}/{escape(name)}" if base else escape(name)
    return base


__all__ = ["RecordGraph", "edit_records"]
