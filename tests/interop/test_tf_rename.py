"""rewrite-names against TensorFlow: TF reads renamed checkpoints, restores object-based ones
under their new structure, and init_from_checkpoint-style maps agree with TF's own."""

import json
import pathlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from click.testing import CliRunner  # noqa: E402

from ckptool.cli.main import cli  # noqa: E402

DATA = pathlib.Path(__file__).parent.parent / "data"
TF1 = str(DATA / "tf1_saver" / "model.ckpt-30")


def _run(*argv):
    r = CliRunner().invoke(cli, list(argv), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def test_tf1_scope_rename_read_by_load_checkpoint(tmp_path):
    dst = str(tmp_path / "renamed")
    _run("rewrite-names", TF1, dst, "--rule", "dense/=model/dense/", "--rule", "global_step=step")
    src, out = tf.train.load_checkpoint(TF1), tf.train.load_checkpoint(dst)
    assert sorted(out.get_variable_to_shape_map()) == ["embedding/table", "model/dense/bias",
                                                       "model/dense/kernel", "step"]
    for old, new in [("dense/kernel", "model/dense/kernel"), ("dense/bias", "model/dense/bias"),
                     ("global_step", "step"), ("embedding/table", "embedding/table")]:
        a, b = src.get_tensor(old), out.get_tensor(new)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), new


def test_assignment_map_agrees_with_init_from_checkpoint(tmp_path):
    """{'dense/': 'net/dense/', '/': 'net/'} through TF's init_from_checkpoint on a TF1 graph,
    and through rewrite-names then a plain restore: the same values."""
    amap = {"dense/": "net/dense/", "embedding/table": "net/emb"}
    (tmp_path / "map.json").write_text(json.dumps(amap))
    dst = str(tmp_path / "mapped")
    _run("rewrite-names", TF1, dst, "--map", str(tmp_path / "map.json"), "--drop", "global_step")
    g = tf.Graph()
    with g.as_default():
        with tf.compat.v1.variable_scope("net"):
            with tf.compat.v1.variable_scope("dense"):
                k = tf.compat.v1.get_variable("kernel", shape=[4, 3])
                b = tf.compat.v1.get_variable("bias", shape=[3])
            e = tf.compat.v1.get_variable("emb", shape=[5, 2], dtype=tf.float64)
        tf.compat.v1.train.init_from_checkpoint(TF1, amap)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            theirs = dict(zip(["net/dense/kernel", "net/dense/bias", "net/emb"], s.run([k, b, e])))
    ours = tf.train.load_checkpoint(dst)
    assert sorted(ours.get_variable_to_shape_map()) == sorted(theirs)
    for name, want in theirs.items():
        assert ours.get_tensor(name).tobytes() == want.tobytes(), name


def _module_checkpoint(tmp_path):
    m = tf.Module()
    m.enc = tf.Module()
    m.enc.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    m.enc.b = tf.Variable(np.float32([1.5, -2.0, 3.25]))
    m.head = tf.Variable(np.int64(7))
    prefix = tf.train.Checkpoint(model=m).write(str(tmp_path / "src" / "ckpt-1"))
    return m, prefix


def test_object_based_rename_restores_under_the_new_structure(tmp_path):
    m, src = _module_checkpoint(tmp_path)
    dst = str(tmp_path / "dst" / "ckpt-1")
    _run("rewrite-names", src, dst, "--rule", "model/enc/=model/encoder/")
    n = tf.Module()
    n.encoder = tf.Module()
    n.encoder.w = tf.Variable(tf.zeros((2, 3)))
    n.encoder.b = tf.Variable(tf.zeros(3))
    n.head = tf.Variable(np.int64(0))
    tf.train.Checkpoint(model=n).read(dst).assert_consumed()
    assert n.encoder.w.numpy().tobytes() == m.enc.w.numpy().tobytes()
    assert n.encoder.b.numpy().tobytes() == m.enc.b.numpy().tobytes()
    assert int(n.head.numpy()) == 7


def test_object_based_swap_of_two_objects(tmp_path):
    m, src = _module_checkpoint(tmp_path)
    dst = str(tmp_path / "dst" / "ckpt-1")
    _run("rewrite-names", src, dst, "--rule",
         "model/enc/w/.ATTRIBUTES/VARIABLE_VALUE=model/enc/b/.ATTRIBUTES/VARIABLE_VALUE",
         "--rule", "model/enc/b/.ATTRIBUTES/VARIABLE_VALUE=model/enc/w/.ATTRIBUTES/VARIABLE_VALUE")
    n = tf.Module()
    n.enc = tf.Module()
    n.enc.w = tf.Variable(tf.zeros(3))
    n.enc.b = tf.Variable(tf.zeros((2, 3)))
    n.head = tf.Variable(np.int64(0))
    tf.train.Checkpoint(model=n).read(dst).assert_consumed()
    assert n.enc.b.numpy().tobytes() == m.enc.w.numpy().tobytes()


def _keras(seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(6), tf.keras.layers.Dense(2)])
    opt = tf.keras.optimizers.Adam(0.01)
    return model, opt


def test_keras_strip_optimizer_keeps_the_model_restorable(tmp_path):
    """Keras 3 keys the model's weights under optimizer/_trainable_variables; stripping the
    optimizer must keep them (re-keyed under model/) and the model must restore alone."""
    model, opt = _keras(1)
    x = np.ones((3, 4), np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    src = tf.train.Checkpoint(model=model, optimizer=opt).write(str(tmp_path / "src" / "ckpt-1"))
    dst = str(tmp_path / "dst" / "ckpt-1")
    r = _run("rewrite-names", src, dst, "--strip-optimizer", "--json")
    plan = json.loads(r.stdout)
    assert plan["dropped"] and all(k.startswith("optimizer/") for k in plan["dropped"])
    names = [n for n, _ in tf.train.list_variables(dst)]
    assert not any(n.startswith("optimizer/") for n in names), names
    fresh, _ = _keras(2)
    tf.train.Checkpoint(model=fresh).read(dst).assert_consumed()
    for a, b in zip(model.weights, fresh.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def test_template_migration_from_tf1_to_tf2(tmp_path):
    """A TF1 name-based checkpoint into the structure a TF2 model wrote: restore() consumes all."""
    m = tf.Module()
    m.dense = tf.Module()
    m.dense.kernel = tf.Variable(tf.zeros((4, 3)))
    m.dense.bias = tf.Variable(tf.zeros(3))
    m.table = tf.Variable(tf.zeros((5, 2), tf.float64))
    template = tf.train.Checkpoint(model=m).save(str(tmp_path / "init" / "ckpt"))
    amap = {"dense/": "model/dense/", "embedding/table": "model/table"}
    (tmp_path / "map.json").write_text(json.dumps(amap))
    dst = str(tmp_path / "tf2" / "ckpt-1")
    _run("rewrite-names", TF1, dst, "--map", str(tmp_path / "map.json"), "--drop", "global_step",
         "--template", template, "--strict")
    n = tf.Module()
    n.dense = tf.Module()
    n.dense.kernel = tf.Variable(tf.ones((4, 3)))
    n.dense.bias = tf.Variable(tf.ones(3))
    n.table = tf.Variable(tf.ones((5, 2), tf.float64))
    tf.train.Checkpoint(model=n).restore(dst).assert_consumed()
    src = tf.train.load_checkpoint(TF1)
    assert n.dense.kernel.numpy().tobytes() == src.get_tensor("dense/kernel").tobytes()
    assert n.table.numpy().tobytes() == src.get_tensor("embedding/table").tobytes()


def test_partitioned_rename_read_by_tf(tmp_path):
    src = str(DATA / "partitioned" / "model.ckpt")
    dst = str(tmp_path / "p")
    _run("rewrite-names", src, dst, "--rule", "emb/=embedding/")
    a, b = tf.train.load_checkpoint(src), tf.train.load_checkpoint(dst)
    assert b.get_tensor("embedding/weights").tobytes() == a.get_tensor("emb/weights").tobytes()
    assert b.get_tensor("wide/kernel").tobytes() == a.get_tensor("wide/kernel").tobytes()


def _compiled_and_trained(seed):
    """As examples/make_example.py: a compiled Sequential trained a step with Adam (so the model
    also tracks its optimizer)."""
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    opt = tf.keras.optimizers.Adam(1e-2)
    model.compile(optimizer=opt, loss="mse")
    x = np.ones((16, 8), np.float32)
    model.fit(x, np.zeros((16, 2), np.float32), epochs=1, batch_size=16, verbose=0)
    return model, opt


def test_keras_strip_optimizer_keys_the_weights_as_tf_keys_the_model_alone(tmp_path):
    """The stripped checkpoint holds exactly the model's weights, under the keys TF writes for
    Checkpoint(model=model) without an optimizer, and TF restores it into a fresh model with
    every value consumed; by name alone (no graph) the weights are kept, not dropped."""
    model, opt = _compiled_and_trained(1)
    src = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=opt), str(tmp_path / "src"), 1).save()
    alone, _ = _keras_like(3)  # the same model, never compiled: no optimizer anywhere
    alone.set_weights(model.get_weights())
    want = tf.train.Checkpoint(model=alone).write(str(tmp_path / "alone" / "ckpt"))
    dst = str(tmp_path / "dst" / "ckpt-1")
    _run("rewrite-names", src, dst, "--strip-optimizer")
    keys = {n for n, _ in tf.train.list_variables(dst)}
    assert keys == {n for n, _ in tf.train.list_variables(want)} | {"save_counter/.ATTRIBUTES/VARIABLE_VALUE"}
    fresh, _ = _keras_like(2)
    ck = tf.train.Checkpoint(model=fresh)
    ck.restore(dst).assert_consumed()
    assert int(ck.save_counter) == 1
    for a, b in zip(model.weights, fresh.weights):
        assert a.numpy().tobytes() == b.numpy().tobytes()


def _keras_like(seed):
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                                tf.keras.layers.Dense(2)]), None
