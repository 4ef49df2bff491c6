"""ckptool.format.saved_model without TensorFlow: a ``saved_model.pb`` written field by field
(tests/savedmodel_wire.py) as tf_keras lays out a lookup table's initializer. TensorFlow writes the
real ones in the interop tier (tests/interop/test_tf_keras_whole_state.py)."""

import struct

import pytest
from savedmodel_wire import INT32, INT64, STRING, f, packed, saved_model, strings, tensor

from ckptool.errors import CorruptError
from ckptool.format.saved_model import parse, tensor_value


def _model(**kw):
    return saved_model(strings(["the", "cat", "\u00e9"]), tensor(INT64, [3], f(4, struct.pack("<3q", 2, 3, 4))), **kw)


def test_the_constants_a_table_is_initialized_from():
    objs = parse(_model())
    init = objs.resolve("root.layer-0.lookup_table._initialize")
    assert init == 3 and objs.resolve("root.layer-1") is None and objs.resolve("root") == 0
    assert objs.captured(init) == [[b"the", b"cat", "\u00e9".encode()], [2, 3, 4]]
    assert objs.captured(2) is None  # not a function object
    assert set(objs.tensors) == {"Const_1", "Const"}  # the Placeholder is not kept
    objs.children[1]["lookup_table"] = 99  # a reference past the graph
    assert objs.resolve("root.layer-0.lookup_table") is None and objs.kids(99) == {}


def test_tensor_values_as_tensorflow_fills_them():
    assert tensor_value(memoryview(tensor(INT64, [2], packed(10, [-3, 7]))), "t") == [-3, 7]
    assert tensor_value(memoryview(tensor(INT32, [3], packed(7, [5]))), "t") == [5, 5, 5]  # the last value repeated
    assert tensor_value(memoryview(tensor(INT32, [2], f(4, struct.pack("<2i", -1, 9)))), "t") == [-1, 9]
    assert tensor_value(memoryview(tensor(INT64, [], f(10, 42))), "t") == [42]  # a scalar
    assert tensor_value(memoryview(tensor(1, [1], f(5, 0))), "t") is None  # a float: not decoded here


@pytest.mark.parametrize("data,what", [
    (_model()[:-3], "runs past the end"),
    (f(1, 1), "no meta graph"),
    (f(2, f(2, b"")), "no object graph"),
    (_model(graph=b""), "not a Const node"),
])
def test_damage_is_a_corrupt_error_naming_the_file(data, what):
    with pytest.raises(CorruptError, match=what):
        objs = parse(data, "sm/saved_model.pb")
        objs.captured(objs.resolve("root.layer-0.lookup_table._initialize"))


@pytest.mark.parametrize("t,what", [
    (tensor(INT64, [3], f(4, b"\0" * 16)), "tensor_content of 16 bytes for 3 values"),
    (tensor(STRING, [2], f(8, b"a")), "1 values for a tensor of 2"),
])
def test_a_tensor_not_its_shape_is_refused(t, what):
    with pytest.raises(CorruptError, match=what):
        tensor_value(memoryview(t), "t")
