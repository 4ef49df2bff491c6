"""A SavedModel's ``saved_model.pb`` and ``keras_metadata.pb`` written field by field, without
TensorFlow (tensorflow/core/protobuf/saved_model.proto, saved_object_graph.proto, graph.proto,
tensor.proto; keras/protobuf/saved_metadata.proto numbers), as tf_keras lays out a lookup layer's
table: the layer's object has a ``lookup_table`` whose ``_initialize`` function's one concrete
function binds the table and two constants (keys, values), each a ``Const`` node of the graph."""

import json
import struct

from ckptool.format.coding import encode_varint

STRING, INT32, INT64, FLOAT = 7, 3, 9, 1


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


def strings(tokens):
    return tensor(STRING, [len(tokens)], *(f(8, t.encode() if isinstance(t, str) else t) for t in tokens))


def int64s(values):
    return tensor(INT64, [len(values)], f(4, struct.pack(f"<{len(values)}q", *values)))


def const(name, t, op="Const"):
    return f(1, f(1, name) + f(2, op) + f(5, f(1, "value") + f(2, f(8, t))))


def obj(children=(), function=None, constant=None):
    out = b"".join(f(1, f(1, nid) + f(2, name)) for name, nid in children)
    if function is not None:
        out += f(6, b"".join(f(1, c) for c in function))
    if constant is not None:
        out += f(9, f(1, constant))
    return f(1, out)


def saved_model(keys, values, layer="layer-0", bound=(2, 4, 5), graph=None):
    """One lookup layer at ``root.<layer>`` whose table is initialized from ``keys`` and ``values``
    (TensorProto bytes)."""
    nodes = (graph if graph is not None else const("Const_1", keys) + const("Const", values)
             + f(1, f(1, "x") + f(2, "Placeholder")))
    objects = (obj([(layer, 1)]) + obj([("lookup_table", 2)]) + obj([("_initialize", 3)]) + obj(function=["f_1"])
               + obj(constant="Const_1") + obj(constant="Const"))
    functions = f(2, f(1, "f_1") + f(2, packed(2, bound)))
    return f(1, 1) + f(2, f(1, b"") + f(2, nodes) + f(7, objects + functions))


def keras_metadata(*layers):
    """``(path, class_name, name)`` nodes as tf_keras's keras_metadata.pb records them."""
    return b"".join(f(1, f(2, i) + f(3, path) + f(4, "_tf_keras_layer") +
                         f(5, json.dumps({"class_name": cls, "name": name})))
                    for i, (path, cls, name) in enumerate(layers, 1))
