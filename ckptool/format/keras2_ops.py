"""tf_keras's TensorFlow operations in a Functional graph as the Keras 3 operations a Keras 3
Functional graph holds: one row of :data:`OPS` per TF function (docs/FORMAT.md §14.4).

tf_keras records ``x + 3.0``, ``tf.concat([a, b], -1)``, ``tf.nn.relu(x)`` called on a Keras tensor
as a ``TFOpLambda`` layer whose ``function`` names the TF function (``"__operators__.add"``,
``"concat"``, ``"nn.relu"``), and ``x[:, 0]`` as a ``SlicingOpLambda`` (``"__operators__.getitem"``,
the key in the call's ``slice_spec``); each call node holds the first argument and, as keyword
arguments by TF's names, all the others. Keras 3 serializes ``keras.ops.add(x, 3.0)`` as an
operation object (``module`` ``keras.src.ops.numpy``, class ``Add``, its constructor's arguments in
``config``) whose call node holds the call's arguments, constants among them. A row says which
TF arguments are the operation's call arguments, which its constructor's (with TF's default), and
which TF arguments Keras 3 lacks and takes only at one value. A function not in the table is refused
naming it: a model missing an operation is not the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import RefusedError

#: a constructor argument TF requires (no default)
REQUIRED = "<required>"


@dataclass(frozen=True)
class Op:
    """A Keras 3 operation ``cls`` of ``keras.src.ops.<module>``: ``call`` names the TF arguments
    passed to its call in order (the first is the node's first argument); ``init`` maps a TF
    argument to the constructor's (its name there, TF's default); ``fixed`` holds TF arguments the
    operation lacks, accepted at that value only."""

    module: str
    cls: str
    call: tuple[str, ...] = ("x",)
    init: dict[str, tuple[str, Any]] = field(default_factory=dict)
    fixed: dict[str, Any] = field(default_factory=dict)


def _binary(cls: str) -> Op:
    return Op("numpy", cls, ("x", "y"))


_REDUCE = {"axis": ("axis", None), "keepdims": ("keepdims", False)}
_MATMUL = {k: False for k in ("transpose_a", "transpose_b", "adjoint_a", "adjoint_b", "a_is_sparse", "b_is_sparse")}

#: TF function (as tf_keras 2.21 names it: ``tf.divide`` is ``math.truediv``, ``tf.transpose``
#: ``compat.v1.transpose``) -> the Keras 3 operation computing it
OPS: dict[str, Op] = {
    "__operators__.add": _binary("Add"), "math.add": _binary("Add"), "math.subtract": _binary("Subtract"),
    "math.multiply": _binary("Multiply"), "math.truediv": _binary("Divide"),
    "compat.v1.floor_div": _binary("FloorDivide"), "math.pow": _binary("Power"), "math.maximum": _binary("Maximum"),
    "math.minimum": _binary("Minimum"), "linalg.matmul": Op("numpy", "Matmul", ("a", "b"), fixed={
        **_MATMUL, "output_type": None}),
    "math.negative": Op("numpy", "Negative"), "math.abs": Op("numpy", "Absolute"), "math.sqrt": Op("numpy", "Sqrt"),
    "math.rsqrt": Op("math", "Rsqrt"), "math.exp": Op("numpy", "Exp"), "math.log": Op("numpy", "Log"),
    "math.square": Op("numpy", "Square"), "math.tanh": Op("numpy", "Tanh"), "math.erf": Op("math", "Erf"),
    "math.sigmoid": Op("nn", "Sigmoid"), "nn.relu": Op("nn", "Relu"), "nn.relu6": Op("nn", "Relu6"),
    "math.softplus": Op("nn", "Softplus"), "nn.elu": Op("nn", "Elu"), "nn.selu": Op("nn", "Selu"),
    "nn.silu": Op("nn", "Silu", fixed={"beta": 1.0}),
    "nn.gelu": Op("nn", "Gelu", init={"approximate": ("approximate", False)}),
    "nn.leaky_relu": Op("nn", "LeakyRelu", init={"alpha": ("negative_slope", 0.2)}),
    "nn.softmax": Op("nn", "Softmax", init={"axis": ("axis", -1)}),
    "math.reduce_mean": Op("numpy", "Mean", init=_REDUCE), "math.reduce_sum": Op("numpy", "Sum", init=_REDUCE),
    "math.reduce_max": Op("numpy", "Max", init=_REDUCE), "math.reduce_min": Op("numpy", "Min", init=_REDUCE),
    "concat": Op("numpy", "Concatenate", ("values",), init={"axis": ("axis", REQUIRED)}),
    "stack": Op("numpy", "Stack", ("values",), init={"axis": ("axis", 0)}),
    "reshape": Op("numpy", "Reshape", ("tensor",), init={"shape": ("newshape", REQUIRED)}),
    "compat.v1.transpose": Op("numpy", "Transpose", ("a",), init={"perm": ("axes", None)},
                              fixed={"conjugate": False}),
    "expand_dims": Op("numpy", "ExpandDims", ("input",), init={"axis": ("axis", REQUIRED)}),
    "compat.v1.squeeze": Op("numpy", "Squeeze", ("input",), init={"axis": ("axis", None)},
                            fixed={"squeeze_dims": None}),
    "clip_by_value": Op("numpy", "Clip", ("t",), init={"clip_value_min": ("x_min", REQUIRED),
                                                        "clip_value_max": ("x_max", REQUIRED)}),
    "cast": Op("core", "Cast", ("x",), init={"dtype": ("dtype", REQUIRED)}),
    "__operators__.getitem": Op("numpy", "GetItem", ("tensor", "slice_spec")),
}


def _has_tensor(x: Any) -> bool:
    if isinstance(x, dict):
        return x.get("class_name") == "__keras_tensor__" or any(_has_tensor(v) for v in x.values())
    return isinstance(x, list) and any(_has_tensor(v) for v in x)


def _key(spec: Any, where: str) -> list[Any]:
    """tf_keras's ``slice_spec`` (slices as ``{"start", "stop", "step"}``, ``...`` as
    ``{"class_name": "__ellipsis__"}``, ``tf.newaxis`` as null) as the key Keras 3's ``GetItem``
    takes: always a tuple (a list in JSON), slices and ``...`` as Keras 3 serializes them."""
    items = spec if isinstance(spec, list) else [spec]
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("class_name") == "__ellipsis__":
            out.append({"class_name": "__ellipsis__", "config": {}})
        elif isinstance(item, dict) and set(item) == {"start", "stop", "step"} and \
                all(v is None or isinstance(v, int) and not isinstance(v, bool) for v in item.values()):
            out.append({"class_name": "__slice__", "config": dict(item)})
        elif item is None or isinstance(item, int) and not isinstance(item, bool):
            out.append(item)
        else:
            raise RefusedError(f"{where}: a slice by {item!r}: Keras 3's GetItem is translated for constant "
                               "integers, slices of them, '...' and tf.newaxis only")
    return out


def op_call(function: str, first: Any, kwargs: dict[str, Any], where: str) -> tuple[Op, dict[str, Any], list[Any]]:
    """The Keras 3 operation computing TF's ``function``, its constructor's arguments and its call
    arguments, for a call node whose first argument is ``first`` and whose other arguments (by TF's
    names, tensors already Keras 3's) are ``kwargs``."""
    op = OPS.get(function)
    if op is None:
        raise RefusedError(f"{where}: tf.{function} on a Keras tensor: Keras 3 graphs hold keras.ops operations, "
                           f"and ckptool has no translation of tf.{function} to one")
    rest = {k: v for k, v in kwargs.items() if k != "name"}
    args = [first]
    for name in op.call[1:]:
        if name not in rest:
            raise RefusedError(f"{where}: tf.{function} called without its argument {name!r}")
        args.append(rest.pop(name))
    init: dict[str, Any] = {}
    for name, (k3, default) in op.init.items():
        value = rest.pop(name, None)
        value = default if value is None else value
        if value is REQUIRED:
            raise RefusedError(f"{where}: tf.{function} called without its argument {name!r}")
        if _has_tensor(value):
            raise RefusedError(f"{where}: tf.{function} with a tensor as {name!r}: Keras 3's {op.cls} takes a "
                               "constant there")
        init[k3] = value
    for name, value in op.fixed.items():
        if name in rest and rest.pop(name) != value:
            raise RefusedError(f"{where}: tf.{function} with {name}={kwargs[name]!r}: Keras 3's {op.cls} computes "
                               f"only {name}={value!r}")
    if rest:
        raise RefusedError(f"{where}: tf.{function} with argument(s) {sorted(rest)}: Keras 3's {op.cls} takes "
                           "no such argument")
    if op.cls == "GetItem":
        args[1] = _key(args[1], where)
    return op, init, args


__all__ = ["OPS", "Op", "op_call"]
