"""A reference model of the object graph's edit, kept for the tests only: the node-object editor
``ObjectGraph.edited`` was before every caller went through
:func:`ckptool.format.objedit.edit_records` (Python objects for every node, an index of names
per node, the graph compacted and renumbered as a whole). tests/format/test_objedit.py holds the
two equal, byte for byte, on every committed object-based fixture: two ways of writing one rule."""

from collections import deque

from ckptool.errors import CkptError
from ckptool.format.objgraph import ObjectGraph
from ckptool.format.objkeys import ATTRIBUTES, escape, parse_object_key
from ckptool.format.objnodes import Attribute, Node, SlotVariable


def _copy(n):
    return Node(n.id, list(n.children), [Attribute(a.name, a.full_name, a.checkpoint_key) for a in n.attributes],
                [SlotVariable(s.original_variable_node_id, s.slot_name, s.slot_variable_node_id)
                 for s in n.slot_variables], n.registered_saver, n.has_checkpoint_values)


class _Index:
    """Children by local name (first of a name walked), edited as the lists would be."""

    def __init__(self, nodes):
        self.nodes, self.names, self.removed, self.added = nodes, {}, {}, {}

    def _of(self, nid):
        if nid not in self.names:
            index = self.names[nid] = {}
            for name, child in self.nodes[nid].children:
                index.setdefault(name, []).append(child)
        return self.names[nid]

    def child(self, nid, name):
        ids = self._of(nid).get(name)
        return ids[0] if ids else None

    def walk(self, path):
        nid = 0
        for name in path:
            nid = self.child(nid, name)
            if nid is None:
                return None
        return nid

    def detach(self, parent, name, nid):
        index = self._of(parent)
        index[name] = [i for i in index.get(name, ()) if i != nid]
        self.removed.setdefault(parent, set()).add((name, nid))

    def _append(self, parent, name, nid):
        self._of(parent).setdefault(name, []).append(nid)
        self.added.setdefault(parent, []).append((name, nid))

    def attach(self, nid, path, key):
        cur = 0
        for depth, name in enumerate(path):
            last = depth == len(path) - 1
            child = self.child(cur, name)
            if child is None:
                if last:
                    self._append(cur, name, nid)
                    return
                child = len(self.nodes)
                self.nodes.append(Node(child))
                self._append(cur, name, child)
            elif last and child != nid:
                raise CkptError(f"cannot rename to {key!r}: another object already has that path")
            cur = child

    def commit(self):
        for nid in self.removed.keys() | self.added.keys():
            node, gone = self.nodes[nid], self.removed.get(nid, set())
            node.children = [c for c in node.children if c not in gone] + self.added.get(nid, [])


def _optimizers(graph):
    out = {n.id for n in graph.nodes if n.slot_variables}
    return out | {nid for name, nid in graph.nodes[0].children if name == "optimizer"}


def edited(graph, renames, dropped=frozenset(), strip_optimizer=False):
    """``(graph, keys)``: ``graph`` with keys renamed and dropped, each renamed object moved, the
    optimizers cut out with ``strip_optimizer``, the unreachable removed; ``keys``: every planned
    key whose final key differs (None: it left the graph)."""
    nodes = [_copy(n) for n in graph.nodes]
    g = ObjectGraph(nodes)
    if not nodes:
        return g, {}
    if strip_optimizer:
        opt = _optimizers(graph)
        for n in nodes:
            n.slot_variables = []
            n.children = [(c, i) for c, i in n.children if i not in opt]
    slot_nodes = set(graph.slot_owners())
    moves = {}
    for n in nodes:
        kept = []
        for a in n.attributes:
            key = a.checkpoint_key
            if key in dropped:
                continue
            new = renames.get(key, key)
            if new != key:
                parsed = parse_object_key(new)
                if parsed is None:
                    continue
                path, attr, slot = parsed
                a.checkpoint_key, a.name = new, attr
                old = parse_object_key(key)
                if slot is None and n.id not in slot_nodes and (old is None or old[0] != path):
                    prev = moves.setdefault(n.id, (old[0] if old else None, path, new))
                    if prev[1] != path:
                        raise CkptError(f"{key!r} -> {new!r} splits one object between "
                                        f"{'/'.join(prev[1])!r} and {'/'.join(path)!r}")
            kept.append(a)
        n.attributes = kept
    edit = _Index(nodes)
    for nid, (old_path, _, _) in moves.items():
        if old_path and edit.walk(old_path) == nid:
            edit.detach(edit.walk(old_path[:-1]), old_path[-1], nid)
    for nid, (_, path, new) in moves.items():
        edit.attach(nid, path, new)
    edit.commit()
    emptied = graph._valued() - g._valued()
    for n in nodes:
        n.children = [(c, i) for c, i in n.children if i not in emptied]
    return _compacted(g)


def _compacted(graph):
    seen, queue = {0}, deque([0])
    while queue:
        node = graph.nodes[queue.popleft()]
        refs = [c for _, c in node.children]
        for s in node.slot_variables:
            refs += [s.original_variable_node_id, s.slot_variable_node_id]
        for r in refs:
            if r not in seen:
                seen.add(r)
                queue.append(r)
    keys = {a.checkpoint_key: None for n in graph.nodes for a in n.attributes}
    order = sorted(seen)
    new_id = {old: i for i, old in enumerate(order)}
    nodes = []
    for old in order:
        n = graph.nodes[old]
        n.id = new_id[old]
        n.children = [(c, new_id[i]) for c, i in n.children]
        n.slot_variables = [SlotVariable(new_id[s.original_variable_node_id], s.slot_name,
                                         new_id[s.slot_variable_node_id]) for s in n.slot_variables]
        nodes.append(n)
    g = ObjectGraph(nodes)
    slots, paths, walk = set(g.slot_owners()), g.paths(), _Index(nodes).walk
    for n in nodes:
        for a in n.attributes:
            parsed = parse_object_key(a.checkpoint_key)
            if n.id not in slots and n.id in paths and (parsed is None or walk(parsed[0]) != n.id):
                keys[a.checkpoint_key] = a.checkpoint_key = f"{paths[n.id]}/{ATTRIBUTES}/{escape(a.name)}"
            else:
                keys[a.checkpoint_key] = a.checkpoint_key
    g._mark_values()
    return g, {k: v for k, v in keys.items() if v != k}
