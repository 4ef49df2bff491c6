"""Object graphs: escaping, key parsing, synthesis from keys, and write()'s automatic graph."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ckptool
from ckptool.format.objgraph import (
    OBJECT_GRAPH_KEY,
    Attribute,
    ObjectGraph,
    SlotVariable,
    escape,
    is_object_key,
    object_key,
    parse_object_key,
    unescape,
)

VV = "/.ATTRIBUTES/VARIABLE_VALUE"


@given(st.text())
def test_escape_round_trips(name):
    assert unescape(escape(name)) == name
    assert "/" not in escape(name)


def test_escape_examples():
    assert escape("a.b/c") == "a..b.Sc"
    assert object_key("model/layer.0/w") == "model/layer..0/w" + VV
    assert object_key("x", "py_state") == "x/.ATTRIBUTES/py_state"


@pytest.mark.parametrize("key,want", [
    ("a/b" + VV, (("a", "b"), "VARIABLE_VALUE", None)),
    ("a..b.Sc" + VV, (("a.b/c",), "VARIABLE_VALUE", None)),
    ("it/.ATTRIBUTES/ITERATOR_STATE", (("it",), "ITERATOR_STATE", None)),
    (".ATTRIBUTES/X", ((), "X", None)),
    ("model/w/.OPTIMIZER_SLOT/optimizer/m" + VV, (("model", "w"), "VARIABLE_VALUE", (("optimizer",), "m"))),
    ("w/.OPTIMIZER_SLOT/opt/inner/v" + VV, (("w",), "VARIABLE_VALUE", (("opt", "inner"), "v"))),
])
def test_parse_object_key(key, want):
    assert parse_object_key(key) == want
    assert is_object_key(key)


@pytest.mark.parametrize("key", [
    "dense/kernel", OBJECT_GRAPH_KEY, "a/.ATTRIBUTES", "a/.ATTRIBUTES/", "a//b" + VV,
    "a/.ATTRIBUTES/x/y", ".OPTIMIZER_SLOT/o/m" + VV, "w/.OPTIMIZER_SLOT/m" + VV, "",
    "\0a/.ATTRIBUTES/VARIABLE_VALUE\0\1\1\2",  # a slice key
])
def test_not_object_keys(key):
    assert parse_object_key(key) is None


def test_from_keys_structure():
    keys = [
        "model/dense/kernel" + VV,
        "model/dense/bias" + VV,
        "save_counter" + VV,
        "model/w/.OPTIMIZER_SLOT/optimizer/m" + VV,
        "optimizer/iter" + VV,
        "plain_name",
        "model/w" + VV,
    ]
    g = ObjectGraph.from_keys(keys)
    # breadth first: root; model, save_counter, optimizer; dense, w; iter; kernel, bias; slot appended last
    paths = g.paths()
    assert paths == {0: "", 1: "model", 2: "save_counter", 3: "optimizer", 4: "model/dense", 5: "model/w",
                     6: "optimizer/iter", 7: "model/dense/kernel", 8: "model/dense/bias"}
    assert len(g.nodes) == 10
    assert g.nodes[0].children == [("model", 1), ("save_counter", 2), ("optimizer", 3)]
    assert g.nodes[7].attributes == [Attribute("VARIABLE_VALUE", "model/dense/kernel", keys[0])]
    assert g.nodes[3].slot_variables == [SlotVariable(5, "m", 9)]
    assert g.nodes[9].attributes == [Attribute("VARIABLE_VALUE", "model/w/m", keys[3])]
    assert g.slot_owners() == {9: (3, 5, "m")}
    assert all(n.has_checkpoint_values for n in g.nodes)
    assert sorted(g.keys()) == sorted(k for k in keys if k != "plain_name")


def test_has_checkpoint_values_only_where_values_are():
    g = ObjectGraph.from_keys(["a/b" + VV, "c/.OPTIMIZER_SLOT/opt/m" + VV])
    by_path = {p: g.nodes[i] for i, p in g.paths().items()}
    # 'c' is a variable path with no value of its own; 'opt' holds a slot
    assert by_path["a"].has_checkpoint_values and by_path["a/b"].has_checkpoint_values
    assert by_path["c"].has_checkpoint_values is False
    assert by_path["opt"].has_checkpoint_values is True


def test_escaped_children_names():
    g = ObjectGraph.from_keys(["layer..0.Sx/w" + VV])
    assert g.nodes[0].children == [("layer.0/x", 1)]
    assert g.paths()[2] == "layer..0.Sx/w"


def test_serialize_parse_round_trip():
    keys = ["m/a" + VV, "m/b/.OPTIMIZER_SLOT/o/v" + VV, "o/t" + VV]
    g = ObjectGraph.from_keys(keys)
    back = ObjectGraph.parse(g.serialize())
    assert [vars(n) for n in back.nodes] == [vars(n) for n in g.nodes]
    assert back.serialize() == g.serialize()


def test_write_adds_graph_for_object_keys(tmp_path):
    m = {"net/w" + VV: np.ones(3, np.float32), "net/b" + VV: np.zeros(2), "step": np.int64(4)}
    res = ckptool.write(str(tmp_path / "c"), m)
    assert res.object_graph and res.variables == 4
    with ckptool.open(str(tmp_path / "c")) as ck:
        assert ck.is_object_based
        g = ck.object_graph()
        assert sorted(g.keys()) == sorted(k for k in m if k != "step")
        assert g.serialize() == ObjectGraph.from_keys(list(m)).serialize()


def test_write_keeps_given_graph_and_adds_none_for_plain(tmp_path):
    given_graph = ObjectGraph.from_keys(["x" + VV]).serialize()
    ckptool.write(str(tmp_path / "a"), {"x" + VV: np.ones(1), OBJECT_GRAPH_KEY: given_graph,
                                        "y" + VV: np.ones(1)})
    with ckptool.open(str(tmp_path / "a")) as ck:
        assert ck.read(OBJECT_GRAPH_KEY).item() == given_graph
    res = ckptool.write(str(tmp_path / "b"), {"dense/kernel": np.ones(1)})
    assert not res.object_graph
    with ckptool.open(str(tmp_path / "b")) as ck:
        assert not ck.is_object_based
