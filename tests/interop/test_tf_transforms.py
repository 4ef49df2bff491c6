"""TensorFlow restores every transform's output: safetensors round trips, casts, averages,
BERT optimizer stripping (issue 19)."""

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from ckptool.ops.transform.average import average  # noqa: E402
from ckptool.ops.transform.convert.run import convert  # noqa: E402


def _cli(*argv, code=0):
    r = subprocess.run([sys.executable, "-m", "ckptool", *map(str, argv)], capture_output=True, text=True)
    assert r.returncode == code, r.stderr
    return r


def _bits(a):
    a = np.asarray(a)
    if a.dtype == object:
        return [bytes(x) for x in a.reshape(-1).tolist()], a.shape
    return a.dtype.name, a.shape, np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()


def _tf_all(path):
    r = tf.train.load_checkpoint(path)
    return {n: r.get_tensor(n) for n in r.get_variable_to_shape_map()}, r.get_variable_to_dtype_map()


def _keras(seed, dtype="float32"):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(6, dtype=dtype),
                                 tf.keras.layers.Dense(2, dtype=dtype)])
    return model, tf.keras.optimizers.Adam(0.01)


def _trained(tmp_path, seed=1, steps=1, name="src"):
    model, opt = _keras(seed)
    x = np.ones((3, 4), np.float32)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(x) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    prefix = tf.train.Checkpoint(model=model, optimizer=opt).write(str(tmp_path / name / "ckpt-1"))
    return model, opt, prefix


class Net(tf.Module):
    def __init__(self, dtype=tf.float32, big=False):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w = tf.Variable(tf.cast(rng.standard_normal((5, 3)).astype(np.float32), dtype))
        self.b = tf.Variable(tf.cast(np.float32([1e5 if big else 1, 0.5, -3]), dtype))
        self.step = tf.Variable(7, dtype=tf.int64)
        self.note = tf.Variable(b"hello")


# ---------------------------------------------------------------------------- safetensors


def test_keras_through_safetensors_restores_bit_for_bit(tmp_path):
    model, opt, src = _trained(tmp_path)
    st, back = str(tmp_path / "m.safetensors"), str(tmp_path / "back" / "ckpt-1")
    _cli("convert", src, st)
    with open(st, "rb") as f:
        raw = f.read()
    meta = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])["__metadata__"]
    assert meta["format"] == "tf" and "ckptool.object_graph" in meta
    _cli("convert", st, back)
    (want, wdt), (got, gdt) = _tf_all(src), _tf_all(back)
    assert sorted(want) == sorted(got) and wdt == gdt
    for n in want:
        assert _bits(got[n]) == _bits(want[n]), n
    fresh, fopt = _keras(5)
    fresh.build((None, 4))
    tf.train.Checkpoint(model=fresh, optimizer=fopt).read(back).assert_existing_objects_matched()
    for a, b in zip(model.weights, fresh.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_module_with_string_and_bf16_through_safetensors(tmp_path):
    m = Net(tf.bfloat16)
    src = tf.train.Checkpoint(model=m).write(str(tmp_path / "src" / "ckpt-1"))
    st, back = str(tmp_path / "m.safetensors"), str(tmp_path / "back" / "ckpt-1")
    convert(src, st)
    convert(st, back)
    n = Net(tf.bfloat16)
    n.w.assign(tf.zeros_like(n.w))
    n.note.assign(b"")
    tf.train.Checkpoint(model=n).read(back).assert_consumed()
    assert n.note.numpy() == b"hello" and _bits(n.w.numpy()) == _bits(m.w.numpy())


def test_names_short_way_back_restores_the_model(tmp_path):
    model, _, src = _trained(tmp_path)
    st, back = str(tmp_path / "s.safetensors"), str(tmp_path / "back" / "ckpt-1")
    _cli("convert", src, st, "--names", "short")
    _cli("convert", st, back)
    fresh, _ = _keras(9)
    tf.train.Checkpoint(model=fresh).read(back).assert_consumed()
    for a, b in zip(model.weights, fresh.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes()


# ---------------------------------------------------------------------------- casts


@pytest.mark.parametrize("to, tfdt, npdt", [("bfloat16", tf.bfloat16, ml_dtypes.bfloat16),
                                            ("float16", tf.float16, np.float16)])
def test_cast_equals_ml_dtypes_rounding_and_restores(tmp_path, to, tfdt, npdt):
    m = Net(tf.float32)
    src = tf.train.Checkpoint(model=m).write(str(tmp_path / "src" / "ckpt-1"))
    dst = str(tmp_path / "cast" / "ckpt-1")
    _cli("convert", src, dst, "--cast", f"float32={to}")
    got, dts = _tf_all(dst)
    want, _ = _tf_all(src)
    for n, v in want.items():
        v = np.asarray(v)
        if v.dtype == np.float32:
            assert dts[n] == tfdt and _bits(got[n]) == _bits(v.astype(npdt)), n
        else:
            assert _bits(got[n]) == _bits(v), n
    n = Net(tfdt)
    n.w.assign(tf.zeros_like(n.w))
    tf.train.Checkpoint(model=n).read(dst).assert_consumed()
    assert _bits(n.w.numpy()) == _bits(m.w.numpy().astype(npdt))


def test_cast_overflow_refused_nothing_written(tmp_path):
    m = Net(tf.float32, big=True)  # b holds 1e5, past float16's range
    src = tf.train.Checkpoint(model=m).write(str(tmp_path / "src" / "ckpt-1"))
    r = _cli("convert", src, tmp_path / "o" / "ckpt-1", "--cast", "float32=float16", code=1)
    assert "b/.ATTRIBUTES/VARIABLE_VALUE" in r.stderr and "1 values" in r.stderr
    assert not (tmp_path / "o").exists() or not os.listdir(tmp_path / "o")


# ---------------------------------------------------------------------------- averaging


def test_average_of_keras_checkpoints_restores_and_equals_float64_mean(tmp_path):
    runs = tmp_path / "runs"
    models = []
    for i in range(3):
        model, opt = _keras(1)
        x = np.full((3, 4), i + 1, np.float32)
        for _ in range(i + 1):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(x) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        tf.train.Checkpoint(model=model, optimizer=opt).write(str(runs / f"ckpt-{i + 1}"))
        models.append((model, opt))
    out = str(tmp_path / "avg" / "ckpt")
    _cli("average", runs, "--last", "3", "-o", out)
    fresh, fopt = _keras(7)
    fresh.build((None, 4))
    tf.train.Checkpoint(model=fresh, optimizer=fopt).read(out).assert_existing_objects_matched()
    for k, w in enumerate(fresh.weights):
        ref = (sum(m.weights[k].numpy().astype(np.float64) for m, _ in models) / 3).astype(np.float32)
        assert _bits(w.numpy()) == _bits(ref)
    newest_opt = models[-1][1]
    assert int(fopt.iterations.numpy()) == int(newest_opt.iterations.numpy()) == 3
    for a, b in zip(newest_opt.variables, fopt.variables):  # slots from the newest
        assert a.numpy().tobytes() == b.numpy().tobytes()
    stripped = str(tmp_path / "avg2" / "ckpt")
    _cli("average", runs, "--last", "2", "-o", stripped, "--strip-optimizer")
    names = [n for n, _ in tf.train.list_variables(stripped)]
    assert not any(n.startswith("optimizer/") for n in names), names
    fresh, _ = _keras(8)
    tf.train.Checkpoint(model=fresh).read(stripped).assert_consumed()
    for k, w in enumerate(fresh.weights):
        ref = (sum(m.weights[k].numpy().astype(np.float64) for m, _ in models[1:]) / 2).astype(np.float32)
        assert _bits(w.numpy()) == _bits(ref)


def _tf1_save(prefix, values):
    g = tf.Graph()
    with g.as_default():
        vs = [tf.compat.v1.get_variable(n, initializer=tf.constant(v)) for n, v in values.items()]
        saver = tf.compat.v1.train.Saver(vs)
        with tf.compat.v1.Session(graph=g) as s:
            s.run(tf.compat.v1.global_variables_initializer())
            return saver.save(s, prefix, write_meta_graph=False)


def _tf1_restore(prefix, shapes):
    g = tf.Graph()
    with g.as_default():
        vs = {n: tf.compat.v1.get_variable(n, shape=shape, dtype=dt) for n, (shape, dt) in shapes.items()}
        saver = tf.compat.v1.train.Saver(list(vs.values()))
        with tf.compat.v1.Session(graph=g) as s:
            saver.restore(s, prefix)
            return {n: s.run(v) for n, v in vs.items()}


def test_average_name_based_restores_into_a_tf1_graph(tmp_path):
    rng = np.random.default_rng(3)
    inputs = []
    for i in range(3):
        vals = {"dense/kernel": rng.standard_normal((4, 3)).astype(np.float32),
                "dense/bias": rng.standard_normal(3).astype(np.float64),
                "global_step": np.int64(10 * (i + 1))}
        inputs.append((_tf1_save(str(tmp_path / "runs" / f"model.ckpt-{10 * (i + 1)}"), vals), vals))
    out = str(tmp_path / "avg" / "model.ckpt")
    average([p for p, _ in inputs], out)
    shapes = {n: (v.shape, tf.as_dtype(v.dtype)) for n, v in inputs[0][1].items()}
    got = _tf1_restore(out, shapes)
    ref = (sum(v["dense/kernel"].astype(np.float64) for _, v in inputs) / 3).astype(np.float32)
    assert _bits(got["dense/kernel"]) == _bits(ref)
    from fractions import Fraction  # float64: the exact mean rounded once (compensated), not a float64 sum's

    exact = [float(sum(Fraction(float(v["dense/bias"][j])) for _, v in inputs) / 3) for j in range(3)]
    assert got["dense/bias"].tolist() == exact
    assert got["global_step"] == 30


# ---------------------------------------------------------------------------- BERT


def test_bert_checkpoint_stripped_to_its_weights(tmp_path):
    rng = np.random.default_rng(4)
    weights = {"bert/embeddings/word_embeddings": rng.standard_normal((20, 8)).astype(np.float32),
               "bert/encoder/layer_0/attention/self/query/kernel": rng.standard_normal((8, 8)).astype(np.float32),
               "bert/encoder/layer_0/attention/self/query/bias": rng.standard_normal(8).astype(np.float32),
               "cls/predictions/output_bias": rng.standard_normal(20).astype(np.float32)}
    vals = dict(weights)
    for n, v in weights.items():
        vals[n + "/adam_m"] = np.zeros_like(v)
        vals[n + "/adam_v"] = np.ones_like(v)
    vals["global_step"] = np.int64(1000)
    src = _tf1_save(str(tmp_path / "bert" / "model.ckpt-1000"), vals)
    dst = str(tmp_path / "small" / "model.ckpt-1000")
    r = _cli("rewrite-names", src, dst, "--strip-optimizer", "--dry-run")
    assert sum("(dropped)" in line for line in r.stdout.splitlines()) == 2 * len(weights)
    _cli("rewrite-names", src, dst, "--strip-optimizer")
    assert sorted(n for n, _ in tf.train.list_variables(dst)) == sorted([*weights, "global_step"])
    shapes = {n: (v.shape, tf.as_dtype(v.dtype)) for n, v in weights.items()}
    got = _tf1_restore(dst, shapes)
    for n, v in weights.items():
        assert _bits(got[n]) == _bits(v), n
