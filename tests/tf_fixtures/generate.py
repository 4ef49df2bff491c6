#!/usr/bin/env python
"""Write the TF-made checkpoint fixtures in tests/data/ with real TensorFlow.

    /work/tfvenv/bin/python tests/tf_fixtures/generate.py [--out tests/data] [--only NAME ...]

Each fixture is made by its own subprocess (``--only NAME``), because some need a
device configuration (several logical CPUs) that must be set before TensorFlow
initializes, and the TF1 ones run in graph mode.  A fixture is first written under
``/tmp/ckptool-fixture-gen/<name>/`` and then copied to ``<out>/<name>/`` (wiping
what was there), so absolute paths TF records in a ``checkpoint`` state file point
"elsewhere", as after a moved directory; the temporary tree is removed before
the expected values are read back.

Next to the checkpoint files each fixture directory gets:

``expected.json``
    ``{"checkpoints": {<prefix basename>: {"list_variables", "dtypes", "tensors"}},
    "tf_version", "refused_dtypes", "fixture"}``: what TF itself returns through
    ``tf.train.load_checkpoint`` / ``tf.train.list_variables`` for every checkpoint of
    the fixture (tensor values as sha256 of their raw numpy bytes, strings as base64,
    or the error TF raised).  A sharded V1 checkpoint (``NAME-?????-of-NNNNN``) is
    keyed by ``NAME``.
``state.json``
    where a ``checkpoint`` state file exists (next to it): what
    ``tf.train.get_checkpoint_state`` and ``tf.train.latest_checkpoint`` return,
    paths inside the fixture directory made relative to it.

Values use fixed seeds; only timestamps (state files, CheckpointManager) and
absolute paths differ between runs.  ``bigendian`` is laid out by ckptool (TF cannot
write one on a little-endian host) and read back by TF for its expected values.
"""

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys

GEN_ROOT = "/tmp/ckptool-fixture-gen"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data"))

ALL_DTYPES = (
    "float16 bfloat16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool "
    "complex64 complex128 string qint8 quint8 qint16 quint16 qint32 float8_e5m2 float8_e4m3fn "
    "float8_e4m3fnuz float8_e4m3b11fnuz float8_e5m2fnuz int4 uint4 int2 uint2 float4_e2m1fn"
).split()

QUANTIZED = {"qint8": "int8", "quint8": "uint8", "qint16": "int16", "quint16": "uint16", "qint32": "int32"}

# name -> (function, needs_logical_cpus)
FIXTURES = {}


def fixture(name, cpus=None, graph=False):
    def deco(fn):
        FIXTURES[name] = (fn, cpus, graph)
        return fn
    return deco


# --------------------------------------------------------------------------- helpers


def _tf():
    import tensorflow as tf
    return tf


def _save_v2(prefix, named):
    """``tf.raw_ops.SaveV2`` of [(name, tensor)], in that (data file) order."""
    tf = _tf()
    names = [n for n, _ in named]
    tensors = [t for _, t in named]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=tensors)


def _const(dtname, array):
    """A tf tensor of dtype ``dtname`` holding ``array`` (given in the storage numpy type)."""
    tf = _tf()
    return tf.constant(array, dtype=tf.dtypes.as_dtype(dtname))


def _values(dtname, shape, rng, specials=False):
    """Deterministic values of TF dtype ``dtname`` as a numpy array of its storage type."""
    import ml_dtypes
    import numpy as np
    tf = _tf()
    n = int(np.prod(shape, dtype=np.int64))
    if dtname == "string":
        vals = [bytes(rng.integers(0, 256, size=int(rng.integers(0, 12)), dtype=np.uint8)) for _ in range(n)]
        return np.array(vals, dtype=object).reshape(shape)
    if dtname == "bool":
        return (rng.integers(0, 2, size=n) == 1).reshape(shape)
    npdt = np.dtype(QUANTIZED.get(dtname, None) or tf.dtypes.as_dtype(dtname).as_numpy_dtype)
    if dtname.startswith("complex"):
        part = np.float32 if dtname == "complex64" else np.float64
        re = rng.standard_normal(n).astype(part) * 100
        im = rng.standard_normal(n).astype(part) * 100
        v = (re + 1j * im).astype(npdt)
        if specials and n >= 4:
            v[:4] = [complex(np.nan, 1), complex(np.inf, -np.inf), complex(-0.0, 0.0),
                     complex(np.finfo(part).max, np.finfo(part).tiny)]
        return v.reshape(shape)
    is_int = dtname in QUANTIZED or dtname.startswith(("int", "uint"))
    if is_int:
        info = ml_dtypes.iinfo(npdt) if dtname in ("int4", "uint4", "int2", "uint2") else np.iinfo(npdt)
        lo, hi = int(info.min), int(info.max)
        v = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64 if hi <= 2**63 - 1 else np.uint64)
        if specials:
            fixed = [lo, hi, 0, -1 if lo < 0 else 1, lo + 1, hi - 1]
            v[: min(n, len(fixed))] = fixed[: min(n, len(fixed))]
        return v.astype(npdt).reshape(shape)
    # floating point (IEEE, bfloat16, float8, float4)
    v = (rng.standard_normal(n) * 3).astype(np.float32)
    if specials:
        finfo = ml_dtypes.finfo(npdt)
        fixed = [np.nan, np.inf, -np.inf, -0.0, float(finfo.max), float(finfo.min),
                 float(finfo.tiny), -1.5, 0.5]
        k = min(n, len(fixed))
        v[:k] = np.array(fixed[:k], dtype=np.float32)
    with np.errstate(all="ignore"):
        return v.astype(npdt).reshape(shape)


def _copy_tree(src, dst):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst, symlinks=True)


# --------------------------------------------------------------------------- fixtures
# Each gets the generation directory ``gen`` and returns the checkpoint prefixes it wrote,
# relative to ``gen`` (a sharded V1 one as its ``NAME-?????-of-NNNNN`` spec), plus notes.


@fixture("dtypes")
def make_dtypes(gen):
    """One SaveV2 bundle holding every dtype TF can save, in several shapes."""
    import numpy as np
    rng = np.random.default_rng(1234)
    named, refused = [], []
    scratch = os.path.join(gen, "_probe")
    for dt in ALL_DTYPES:
        try:
            t = _const(dt, _values(dt, (3,), rng))
            _save_v2(os.path.join(scratch, dt), [("x", t)])
        except Exception as e:  # noqa: BLE001 - we record what TF refuses
            refused.append({"dtype": dt, "error": f"{type(e).__name__}: {e}".strip()[:500]})
            continue
        shapes = {"scalar": (), "vector": (9,), "empty_0x4": (0, 4), "empty_3x0": (3, 0), "cube": (2, 3, 4)}
        for label, shape in shapes.items():
            named.append((f"{dt}/{label}", _const(dt, _values(dt, shape, rng, specials=(label == "vector")))))
    shutil.rmtree(scratch)
    # Not in key order: the data file follows the SaveV2 input order.
    order = rng.permutation(len(named))
    _save_v2(os.path.join(gen, "dtypes"), [named[i] for i in order])
    return ["dtypes"], {"refused_dtypes": refused}


@fixture("strings")
def make_strings(gen):
    import numpy as np
    tf = _tf()

    def s(v):
        return tf.constant(np.array(v, dtype=object))

    named = [
        ("empty_entries", s([b"", b"a", b"", b""])),
        ("binary", s([b"\x00\xff", b"\xff\xfe\xfd", b"\x00", b"\x80abc\x00"])),
        ("long", s([b"L" * 300, bytes(range(256)) * 70, b"short"])),  # 2- and 3-byte varint lengths
        ("unicode", s(["h\u00e9llo".encode(), "\u65e5\u672c\u8a9e".encode(), "\U0001F642".encode(), b"ascii"])),
        ("empty_tensor", s(np.zeros((0,), dtype=object))),
        ("empty_2x0", tf.constant(np.zeros((2, 0), dtype=object).astype(bytes), dtype=tf.string)),
        ("scalar", tf.constant(b"a string scalar")),
        ("empty_scalar", tf.constant(b"")),
        ("matrix", s([[b"r0c0", b"", b"r0c2"], [b"\x00", b"r1c1" * 40, "\u00fc".encode()]])),
    ]
    _save_v2(os.path.join(gen, "strings"), named)
    return ["strings"], {}


@fixture("tf1_saver", graph=True)
def make_tf1_saver(gen):
    import numpy as np
    tf = _tf()
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(7)
        with v1.variable_scope("dense"):
            kernel = v1.get_variable("kernel", initializer=np.arange(12, dtype=np.float32).reshape(4, 3) / 7)
            bias = v1.get_variable("bias", initializer=np.array([0.5, -0.25, 1e-3], dtype=np.float32))
        with v1.variable_scope("embedding"):
            v1.get_variable("table", initializer=np.arange(10, dtype=np.float64).reshape(5, 2))
        step = v1.train.get_or_create_global_step()
        bump = v1.assign_add(kernel, tf.ones_like(kernel))
        bump_b = v1.assign_sub(bias, tf.ones_like(bias) * 0.125)
        inc = v1.assign_add(step, 10)
        saver = v1.train.Saver(max_to_keep=5)
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            paths = []
            for _ in range(3):
                sess.run([bump, bump_b, inc])
                paths.append(saver.save(sess, os.path.join(gen, "model.ckpt"), global_step=step))
    return [os.path.basename(p) for p in paths], {}


@fixture("tf1_sharded", graph=True)
def make_tf1_sharded(gen):
    import numpy as np
    tf = _tf()
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        rng = np.random.default_rng(5)
        for dev in range(3):
            with tf.device(f"/cpu:{dev}"), v1.variable_scope(f"tower{dev}"):
                v1.get_variable("w", initializer=rng.standard_normal((3, 4)).astype(np.float32))
                v1.get_variable("b", initializer=np.full((4,), dev, dtype=np.int32))
        with tf.device("/cpu:2"):
            v1.get_variable("names", initializer=tf.constant([b"alpha", b"", b"\xff"]))
        step = v1.train.get_or_create_global_step()
        saver = v1.train.Saver(sharded=True)
        cfg = v1.ConfigProto(device_count={"CPU": 3}, allow_soft_placement=False)
        with v1.Session(graph=g, config=cfg) as sess:
            sess.run(v1.global_variables_initializer())
            p = saver.save(sess, os.path.join(gen, "model.ckpt"), global_step=step)
    return [os.path.basename(p)], {}


@fixture("partitioned", graph=True)
def make_partitioned(gen):
    import numpy as np
    tf = _tf()
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        def part(name, value, partitioner):
            def init(shape, dtype=None, partition_info=None):
                # Each partition asks for its own slice of the full value.
                offset = partition_info.var_offset if partition_info else [0] * value.ndim
                index = tuple(slice(o, o + n) for o, n in zip(offset, shape))
                return tf.constant(value[index])
            v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype),
                            initializer=init, partitioner=partitioner)
        part("emb/weights", np.arange(40, dtype=np.float32).reshape(10, 4), v1.fixed_size_partitioner(3))
        part("emb/bias", np.arange(7, dtype=np.int64) - 3, v1.fixed_size_partitioner(3))
        part("wide/kernel", np.arange(36, dtype=np.float64).reshape(4, 9) / 3,
             v1.fixed_size_partitioner(3, axis=1))
        v1.get_variable("plain", initializer=np.array([1.0, 2.0], dtype=np.float32))
        saver = v1.train.Saver()
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            p = saver.save(sess, os.path.join(gen, "model.ckpt"))
    return [os.path.basename(p)], {}


@fixture("keras_adam")
def make_keras_adam(gen):
    import numpy as np
    tf = _tf()
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(6, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    opt = tf.keras.optimizers.Adam(learning_rate=0.01)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x) - y) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    p = tf.train.Checkpoint(model=model, optimizer=opt).save(os.path.join(gen, "ckpt"))
    return [os.path.basename(p)], {}


@fixture("manager")
def make_manager(gen):
    import time
    tf = _tf()
    v = tf.Variable([1.0, 2.0, 3.0])
    step = tf.Variable(0, dtype=tf.int64)
    ck = tf.train.Checkpoint(v=v, step=step)
    mgr = tf.train.CheckpointManager(ck, gen, max_to_keep=3)
    for _ in range(5):
        v.assign_add([1.0, 1.0, 1.0])
        step.assign_add(1)
        mgr.save()
        time.sleep(0.05)  # distinct timestamps
    return [os.path.basename(p) for p in mgr.checkpoints], {}


@fixture("v1", graph=True, cpus=3)
def make_v1(gen):
    """Legacy V1 single-file checkpoints: one plain, one sharded over 3 devices."""
    import numpy as np
    tf = _tf()
    v1 = tf.compat.v1
    V1 = v1.train.SaverDef.V1
    out, notes = [], {}
    g = tf.Graph()
    with g.as_default():
        v1.get_variable("f32", initializer=np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5)
        v1.get_variable("i64", initializer=np.array([-(2**63), 2**63 - 1, 0], dtype=np.int64))
        v1.get_variable("i32", initializer=np.array(7, dtype=np.int32))
        v1.get_variable("f64", initializer=np.array([np.pi, np.nan, -np.inf], dtype=np.float64))
        v1.get_variable("half", initializer=np.array([1.5, -0.0, 65504], dtype=np.float16))
        v1.get_variable("flag", initializer=np.array([True, False, True]))
        v1.get_variable("text", initializer=tf.constant([b"v1", b"", b"\x00\xff"]))
        v1.get_variable("scope/empty", initializer=np.zeros((0, 3), dtype=np.float32))
        saver = v1.train.Saver(write_version=V1)
        os.makedirs(os.path.join(gen, "single"))
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            p = saver.save(sess, os.path.join(gen, "single", "v1ckpt"))
            out.append(os.path.relpath(p, gen))
    g = tf.Graph()
    with g.as_default():
        for dev in range(3):
            with tf.device(f"/cpu:{dev}"):
                v1.get_variable(f"part{dev}/w", initializer=np.full((2, 2), dev + 0.5, dtype=np.float32))
                v1.get_variable(f"part{dev}/n", initializer=np.array(dev * 100, dtype=np.int64))
        saver = v1.train.Saver(write_version=V1, sharded=True)
        os.makedirs(os.path.join(gen, "sharded"))
        cfg = v1.ConfigProto(device_count={"CPU": 3})
        with v1.Session(graph=g, config=cfg) as sess:
            sess.run(v1.global_variables_initializer())
            p = saver.save(sess, os.path.join(gen, "sharded", "v1sharded"))
            out.append(os.path.relpath(p, gen))
    return out, notes


@fixture("dtensor", cpus=4)
def make_dtensor(gen):
    import numpy as np
    tf = _tf()
    from tensorflow.experimental import dtensor
    mesh = dtensor.create_mesh([("x", 2), ("y", 2)], device_type="CPU")

    def dvar(val, specs):
        rep = dtensor.copy_to_mesh(tf.constant(val), dtensor.Layout.replicated(mesh, rank=np.ndim(val)))
        return dtensor.DVariable(dtensor.relayout(rep, dtensor.Layout(specs, mesh)))

    rng = np.random.default_rng(11)
    ck = tf.train.Checkpoint(
        rows=dvar(rng.standard_normal((8, 4)).astype(np.float32), ["x", dtensor.UNSHARDED]),
        grid=dvar(np.arange(48, dtype=np.float32).reshape(6, 8), ["x", "y"]),
        cols=dvar(np.arange(12, dtype=np.int32).reshape(3, 4), [dtensor.UNSHARDED, "y"]),
        rep=dvar(np.arange(5, dtype=np.int64), [dtensor.UNSHARDED]),
    )
    p = ck.save(os.path.join(gen, "ckpt"))
    return [os.path.basename(p)], {}


@fixture("maxshard")
def make_maxshard(gen):
    import numpy as np
    tf = _tf()
    rng = np.random.default_rng(21)
    ck = tf.train.Checkpoint(
        big=tf.Variable(rng.standard_normal((25, 4)).astype(np.float32)),
        vec=tf.Variable(np.arange(40, dtype=np.int64)),
        small=tf.Variable(np.float64(2.5)),
        words=tf.Variable(tf.constant([b"w%02d" % i * (i + 1) for i in range(12)])),
    )
    opts = tf.train.CheckpointOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(max_shard_size=128))
    p = ck.save(os.path.join(gen, "ckpt"), options=opts)
    return [os.path.basename(p)], {}


@fixture("many")
def make_many(gen):
    """~5000 small variables: an index of several data blocks."""
    import numpy as np
    tf = _tf()
    rng = np.random.default_rng(99)
    named = []
    for i in range(5000):
        h = hashlib.sha1(str(i).encode()).hexdigest()[:10]
        name = f"scope_{h}/a_fairly_long_layer_name_{i % 37:02d}/variable_{i:05d}"
        if i % 3 == 0:
            t = tf.constant(np.int64(i))
        else:
            t = tf.constant(rng.standard_normal(i % 3).astype(np.float32))
        named.append((name, t))
    _save_v2(os.path.join(gen, "many"), named)
    return ["many"], {}


@fixture("savedmodel")
def make_savedmodel(gen):
    import numpy as np
    tf = _tf()

    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
            self.b = tf.Variable(np.array([0.5, -0.5], dtype=np.float32), name="b")

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def __call__(self, x):
            return tf.matmul(x, self.w) + self.b

    tf.saved_model.save(M(), os.path.join(gen, "model"))
    return ["model/variables/variables"], {}


@fixture("variant")
def make_variant(gen):
    tf = _tf()
    ds = tf.data.Dataset.range(10).map(lambda x: x * 2).batch(3)
    it = iter(ds)
    next(it)
    ck = tf.train.Checkpoint(it=it, step=tf.Variable(1, dtype=tf.int64))
    p = ck.write(os.path.join(gen, "iter"))
    return [os.path.basename(p)], {}


@fixture("ckpt_save")
def make_ckpt_save(gen):
    tf = _tf()
    v = tf.Variable([[1, 2], [3, 4]], dtype=tf.int32)
    ck = tf.train.Checkpoint(v=v)
    paths = []
    for _ in range(3):
        v.assign_add([[1, 1], [1, 1]])
        paths.append(ck.save(os.path.join(gen, "ckpt")))
    return [os.path.basename(p) for p in paths], {}


@fixture("bigendian")
def make_bigendian(gen):
    """A big-endian bundle (header endianness BIG), as a big-endian host's TF writes it.

    TF cannot be made to write one on a little-endian host, so ckptool's writer lays it
    out (element bytes swapped, CRC32C over the stored bytes, FORMAT.md §4.6) and TF
    reads it back, byte-swapping, for expected.json: TF is the judge of the layout.
    """
    import numpy as np
    from crc32c import crc32c

    from ckptool.format import bundle, dtypes
    from ckptool.format.bundle import Entry
    from ckptool.format.coding import mask_crc
    from ckptool.ops.write.writer import BundleWriter

    rng = np.random.default_rng(99)
    names = ["float32", "float64", "float16", "bfloat16", "int16", "int32", "int64", "uint16", "uint32",
             "uint64", "int8", "uint8", "bool", "complex64", "complex128"]
    prefix = os.path.join(gen, "big")
    with BundleWriter(prefix, endianness=bundle.BIG) as w:
        for name in names:
            dt = dtypes.from_name(name)
            for label, shape in (("scalar", ()), ("matrix", (3, 4)), ("empty", (0, 2))):
                value = _values(name, shape, rng, specials=(label == "matrix"))
                stored = np.ascontiguousarray(value).byteswap().tobytes() if dt.itemsize > 1 else \
                    np.ascontiguousarray(value).tobytes()
                key = f"{name}/{label}".encode()
                e = Entry(key, dt, tuple(shape), 0, 0, len(stored), mask_crc(crc32c(stored)), ())
                w.add_raw(key, e, stored)
    return ["big"], {"note": "written by ckptool's BundleWriter (big-endian), values as TF reads them"}


# --------------------------------------------------------------------------- expected values


def _strip_v1_spec(base):
    # "v1sharded-?????-of-00003" -> "v1sharded"
    if "-?????-of-" in base:
        return base.split("-?????-of-")[0]
    return base


def _tensor_record(value):
    import numpy as np
    if isinstance(value, bytes):
        return {"numpy_dtype": "bytes", "shape": [],
                "strings_b64": [base64.b64encode(value).decode()]}
    arr = np.asarray(value)
    rec = {"numpy_dtype": str(arr.dtype), "shape": list(arr.shape)}
    if arr.dtype == object or arr.dtype.kind in "SU":
        rec["strings_b64"] = [base64.b64encode(bytes(x)).decode() for x in arr.ravel()]
    else:
        rec["sha256"] = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
    return rec


def expected_for(prefix):
    tf = _tf()
    reader = tf.train.load_checkpoint(prefix)
    lv = [[n, list(s)] for n, s in tf.train.list_variables(prefix)]
    dmap = {n: d.name for n, d in sorted(reader.get_variable_to_dtype_map().items())}
    tensors = {}
    for name, _ in lv:
        try:
            tensors[name] = _tensor_record(reader.get_tensor(name))
        except Exception as e:  # noqa: BLE001 - e.g. DT_VARIANT
            tensors[name] = {"error": f"{type(e).__name__}: {e}".strip()[:1000]}
    return {"list_variables": lv, "dtypes": dmap, "tensors": tensors}


def _rel(path, base):
    if path is None:
        return None
    ap = os.path.abspath(path)
    if ap == base or ap.startswith(base + os.sep):
        return os.path.relpath(ap, base)
    return path


def state_for(d):
    tf = _tf()
    d = os.path.abspath(d)
    st = tf.train.get_checkpoint_state(d)
    with open(os.path.join(d, "checkpoint")) as f:
        raw = f.read()
    out = {"checkpoint_file": raw}
    if st is None:
        out["state"] = None
    else:
        out["state"] = {
            "model_checkpoint_path": _rel(st.model_checkpoint_path, d),
            "all_model_checkpoint_paths": [_rel(p, d) for p in st.all_model_checkpoint_paths],
            "all_model_checkpoint_timestamps": list(st.all_model_checkpoint_timestamps),
            "last_preserved_timestamp": st.last_preserved_timestamp,
        }
    out["latest_checkpoint"] = _rel(tf.train.latest_checkpoint(d), d)
    out["paths_are_relative_to"] = "this directory, when inside it; else as recorded"
    return out


def _write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True, ensure_ascii=True)
        f.write("\n")


# --------------------------------------------------------------------------- driver


def run_one(name, out_root):
    fn, cpus, graph = FIXTURES[name]
    tf = _tf()
    if cpus:
        phys = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(phys[0], [tf.config.LogicalDeviceConfiguration()] * cpus)
    if graph:
        tf.compat.v1.disable_eager_execution()
    gen = os.path.join(GEN_ROOT, name)
    if os.path.exists(gen):
        shutil.rmtree(gen)
    os.makedirs(gen)
    prefixes, notes = fn(gen)
    dst = os.path.join(os.path.abspath(out_root), name)
    _copy_tree(gen, dst)
    shutil.rmtree(gen)  # recorded absolute paths now point nowhere: "moved directory"
    if graph:
        pass  # load_checkpoint works in graph mode too (pywrap CheckpointReader)
    checkpoints = {}
    for rel in prefixes:
        base = _strip_v1_spec(os.path.basename(rel))
        assert base not in checkpoints, f"{name}: two checkpoints named {base}"
        checkpoints[base] = expected_for(os.path.join(dst, rel))
    doc = {"fixture": name, "tf_version": tf.__version__, "checkpoints": checkpoints,
           "refused_dtypes": notes.get("refused_dtypes", [])}
    _write_json(os.path.join(dst, "expected.json"), doc)
    for root, _dirs, files in os.walk(dst):
        if "checkpoint" in files:
            _write_json(os.path.join(root, "state.json"), state_for(root))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output root (default tests/data)")
    ap.add_argument("--only", nargs="*", help="fixture names (default: all)")
    ap.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = args.only or list(FIXTURES)
    unknown = [n for n in names if n not in FIXTURES]
    if unknown:
        ap.error(f"unknown fixture(s) {unknown}; known: {sorted(FIXTURES)}")
    if args.in_process:
        assert len(names) == 1
        run_one(names[0], args.out)
        return 0
    os.makedirs(args.out, exist_ok=True)
    failed = []
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
               PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="")
    for n in names:
        print(f"[generate] {n}", file=sys.stderr, flush=True)
        rc = subprocess.call([sys.executable, os.path.abspath(__file__), "--in-process", "--only", n,
                              "--out", args.out], env=env)
        if rc:
            failed.append(n)
            print(f"[generate] {n} FAILED (exit {rc})", file=sys.stderr, flush=True)
    if failed:
        print(f"[generate] failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
