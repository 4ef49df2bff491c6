"""Editing and walking an object graph is linear in the objects under one parent (issue 42).

Counted, never timed: every child name of the graph is a :class:`Name`, a ``str`` that counts
the comparisons made with it. A walk that scans a parent's children compares the name it looks
for with each of them (a quadratic rename of n siblings: n * n / 2 comparisons); a walk through
an index of names compares once per step, or not at all. An edit reads the graph back from its
serialized records (ckptool.format.objedit): there, every local name is made a Name as its
record is parsed."""

import pytest

from ckptool.format import objedit
from ckptool.format.objgraph import ObjectGraph, parse_object_key

VV = "/.ATTRIBUTES/VARIABLE_VALUE"


class Name(str):
    compared = 0

    def __eq__(self, other):
        Name.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        Name.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def _siblings(n: int) -> ObjectGraph:
    """``model/v0`` .. ``model/v{n-1}``: n objects under one parent, plus ``save_counter``, every
    child name a :class:`Name`."""
    g = ObjectGraph.from_keys([f"model/v{i}{VV}" for i in range(n)] + ["save_counter" + VV])
    for node in g.nodes:
        node.children = [(Name(c), i) for c, i in node.children]
    return g


@pytest.fixture(autouse=True)
def named_records(monkeypatch):
    """The edit's nodes, parsed from their records, have Name local names (shared among them as
    the edit shares names: the moves take them from there)."""
    parsed = objedit.node_from_proto

    def named(i, p, n, where, shared):
        for c in p.children:
            shared.setdefault(c.local_name, Name(c.local_name))
        return parsed(i, p, n, where, shared)

    monkeypatch.setattr(objedit, "node_from_proto", named)


def _compared(g: ObjectGraph, renames: dict[str, str]) -> tuple[int, dict]:
    Name.compared = 0
    out, keys = g.edited(renames)
    got = Name.compared
    return got, {"graph": out, "keys": keys}


SCOPE = lambda i: f"net/v{i}{VV}"  # noqa: E731  a scope rule: model/=net/
FLAT = lambda i: f"w{i}{VV}"  # noqa: E731  each moved to the root
SAME_PARENT = lambda i: f"model/w{i}{VV}"  # noqa: E731  renamed within its parent


@pytest.mark.parametrize("target", [SCOPE, FLAT, SAME_PARENT], ids=["scope", "to-root", "same-parent"])
def test_renaming_n_siblings_compares_names_linearly(target):
    counts = {}
    for n in (500, 2000):
        g = _siblings(n)
        counts[n], res = _compared(g, {f"model/v{i}{VV}": target(i) for i in range(n)})
        out, keys = res["graph"], res["keys"]
        # the edit is right: every object at its new path, keys as planned (none re-keyed), nothing else moved
        assert keys == {}
        paths = {p: nid for nid, p in out.paths().items()}
        for i in (0, n // 2, n - 1):
            path, _, _ = parse_object_key(target(i))
            node = out.nodes[paths["/".join(path)]]
            assert [a.checkpoint_key for a in node.attributes] == [target(i)]
        assert len(out.nodes) == len(g.nodes) - (0 if target is SAME_PARENT else 1) + (target is SCOPE)
    # four times the siblings: at most about four times the comparisons (quadratic: sixteen)
    assert counts[2000] <= 4 * counts[500] + 64, counts
    assert counts[2000] <= 16 * 2000, counts


def test_walking_each_of_n_siblings_compares_names_linearly():
    counts = {}
    for n in (500, 2000):
        g = _siblings(n)
        Name.compared = 0
        for i in range(n):
            assert g._walk(("model", f"v{i}")) is not None
        counts[n] = Name.compared
        Name.compared = 0
        # an untouched rename keeps the graph, its keys checked against a walk each
        _, keys = g.edited({})
        assert keys == {}
        counts[n] += Name.compared
    assert counts[2000] <= 4 * counts[500] + 64, counts


def test_swap_and_order_of_children_kept():
    """The index edits the graph as the lists did: two objects swap paths, a moved object's
    old parent keeps its other children in order, the moved one is appended where it lands."""
    g = ObjectGraph.from_keys([f"m/{c}{VV}" for c in "abcd"])
    out, keys = g.edited({f"m/a{VV}": f"m/b{VV}", f"m/b{VV}": f"m/a{VV}", f"m/c{VV}": f"n/c{VV}"})
    m = out.nodes[out._walk(("m",))]
    assert [c for c, _ in m.children] == ["d", "b", "a"]
    assert [a.checkpoint_key for a in out.nodes[out._walk(("m", "b"))].attributes] == [f"m/b{VV}"]
    assert out.nodes[out._walk(("m", "a"))].attributes[0].full_name == "m/b"  # the object that was at m/b
    assert [c for c, _ in out.nodes[0].children] == ["m", "n"]
    assert keys == {}  # every key as planned
