"""The nodes of an object graph (:mod:`ckptool.format.objgraph`) and the index its walks use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from ckptool.errors import CkptError


@dataclass
class Attribute:
    name: str
    full_name: str
    checkpoint_key: str


@dataclass
class SlotVariable:
    original_variable_node_id: int
    slot_name: str
    slot_variable_node_id: int


@dataclass
class Node:
    id: int
    children: list[tuple[str, int]] = field(default_factory=list)  # (local name, node id)
    attributes: list[Attribute] = field(default_factory=list)
    slot_variables: list[SlotVariable] = field(default_factory=list)
    registered_saver: str = ""
    has_checkpoint_values: bool | None = None  # None: the field is absent


def copy_node(n: Node) -> Node:
    """A copy of ``n`` that :meth:`ObjectGraph.edited` may change (its lists and attributes its own)."""
    return Node(n.id, list(n.children), [Attribute(a.name, a.full_name, a.checkpoint_key) for a in n.attributes],
                [SlotVariable(s.original_variable_node_id, s.slot_name, s.slot_variable_node_id)
                 for s in n.slot_variables], n.registered_saver, n.has_checkpoint_values)


class ChildIndex:
    """The children of each node by local name, indexed when a walk first passes through the
    node: a walk costs a dict probe per step, not a scan of the children (a parent of 30,000
    objects made a rename of each quadratic). Editing goes through it too: :meth:`detach` and
    :meth:`attach` keep the index as the children lists would be, and :meth:`commit` rewrites
    each changed list once. As the lists are read, the first child of a name is the one walked."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.names: dict[int, dict[str, list[int]]] = {}
        self.removed: dict[int, set[tuple[str, int]]] = {}
        self.added: dict[int, list[tuple[str, int]]] = {}

    def _of(self, nid: int) -> dict[str, list[int]]:
        index = self.names.get(nid)
        if index is None:
            index = self.names[nid] = {}
            for name, child in self.nodes[nid].children:
                index.setdefault(name, []).append(child)
        return index

    def child(self, nid: int, name: str) -> int | None:
        ids = self._of(nid).get(name)
        return ids[0] if ids else None

    def walk(self, path: Sequence[str]) -> int | None:
        nid: int | None = 0
        for name in path:
            nid = self.child(cast(int, nid), name)
            if nid is None:
                return None
        return nid

    def detach(self, parent: int, name: str, nid: int) -> None:
        """Remove every ``(name, nid)`` edge of ``parent``."""
        index = self._of(parent)
        index[name] = [i for i in index.get(name, ()) if i != nid]
        self.removed.setdefault(parent, set()).add((name, nid))

    def _append(self, parent: int, name: str, nid: int) -> None:
        self._of(parent).setdefault(name, []).append(nid)
        self.added.setdefault(parent, []).append((name, nid))

    def attach(self, nid: int, path: tuple[str, ...], key: str) -> None:
        """Give ``nid`` the path ``path``, making the objects on the way that do not exist."""
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

    def commit(self) -> None:
        """The children lists as the edits left them: what was removed gone, what was added at the end."""
        for nid in self.removed.keys() | self.added.keys():
            node, gone = self.nodes[nid], self.removed.get(nid, set())
            node.children = [c for c in node.children if c not in gone] + self.added.get(nid, [])
        self.removed, self.added = {}, {}
