"""ckptool.format.saved_model without TensorFlow: a SavedModel's ``saved_model.pb`` written field by
field here (tensorflow/core/protobuf/saved_model.proto, saved_object_graph.proto, graph.proto,
tensor.proto numbers), as tf_keras lays out a lookup table's initializer: the object graph's
``lookup_table._initialize`` function, whose one concrete function binds the table and two
constants. TensorFlow writes the same in the interop tier (tests/interop/test_tf_keras_whole_state.py)."""

import struct

import pytest

from ckptool.errors import CorruptError
from ckptool.format.coding import encode_varint
from ckptool.format.saved_model import parse, tensor_value


def f(number, value):
    """One field: an int as a varint, bytes/str length-delimited."""
    if isinstance(value, int):
        return encode_varint(number << 3) + encode_varint(value % (1 << 64))
    value = value.encode() if isinstance(value, str) else value
    return encode_varint(number << 3 | 2) + encode_varint(len(value)) + value


def packed(number, ints):
    return f(number, b"".join(encode_varint(i % (1 << 64)) for i in ints))


def tensor(dtype, shape, *fields):
    dims = b"".join(f(2, f(1, d)) for d in shape)
    return f(1, dtype) + f(2, dims) + b"".join(fields)


def const(name, t, op="Const"):
    return f(1, f(1, name) + f(2, op) + f(5, f(1, "dtype") + f(2, f(6, 7))) + f(5, f(1, "value") + f(2, f(8, t))))


def obj(children=(), function=None, constant=None):
    out = b"".join(f(1, f(1, nid) + f(2, name)) for name, nid in children)
    if function is not None:
        out += f(6, b"".join(f(1, c) for c in function))
    if constant is not None:
        out += f(9, f(1, constant))
    return f(1, out)


def saved_model(bound=(2, 4, 5), graph=None):
    keys = tensor(7, [3], f(8, b"the"), f(8, b"cat"), f(8, "\u00e9".encode()))
    values = tensor(9, [3], f(4, struct.pack("<3q", 2, 3, 4)))
    nodes = (graph if graph is not None else const("Const_1", keys) + const("Const", values)
             + f(1, f(1, "x") + f(2, "Placeholder")))
    objects = (obj([("layer-0", 1)]) + obj([("lookup_table", 2)]) + obj([("_initialize", 3)]) + obj(function=["f_1"])
               + obj(constant="Const_1") + obj(constant="Const"))
    functions = f(2, f(1, "f_1") + f(2, packed(2, bound)))
    return f(1, 1) + f(2, f(1, b"") + f(2, nodes) + f(7, objects + functions))


def test_the_constants_a_table_is_initialized_from():
    objs = parse(saved_model())
    init = objs.resolve("root.layer-0.lookup_table._initialize")
    assert init == 3 and objs.resolve("root.layer-1") is None and objs.resolve("root") == 0
    assert objs.captured(init) == [[b"the", b"cat", "\u00e9".encode()], [2, 3, 4]]
    assert objs.captured(2) is None  # not a function object
    assert set(objs.tensors) == {"Const_1", "Const"}  # the Placeholder is not kept


def test_tensor_values_as_tensorflow_fills_them():
    assert tensor_value(memoryview(tensor(9, [2], packed(10, [-3, 7]))), "t") == [-3, 7]
    assert tensor_value(memoryview(tensor(3, [3], packed(7, [5]))), "t") == [5, 5, 5]  # the last value repeated
    assert tensor_value(memoryview(tensor(3, [2], f(4, struct.pack("<2i", -1, 9)))), "t") == [-1, 9]
    assert tensor_value(memoryview(tensor(9, [], f(10, 42))), "t") == [42]  # a scalar
    assert tensor_value(memoryview(tensor(1, [1], f(5, 0))), "t") is None  # a float: not decoded here


@pytest.mark.parametrize("data,what", [
    (saved_model()[:-3], "runs past the end"),
    (f(1, 1), "no meta graph"),
    (f(2, f(2, b"")), "no object graph"),
    (saved_model(graph=b""), "not a Const node"),
])
def test_damage_is_a_corrupt_error_naming_the_file(data, what):
    with pytest.raises(CorruptError, match=what):
        objs = parse(data, "sm/saved_model.pb")
        objs.captured(objs.resolve("root.layer-0.lookup_table._initialize"))


@pytest.mark.parametrize("t,what", [
    (tensor(9, [3], f(4, b"\0" * 16)), "tensor_content of 16 bytes for 3 values"),
    (tensor(7, [2], f(8, b"a")), "1 values for a tensor of 2"),
])
def test_a_tensor_not_its_shape_is_refused(t, what):
    with pytest.raises(CorruptError, match=what):
        tensor_value(memoryview(t), "t")
