"""The structure of an object graph in arrays (:mod:`ckptool.format.objedit`): each node's
children as SRC lists them (edges cut marked -1), the edges added after them, in order, and an
index of names for the nodes with many children (a walk is a dict probe there, a short scan
elsewhere): a few bytes an edge."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from ckptool.errors import CkptError

_INDEXED = 8  # children beyond which a node's names are indexed


class Edges:
    def __init__(self, n: int):
        self.n = self.size = n
        self.start = array("i", [0])
        self.cid = array("i")
        self.cname: list[str] = []
        self.first = array("i", [-1]) * n  # each node's first added edge, its last, how many
        self.last = array("i", [-1]) * n
        self.added = array("i", [0]) * n
        self.add_child = array("i")
        self.add_name: list[str] = []
        self.add_next = array("i")
        self.index: dict[int, dict[str, int | list[int]]] = {}  # name -> its child (a list: several)

    def add_node(self, i: int, children: Sequence[tuple[str, int]]) -> None:
        """Node ``i``'s children as SRC lists them (nodes added in order)."""
        for name, c in children:
            self.cid.append(c)
            self.cname.append(name)
        self.start.append(len(self.cid))

    def children(self, nid: int) -> Iterator[tuple[str, int]]:
        if nid < self.n:
            cid, cname = self.cid, self.cname
            for e in range(self.start[nid], self.start[nid + 1]):
                if cid[e] >= 0:
                    yield cname[e], cid[e]
        e = self.first[nid]
        while e >= 0:
            if self.add_child[e] >= 0:
                yield self.add_name[e], self.add_child[e]
            e = self.add_next[e]

    def _of(self, nid: int) -> dict[str, int | list[int]] | None:
        index = self.index.get(nid)
        if index is None:
            degree = (self.start[nid + 1] - self.start[nid] if nid < self.n else 0) + self.added[nid]
            if degree <= _INDEXED:
                return None
            index = self.index[nid] = {}
            for name, child in self.children(nid):
                _indexed(index, name, child)
        return index

    def child(self, nid: int, name: str) -> int | None:
        """The first child of ``nid`` called ``name``."""
        index = self._of(nid)
        if index is not None:
            ids = index.get(name)
            return ids if ids is None or isinstance(ids, int) else ids[0] if ids else None
        return next((c for nm, c in self.children(nid) if nm == name), None)

    def walk(self, path: Sequence[str]) -> int | None:
        nid: int | None = 0
        for name in path:
            nid = self.child(nid, name)  # type: ignore[arg-type]  # None ends the walk below
            if nid is None:
                return None
        return nid

    def detach(self, parent: int, name: str, nid: int) -> None:
        """Remove every ``(name, nid)`` edge SRC gave ``parent``."""
        if parent < self.n:
            for e in range(self.start[parent], self.start[parent + 1]):
                if self.cid[e] == nid and self.cname[e] == name:
                    self.cid[e] = -1
        index = self.index.get(parent)
        if index is not None and name in index:
            ids = index[name]
            index[name] = [] if ids == nid else [i for i in ids if i != nid] if isinstance(ids, list) else ids

    def _append(self, parent: int, name: str, nid: int) -> None:
        e = len(self.add_child)
        self.add_child.append(nid)
        self.add_name.append(name)
        self.add_next.append(-1)
        if self.last[parent] >= 0:
            self.add_next[self.last[parent]] = e
        else:
            self.first[parent] = e
        self.last[parent] = e
        self.added[parent] += 1
        index = self.index.get(parent)
        if index is not None:
            _indexed(index, name, nid)

    def _new_node(self) -> int:
        nid = self.size
        self.size += 1
        self.first.append(-1)
        self.last.append(-1)
        self.added.append(0)
        return nid

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
                child = self._new_node()
                self._append(cur, name, child)
            elif last and child != nid:
                raise CkptError(f"cannot rename to {key!r}: another object already has that path")
            cur = child

    def cut(self, gone: Callable[[int], bool]) -> None:
        """Every edge to a child ``gone`` says goes."""
        for edges in (self.cid, self.add_child):
            for e, c in enumerate(edges):
                if c >= 0 and gone(c):
                    edges[e] = -1
        self.index = {}

    def valued(self, own: bytearray) -> bytearray:
        """The nodes ``own`` marks, and every node reaching one of them (``ObjectGraph._valued``)."""
        size = self.size
        count = array("i", [0]) * (size + 1)
        for p in range(size):
            for _, c in self.children(p):
                count[c + 1] += 1
        for i in range(size):
            count[i + 1] += count[i]
        parents = array("i", [0]) * count[size]
        fill = array("i", count)
        for p in range(size):
            for _, c in self.children(p):
                parents[fill[c]] = p
                fill[c] += 1
        out = bytearray(own)
        queue = deque(i for i in range(size) if out[i])
        while queue:
            c = queue.popleft()
            for k in range(count[c], count[c + 1]):
                p = parents[k]
                if not out[p]:
                    out[p] = 1
                    queue.append(p)
        return out

    def distinct_names(self) -> bytearray:
        """Which nodes have no two children of one name (a walk through them takes the only child
        of each name)."""
        out = bytearray(self.size)
        for p in range(self.size):
            names = [name for name, _ in self.children(p)]
            out[p] = len(names) < 2 or len(set(names)) == len(names)
        return out

    def first_paths(self) -> tuple[array[int], list[str]]:
        """Breadth first from the root: each node's parent on its first path (-2: not reached,
        -1: the root) and the name of the edge from it (``ObjectGraph.paths``)."""
        parent = array("i", [-2]) * self.size
        pname = [""] * self.size
        parent[0] = -1
        queue = deque([0])
        while queue:
            nid = queue.popleft()
            for name, child in self.children(nid):
                if parent[child] == -2:
                    parent[child], pname[child] = nid, name
                    queue.append(child)
        return parent, pname


def _indexed(index: dict[str, int | list[int]], name: str, child: int) -> None:
    """``child`` added last among ``name``'s children in ``index`` (one child: held as itself)."""
    ids = index.get(name)
    if ids is None:
        index[name] = child
    elif isinstance(ids, int):
        index[name] = [ids, child]
    else:
        ids.append(child)
