"""One probe of tf.train's checkpoint readers, run as a script under real TensorFlow and
under ``python -m ckptool.shim`` (tests/interop/test_tf_compat.py compares the two).

    python compat_probe.py OUT.json TARGET...

A TARGET is ``prefix:PATH`` (a checkpoint prefix or V1 pattern) or ``dir:PATH``. Every
answer is written as a description of its type and value (bytes in hex: bit-exact), or of
the exception raised (class, its bases, message, code).
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf


def typename(t):
    return f"{t.__module__}.{t.__qualname__}" if isinstance(t, type) else repr(t)


def value(v):
    if isinstance(v, np.ndarray):
        out = {"type": "ndarray", "dtype": str(v.dtype), "scalar": typename(v.dtype.type), "shape": list(v.shape)}
        if v.dtype == object:
            out["items"] = [[typename(type(x)), x.hex() if isinstance(x, bytes) else repr(x)] for x in v.ravel()]
        else:
            out["hex"] = np.ascontiguousarray(v).tobytes().hex()
        return out
    if isinstance(v, np.generic):
        return {"type": typename(type(v)), "dtype": str(v.dtype), "hex": v.tobytes().hex()}
    if isinstance(v, bytes):
        return {"type": "bytes", "hex": v.hex()}
    return {"type": typename(type(v)), "repr": repr(v)}


def error(exc):
    bases = [c.__name__ for c in type(exc).__mro__ if c not in (BaseException, object)]
    out = {"raised": type(exc).__name__, "bases": bases, "str": str(exc)}
    if isinstance(exc, tf.errors.OpError):
        out.update(message=exc.message, code=exc.error_code, args=repr(exc.args), node_def=repr(exc.node_def),
                   op=repr(exc.op))
    else:
        out["args"] = repr(exc.args)
    return out


def call(f):
    try:
        return {"ok": f()}
    except Exception as exc:  # the probe records what is raised
        return error(exc)


def numpy_type(d):
    t = d.as_numpy_dtype
    return str(t) if isinstance(t, np.dtype) else typename(t)


def dtype(d):
    return {"name": d.name, "repr": repr(d), "str": str(d), "enum": d.as_datatype_enum,
            "numpy": call(lambda: numpy_type(d)), "is_tf_dtype": isinstance(d, tf.dtypes.DType),
            "equal_name": d == d.name, "hash_equal": hash(d) == hash(tf.as_dtype(d.name))}


def state(s):
    if s is None:
        return None
    return {"type": type(s).__name__, "model_checkpoint_path": s.model_checkpoint_path,
            "all_model_checkpoint_paths": list(s.all_model_checkpoint_paths),
            "all_model_checkpoint_timestamps": list(s.all_model_checkpoint_timestamps),
            "last_preserved_timestamp": s.last_preserved_timestamp}


def probe_prefix(p):
    rec = {"list_variables": call(lambda: [[type(n).__name__, n, type(s).__name__, s]
                                           for n, s in tf.train.list_variables(p)])}
    try:
        reader = tf.compat.v1.train.NewCheckpointReader(p)
    except Exception as exc:
        rec["reader"] = error(exc)
        return rec
    rec["reader_type"] = type(reader).__name__
    shapes = reader.get_variable_to_shape_map()
    rec["shape_map"] = {"type": type(shapes).__name__, "items": sorted([n, type(s).__name__, s]
                                                                       for n, s in shapes.items())}
    dtypes = reader.get_variable_to_dtype_map()
    rec["dtype_map"] = {n: dtype(d) for n, d in sorted(dtypes.items())}
    rec["map_order"] = {"shape": list(shapes), "dtype": list(dtypes)}  # a dict's iteration order
    rec["values"] = {n: call(lambda n=n: value(tf.train.load_variable(p, n))) for n in sorted(shapes)}
    rec["get_tensor"] = {n: call(lambda n=n: value(reader.get_tensor(n))) for n in sorted(shapes)}
    rec["load_variable_colon0"] = {n: call(lambda n=n: value(tf.train.load_variable(p, n + ":0")))
                                   for n in sorted(shapes)[:3]}
    rec["has_tensor"] = {n: reader.has_tensor(n) for n in sorted(shapes)[:3] + ["nope", ""]}
    text = reader.debug_string()
    rec["debug_string"] = {"type": type(text).__name__, "lines": [ln.hex() for ln in text.split(b"\n")]}
    rec["missing_key"] = call(lambda: tf.train.load_variable(p, "nope"))
    rec["missing_key_reader"] = call(lambda: reader.get_tensor("nope/kernel"))
    rec["missing_path"] = call(lambda: tf.train.list_variables(p + "_nope"))
    rec["missing_path_load_variable"] = call(lambda: tf.train.load_variable(p + "_nope", "x"))
    rec["missing_path_reader"] = call(lambda: tf.compat.v1.train.NewCheckpointReader(p + "_nope"))
    rec["missing_path_load_checkpoint"] = call(lambda: tf.train.load_checkpoint(p + "_nope"))
    rec["checkpoint_exists"] = [tf.compat.v1.train.checkpoint_exists(q) for q in (p, p + "_nope")]
    return rec


def probe_dir(d):
    return {
        "latest_checkpoint": call(lambda: tf.train.latest_checkpoint(d)),
        "get_checkpoint_state": call(lambda: state(tf.train.get_checkpoint_state(d))),
        "v1_get_checkpoint_state": call(lambda: state(tf.compat.v1.train.get_checkpoint_state(d))),
        "list_variables": call(lambda: [n for n, _ in tf.train.list_variables(d)]),
        "load_checkpoint": call(lambda: type(tf.train.load_checkpoint(d)).__name__),
        "reader": call(lambda: type(tf.compat.v1.train.NewCheckpointReader(d)).__name__),
        "missing_dir_state": call(lambda: state(tf.train.get_checkpoint_state(os.path.join(d, "nope")))),
        "missing_dir_latest": call(lambda: tf.train.latest_checkpoint(os.path.join(d, "nope"))),
    }


def main():
    out, targets = sys.argv[1], sys.argv[2:]
    result = {}
    for t in targets:
        kind, path = t.split(":", 1)
        result[t] = probe_prefix(path) if kind == "prefix" else probe_dir(path)
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
