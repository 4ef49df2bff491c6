"""TF operations on Keras tensors (tf_keras's TFOpLambda, SlicingOpLambda) as Keras 3 operations
(ckptool.format.keras2_ops): the nodes below are what tf_keras 2.21's ``model.to_json()`` wrote for
``x + 3.0``, ``3.0 - x``, ``tf.concat([a, x], -1)``, ``x[..., 1:3]``; the interop and keras-torch
tiers load the translations in Keras 3 and compare predictions (tests/data/keras_whole/ops)."""

import os

import pytest

from ckptool.errors import RefusedError
from ckptool.format.keras2_config import model as translate
from ckptool.format.keras2_ops import OPS
from ckptool.format.keras_metadata import parse


def _op(name, function, node, cls="TFOpLambda"):
    return {"class_name": cls, "name": name, "inbound_nodes": [node],
            "config": {"name": name, "trainable": True, "dtype": "float32", "function": function}}


def _model(*layers, out="o"):
    return {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
         "config": {"name": "x", "batch_input_shape": [None, 4, 6], "dtype": "float32"}}, *layers],
        "input_layers": [["x", 0, 0]], "output_layers": [[out, 0, 0]]}}


def _layers(*layers, out):
    return {e["name"]: e for e in translate(_model(*layers, out=out), "m.json")["config"]["layers"]}


def _hist(t):
    return t["config"]["keras_history"]


def test_constants_lists_and_tensor_arguments_keep_the_wiring():
    got = _layers(
        _op("tf.__operators__.add", "__operators__.add", ["x", 0, 0, {"y": 3.0, "name": None}]),
        _op("tf.math.subtract", "math.subtract", ["_CONSTANT_VALUE", -1, 3.0, {"y": ["x", 0, 0], "name": None}]),
        _op("tf.concat", "concat", [["tf.__operators__.add", 0, 0, {"axis": -1}],
                                    ["tf.math.subtract", 0, 0, {"axis": -1}]]),
        _op("tf.reshape", "reshape", ["tf.concat", 0, 0, {"shape": [-1, 48]}]), out="tf.reshape")
    add, sub, cat, resh = (got[n] for n in ("tf.__operators__.add", "tf.math.subtract", "tf.concat", "tf.reshape"))
    assert (add["module"], add["class_name"], add["config"]) == ("keras.src.ops.numpy", "Add",
                                                                  {"name": "tf.__operators__.add"})
    node = add["inbound_nodes"][0]
    assert _hist(node["args"][0]) == ["x", 0, 0] and node["args"][1] == 3.0 and node["kwargs"] == {}
    assert sub["class_name"] == "Subtract"
    assert sub["inbound_nodes"][0]["args"][0] == 3.0 and _hist(sub["inbound_nodes"][0]["args"][1]) == ["x", 0, 0]
    assert cat["config"] == {"name": "tf.concat", "axis": -1}
    assert [_hist(t) for t in cat["inbound_nodes"][0]["args"][0]] == [["tf.__operators__.add", 0, 0],
                                                                      ["tf.math.subtract", 0, 0]]
    assert resh["class_name"] == "Reshape" and resh["config"]["newshape"] == [-1, 48]


def test_slices_become_keras3_keys():
    spec = [{"class_name": "__ellipsis__"}, {"start": 1, "stop": 3, "step": None}, None, 0]
    got = _layers(_op("tf.__operators__.getitem", "__operators__.getitem", ["x", 0, 0, {"slice_spec": spec}],
                      cls="SlicingOpLambda"), out="tf.__operators__.getitem")["tf.__operators__.getitem"]
    assert got["class_name"] == "GetItem"
    assert got["inbound_nodes"][0]["args"][1] == [
        {"class_name": "__ellipsis__", "config": {}},
        {"class_name": "__slice__", "config": {"start": 1, "stop": 3, "step": None}}, None, 0]
    one = _layers(_op("s", "__operators__.getitem", ["x", 0, 0, {"slice_spec": 2}], cls="SlicingOpLambda"),
                  out="s")["s"]
    assert one["inbound_nodes"][0]["args"][1] == [2]  # a key is always a tuple for Keras 3's GetItem


def test_tf_defaults_are_written_where_keras3s_differ():
    got = _layers(_op("g", "nn.gelu", ["x", 0, 0, {}]), _op("s", "nn.softmax", ["g", 0, 0, {"axis": None}]), out="s")
    assert got["g"]["config"]["approximate"] is False  # tf.nn.gelu is exact by default, keras.ops.gelu not
    assert got["s"]["config"]["axis"] == -1


@pytest.mark.parametrize("layer, words", [
    (_op("tf.math.cumsum", "math.cumsum", ["x", 0, 0, {"axis": 1}]), ["'tf.math.cumsum'", "tf.math.cumsum", "keras.ops"]),
    (_op("r", "reshape", ["x", 0, 0, {"shape": [["x", 0, 0], -1]}]), ["'r'", "tensor as 'shape'", "Reshape"]),
    (_op("mm", "linalg.matmul", ["x", 0, 0, {"b": ["x", 0, 0], "transpose_b": True}]),
     ["'mm'", "transpose_b=True", "Matmul"]),
    (_op("s", "__operators__.getitem", ["x", 0, 0, {"slice_spec": [{"start": ["x", 0, 0], "stop": None,
                                                                     "step": None}]}], cls="SlicingOpLambda"),
     ["'s'", "a slice by"]),
    (_op("c", "concat", ["x", 0, 0, {}]), ["'c'", "without its argument 'axis'"]),
    (_op("e", "expand_dims", ["x", 0, 0, {"axis": 1, "dim": 2}]), ["'e'", "'dim'", "ExpandDims"]),
])
def test_what_has_no_keras3_operation_is_refused_in_one_line(layer, words):
    with pytest.raises(RefusedError) as e:
        translate(_model(layer, out=layer["name"]), "m.json")
    assert "\n" not in str(e.value) and all(w in str(e.value) for w in words), str(e.value)


def test_an_operation_outside_a_functional_graph_is_refused():
    seq = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "TFOpLambda", "config": {"name": "tf.math.add", "function": "math.add"}}]}}
    with pytest.raises(RefusedError, match="outside a Functional graph"):
        translate(seq, "m.json")


def test_the_committed_fixture_exercises_every_row():
    """tests/data/keras_whole/ops (generate_keras_whole.py) calls every function of the table, so
    the interop and keras-torch tiers check each row against tf_keras's predictions."""
    path = os.path.join(os.path.dirname(__file__), "..", "data", "keras_whole", "ops", "keras_metadata.pb")
    with open(path, "rb") as f:
        root = next(n for n in parse(f.read(), path) if n.path == "root")
    used = {e["config"]["function"] for e in root.model_config["config"]["layers"] if "OpLambda" in e["class_name"]}
    assert used == set(OPS)
