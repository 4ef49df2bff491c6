"""A tf_keras (Keras 2) model config as Keras 3 takes it: pure JSON to JSON (docs/FORMAT.md §14.4).

The input is what tf_keras 2.x records of a model: ``model.to_json()``, the ``model_config`` of a
SavedModel's ``keras_metadata.pb`` or of a whole-model ``.h5`` (legacy serialization: no
``module``, tuples as ``{"class_name": "__tuple__", "items": [...]}``, ``shared_object_id``
marks). The output is what Keras 3 writes in a ``.keras`` file's ``config.json``: every object
with ``module``, ``class_name``, ``config`` and ``registered_name``; dtypes as ``DTypePolicy``;
a Functional model's call nodes as ``{"args", "kwargs"}`` with ``__keras_tensor__`` references;
each layer's arguments as Keras 3's constructor takes them (:mod:`ckptool.format.keras2_layers`);
a TF operation called on a Keras tensor (``TFOpLambda``, ``SlicingOpLambda``) as the Keras 3
operation computing it (:mod:`ckptool.format.keras2_ops`).

A class that is not stock Keras (a custom layer, initializer, regularizer, constraint) or that
Keras 3 cannot express (:data:`~ckptool.format.keras2_layers.NOT_IN_KERAS3`, with the reason) is
refused with one line naming the class and the layer: a model missing a layer is not the model.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import RefusedError
from ckptool.format.keras2_layers import APPLICATION_LAYERS, LAYERS, MODELS, NOT_IN_KERAS3, fix_layer
from ckptool.format.keras2_ops import op_call

#: the stock classes of each kind of object a layer config holds (tf_keras and Keras 3 share the names)
INITIALIZERS = {"Constant", "GlorotNormal", "GlorotUniform", "HeNormal", "HeUniform", "Identity", "LecunNormal",
                "LecunUniform", "Ones", "Orthogonal", "RandomNormal", "RandomUniform", "TruncatedNormal",
                "VarianceScaling", "Zeros"}
REGULARIZERS = {"L1", "L2", "L1L2", "OrthogonalRegularizer"}
CONSTRAINTS = {"MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm"}
_KINDS = {"_initializer": ("keras.initializers", INITIALIZERS), "_regularizer": ("keras.regularizers", REGULARIZERS),
          "_constraint": ("keras.constraints", CONSTRAINTS)}
#: tf_keras's lower-case aliases of some initializer classes (legacy configs name them so)
_ALIASES = {"glorot_uniform": "GlorotUniform", "glorot_normal": "GlorotNormal", "zeros": "Zeros", "ones": "Ones",
            "he_normal": "HeNormal", "he_uniform": "HeUniform", "lecun_normal": "LecunNormal",
            "lecun_uniform": "LecunUniform", "orthogonal": "Orthogonal", "random_normal": "RandomNormal",
            "random_uniform": "RandomUniform", "truncated_normal": "TruncatedNormal", "constant": "Constant",
            "identity": "Identity", "l1": "L1", "l2": "L2", "l1_l2": "L1L2", "max_norm": "MaxNorm",
            "min_max_norm": "MinMaxNorm", "non_neg": "NonNeg", "unit_norm": "UnitNorm"}


#: the arguments every layer takes
_BASE = {"name", "trainable", "dtype", "batch_input_shape"}


def untuple(x: Any) -> Any:
    """Legacy serialization's tuples as lists, its ``shared_object_id`` marks dropped."""
    if isinstance(x, dict):
        if x.get("class_name") == "__tuple__" and "items" in x:
            return [untuple(v) for v in x["items"]]
        return {k: untuple(v) for k, v in x.items() if k != "shared_object_id"}
    if isinstance(x, list):
        return [untuple(v) for v in x]
    return x


def obj(module: str, cls: str, config: Any) -> dict[str, Any]:
    """An object as Keras 3 serializes it."""
    return {"module": module, "class_name": cls, "config": config, "registered_name": None}


def policy(dtype: Any, where: str) -> Any:
    """A layer's ``dtype``: a name or a tf_keras ``Policy`` as Keras 3's ``DTypePolicy``."""
    if dtype is None:
        return None
    name = dtype
    if isinstance(dtype, dict):
        cfg = dtype.get("config")
        name = cfg.get("name") if isinstance(cfg, dict) else None
    if not isinstance(name, str):
        raise RefusedError(f"{where}: a dtype policy Keras 3 does not take: {dtype!r}")
    return obj("keras", "DTypePolicy", {"name": name})


def _part(key: str, value: Any, where: str) -> Any:
    """An initializer, regularizer or constraint of a layer (named by the key's suffix)."""
    suffix = next((s for s in _KINDS if key.endswith(s)), None)
    if suffix is None or value is None:
        return value
    module, known = _KINDS[suffix]
    cfg: Any = {}
    if isinstance(value, str):
        cls = _ALIASES.get(value, value)
    elif isinstance(value, dict) and isinstance(value.get("class_name"), str):
        cls, cfg = value["class_name"], value.get("config") or {}
    else:
        raise RefusedError(f"{where}: {key} is not a serialized object: {value!r}")
    cls = _ALIASES.get(cls, cls)
    if cls not in known:
        raise RefusedError(f"{where}: {key} is a {cls}, not a stock Keras class: Keras 3 cannot rebuild it "
                           "without its code")
    return obj(module, cls, dict(cfg))


def layer(entry: Any, where: str, shift: dict[str, int] | None = None) -> dict[str, Any]:
    """One layer's serialized entry (a model's ``layers`` item, a wrapper's ``layer``, an RNN's
    ``cell``) as Keras 3 takes it."""
    if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
        raise RefusedError(f"{where}: a layer entry without a class_name")
    cls = entry["class_name"].rsplit(">", 1)[-1]
    cfg: dict[str, Any] = entry["config"] if isinstance(entry.get("config"), dict) else {}
    name = cfg.get("name", entry.get("name", "?"))
    here = f"{where}: layer {name!r} ({cls})"
    if cls in MODELS:
        out = model({"class_name": cls, "config": cfg}, where)
    elif cls in _OP_LAYERS:
        return _op_layer(entry, cfg, here, shift)
    elif cls in NOT_IN_KERAS3:
        raise RefusedError(f"{here}: Keras 3 cannot express it: {NOT_IN_KERAS3[cls]}")
    elif cls in APPLICATION_LAYERS and set(cfg) <= APPLICATION_LAYERS[cls][1] | _BASE:
        new = {k: v for k, v in cfg.items() if k != "batch_input_shape"}
        new["dtype"] = policy(new.get("dtype"), here) if new.get("dtype") is not None else None
        out = obj(APPLICATION_LAYERS[cls][0], cls, new)
    elif cls not in LAYERS:
        raise RefusedError(f"{here}: not a stock Keras layer (a custom class): Keras 3 cannot rebuild it without "
                           "its code")
    else:
        new = {k: _part(k, v, here) for k, v in cfg.items()}
        if "dtype" in new and cls != "InputLayer":
            new["dtype"] = policy(new["dtype"], here)
        for key in ("layer", "backward_layer", "cell"):
            if isinstance(new.get(key), dict):
                new[key] = layer(new[key], here)
        if isinstance(new.get("cells"), list):
            new["cells"] = [layer(c, here) for c in new["cells"]]
        out = obj("keras.layers", cls, fix_layer(cls, new, here))
    if shift is not None:
        out["name"] = entry.get("name", name)
        out["inbound_nodes"] = [_node(n, here, shift) for n in entry.get("inbound_nodes") or []]
    return out


def _is_ref(x: Any) -> bool:
    return isinstance(x, list) and len(x) in (3, 4) and isinstance(x[0], str) and \
        isinstance(x[1], int) and isinstance(x[2], int) and (len(x) == 3 or isinstance(x[3], dict))


def _tensor(ref: list[Any], shift: dict[str, int]) -> dict[str, Any]:
    # shape and dtype are placeholders: Keras 3 replaces the tensor by the one its history names
    history = [ref[0], ref[1] - shift.get(ref[0], 0), ref[2]]
    return {"class_name": "__keras_tensor__", "config": {"shape": [], "dtype": "float32", "keras_history": history}}


def _refs(x: Any, shift: dict[str, int]) -> Any:
    """Call arguments with tf_keras's tensor references ``[layer, node, tensor]`` as Keras 3's."""
    if _is_ref(x):
        return _tensor(x, shift)
    if isinstance(x, list):
        return [_refs(v, shift) for v in x]
    if isinstance(x, dict):
        return {k: _refs(v, shift) for k, v in x.items()}
    return x


def _node(node: Any, where: str, shift: dict[str, int]) -> dict[str, Any]:
    """A legacy call node (its first argument's tensors, each ``[layer, node, tensor, kwargs]``) as
    Keras 3's ``{"args": [...], "kwargs": {...}}``."""
    if isinstance(node, dict) and "args" in node:
        return node  # already Keras 3's
    kwargs: dict[str, Any] = {}

    def first(x: Any) -> Any:
        nonlocal kwargs
        if _is_ref(x):
            if len(x) == 4:
                kwargs = x[3]
            return _tensor(x, shift)
        if isinstance(x, list):
            return [first(v) for v in x]
        if isinstance(x, dict):
            return {k: first(v) for k, v in x.items()}
        raise RefusedError(f"{where}: a call node Keras 3 cannot take: {node!r}")

    args = first(node)
    if isinstance(args, list) and len(args) == 1:
        args = args[0]
    return {"args": [args], "kwargs": _refs(kwargs, shift)}


_OP_LAYERS = {"TFOpLambda", "SlicingOpLambda"}
_CONSTANT = "_CONSTANT_VALUE"


def _op_first(x: Any, where: str, shift: dict[str, int], kwargs: list[Any]) -> Any:
    """A TF operation's first argument as tf_keras records it (a tensor ``[layer, node, tensor,
    kwargs]``, a constant ``["_CONSTANT_VALUE", -1, value, kwargs]``, or a list of them) with
    Keras 3's tensors; each element's kwargs (the same dict) appended to ``kwargs``."""
    if isinstance(x, list) and len(x) == 4 and x[0] == _CONSTANT and isinstance(x[3], dict):
        kwargs.append(x[3])
        if not all(isinstance(v, (int, float)) for v in _leaves(x[2])):
            raise RefusedError(f"{where}: a constant argument Keras 3 cannot take: {x[2]!r}")
        return x[2]
    if _is_ref(x):
        kwargs.append(x[3] if len(x) == 4 else {})
        return _tensor(x, shift)
    if isinstance(x, list):
        return [_op_first(v, where, shift, kwargs) for v in x]
    raise RefusedError(f"{where}: a call node Keras 3 cannot take: {x!r}")


def _leaves(x: Any) -> list[Any]:
    return [y for v in x for y in _leaves(v)] if isinstance(x, list) else [x]


def _op_layer(entry: dict[str, Any], cfg: dict[str, Any], where: str, shift: dict[str, int] | None) -> dict[str, Any]:
    """A ``TFOpLambda``/``SlicingOpLambda`` (a TF function called on a Keras tensor) as the Keras 3
    operation computing it (:func:`ckptool.format.keras2_ops.op_call`), its call nodes kept."""
    if shift is None:
        raise RefusedError(f"{where}: a TensorFlow operation outside a Functional graph: Keras 3 holds operations "
                           "in Functional graphs only")
    made, nodes = None, []
    for node in entry.get("inbound_nodes") or []:
        kwargs: list[Any] = []
        first = _op_first(node, where, shift, kwargs)
        op, init, args = op_call(str(cfg.get("function")), first, _refs(kwargs[0] if kwargs else {}, shift), where)
        if made is not None and made != (op, init):
            raise RefusedError(f"{where}: one operation layer called with other arguments at each call")
        made = (op, init)
        nodes.append({"args": args, "kwargs": {}})
    if made is None:
        raise RefusedError(f"{where}: a TensorFlow operation never called in the graph")
    return {"module": f"keras.src.ops.{made[0].module}", "class_name": made[0].cls,
            "config": {"name": cfg.get("name", entry.get("name")), **made[1]}, "registered_name": made[0].cls,
            "name": entry.get("name", cfg.get("name")), "inbound_nodes": nodes}


def _io(spec: Any, shift: dict[str, int]) -> Any:
    """A model's ``input_layers``/``output_layers``: one tensor as itself, not a list of one."""
    if isinstance(spec, list) and len(spec) == 1 and _is_ref(spec[0]):
        spec = spec[0]
    if _is_ref(spec):
        return [spec[0], spec[1] - shift.get(spec[0], 0), spec[2]]
    if isinstance(spec, list):
        return [_io(s, shift) for s in spec]
    if isinstance(spec, dict):
        return {k: _io(v, shift) for k, v in spec.items()}
    return spec


def _skips_first_node(entry: Any) -> bool:
    """tf_keras numbers a nested model's call nodes from 1 when it has its own InputLayer (node 0 is
    the model's own graph); Keras 3 from 0."""
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        return False
    layers = entry["config"].get("layers")
    first = layers[:1] if isinstance(layers, list) else []
    return str(entry.get("class_name", "")).rsplit(">", 1)[-1] in MODELS and \
        bool(first) and isinstance(first[0], dict) and first[0].get("class_name") == "InputLayer"


def _sequential_input(layers: list[Any]) -> list[Any]:
    """A Sequential model whose first layer was given its input shape: that shape as an InputLayer
    first (Keras 3 layers take no ``batch_input_shape``)."""
    first = layers[0] if layers and isinstance(layers[0], dict) else None
    cfg = first.get("config") if first is not None else None
    if not isinstance(cfg, dict) or first is None or first.get("class_name") == "InputLayer" or \
            cfg.get("batch_input_shape") is None:
        return layers
    dtype = cfg.get("dtype") if isinstance(cfg.get("dtype"), str) else "float32"
    inp = {"class_name": "InputLayer", "config": {"batch_input_shape": cfg["batch_input_shape"], "dtype": dtype,
                                                  "sparse": False, "name": f"{cfg.get('name', 'layer')}_input"}}
    return [inp, *layers]


def _no_slashes(cfg: dict[str, Any], where: str) -> None:
    """Keras 3 refuses a layer name holding ``/`` (tf_keras's DenseNet: ``conv1/conv``): each is
    renamed with ``_`` (Keras 3's own DenseNet says ``conv1_conv``), its references too."""
    names = {str(e["name"]) for e in cfg["layers"]}
    new = {n: n.replace("/", "_") for n in names if "/" in n}
    if not new:
        return
    if len(set(new.values()) | (names - set(new))) != len(names):
        raise RefusedError(f"{where}: layer names holding '/' would collide with others once renamed for Keras 3")

    def ren(x: Any) -> Any:
        if isinstance(x, dict):
            if x.get("class_name") == "__keras_tensor__":
                hist = x["config"]["keras_history"]
                x["config"]["keras_history"] = [new.get(hist[0], hist[0]), *hist[1:]]
                return x
            return {k: ren(v) for k, v in x.items()}
        if isinstance(x, list):
            if _is_ref(x):
                return [new.get(x[0], x[0]), *x[1:]]
            return [ren(v) for v in x]
        return x

    for e in cfg["layers"]:
        e["name"] = new.get(e["name"], e["name"])
        e["config"]["name"] = new.get(e["config"].get("name"), e["config"].get("name"))
        e["inbound_nodes"] = ren(e["inbound_nodes"])
    cfg["input_layers"], cfg["output_layers"] = ren(cfg["input_layers"]), ren(cfg["output_layers"])


def model(doc: Any, where: str) -> dict[str, Any]:
    """A tf_keras model config (``{"class_name", "config"}``) as Keras 3's: a Functional or
    Sequential model, nested ones too; a subclassed model is refused (its code is the model)."""
    doc = untuple(doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise RefusedError(f"{where}: not a Keras model config (an object with 'class_name' and 'config')")
    cls = str(doc.get("class_name", "")).rsplit(">", 1)[-1]
    cfg = doc["config"]
    if cls not in MODELS or not isinstance(cfg.get("layers"), list):
        raise RefusedError(f"{where}: the model is a {cls or 'model of unknown class'}, not a Functional or Sequential "
                           "model: a subclassed model's code is the model, and Keras 3 cannot rebuild it from a config")
    here = f"{where}: model {cfg.get('name', '?')!r}"
    out: dict[str, Any] = {"name": cfg.get("name"), "trainable": cfg.get("trainable", True)}
    if cls == "Sequential":
        out["layers"] = [layer(e, here) for e in _sequential_input(cfg["layers"])]
        if cfg.get("build_input_shape") is not None:
            out["build_input_shape"] = cfg["build_input_shape"]
        return obj("keras", "Sequential", out)
    shift = {str(e.get("name")): 1 for e in cfg["layers"] if _skips_first_node(e)}
    out["layers"] = [layer(e, here, shift) for e in cfg["layers"]]
    out["input_layers"] = _io(cfg.get("input_layers"), shift)
    out["output_layers"] = _io(cfg.get("output_layers"), shift)
    _no_slashes(out, here)
    return obj("keras.src.models.functional", "Functional", out)


__all__ = ["CONSTRAINTS", "INITIALIZERS", "REGULARIZERS", "layer", "model", "obj", "policy", "untuple"]
