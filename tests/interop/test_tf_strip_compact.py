"""A stripped checkpoint is smaller on disk (dropping compacts by default) and TF restores it
exactly as it restores the linked layout (issue 32)."""

import json
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from click.testing import CliRunner  # noqa: E402

from ckptool.cli.main import cli  # noqa: E402


def _run(*argv):
    r = CliRunner().invoke(cli, [str(a) for a in argv], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def _data_bytes(prefix: str) -> int:
    d, base = os.path.split(prefix)
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d) if n.startswith(base + ".data-"))


def _keras(seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64), tf.keras.layers.Dense(8)])
    return model, tf.keras.optimizers.Adam(0.01)


def test_stripped_keras_checkpoint_is_smaller_and_restores_as_the_linked_one(tmp_path):
    model, opt = _keras(1)
    x = np.ones((3, 32), np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    src = tf.train.Checkpoint(model=model, optimizer=opt).write(str(tmp_path / "src" / "ckpt-1"))
    small, linked = str(tmp_path / "small" / "ckpt-1"), str(tmp_path / "linked" / "ckpt-1")
    plan = json.loads(_run("rewrite-names", src, small, "--strip-optimizer", "--json").stdout)
    assert not plan["fast_path"] and plan["dropped"]
    _run("rewrite-names", src, linked, "--strip-optimizer", "--link")
    # the optimizer's two slots per weight are gone from the disk, not only from the index
    assert _data_bytes(small) < 0.5 * _data_bytes(src)
    assert _data_bytes(linked) >= _data_bytes(src)
    assert tf.train.list_variables(small) == tf.train.list_variables(linked)
    for prefix in (small, linked):
        fresh, _ = _keras(2)
        tf.train.Checkpoint(model=fresh).read(prefix).assert_consumed()
        for a, b in zip(model.weights, fresh.weights):
            assert a.numpy().tobytes() == b.numpy().tobytes()


def test_stripped_tf1_checkpoint_is_smaller_and_load_checkpoint_reads_it(tmp_path):
    from ckptool import write

    src = str(tmp_path / "src" / "model.ckpt-9")
    w = np.random.default_rng(0).standard_normal((100, 10)).astype(np.float32)
    write(src, {"dense/kernel": w, "dense/kernel/Adam": np.zeros_like(w), "dense/kernel/Adam_1": np.ones_like(w),
                "beta1_power": np.float32(0.9), "global_step": np.int64(9)}, sync=False)
    dst = str(tmp_path / "dst" / "model.ckpt-9")
    _run("rewrite-names", src, dst, "--strip-optimizer")
    assert _data_bytes(dst) == w.nbytes + 8
    r = tf.train.load_checkpoint(dst)
    assert sorted(r.get_variable_to_shape_map()) == ["dense/kernel", "global_step"]
    assert r.get_tensor("dense/kernel").tobytes() == w.tobytes() and r.get_tensor("global_step") == 9
