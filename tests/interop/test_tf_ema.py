"""`convert --ema` against TF itself (issue 43): TF1 ExponentialMovingAverage and tf_keras
``use_ema`` checkpoints written here by TF, converted by ckptool, restored by TF: every variable
holds its shadow's value (``ema.average(var)``, ``optimizer._model_variables_moving_average``),
with and without ``--strip-optimizer``; Keras 3's ``.keras`` averages equal Keras's own."""

import os
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tf_keras = pytest.importorskip("tf_keras")
pytest.importorskip("h5py")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tf_fixtures"))
import generate_ema as gen  # noqa: E402

from ckptool.ops.transform.convert.run import convert  # noqa: E402

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("ema"))
    expected = {}
    gen.tf1(out, expected)
    gen.tf_keras_files(out, expected)
    gen.keras3_file(out, expected)
    return out, expected


def _restore_tf1(prefix, names):
    """Rebuild the TF1 graph, restore ``prefix`` with a Saver over ``names`` (None: all)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (None, 4))
        tf.compat.v1.get_variable("emb", (6, 4), partitioner=tf.compat.v1.fixed_size_partitioner(2))
        gen._dense(gen._dense(x, 4, 5, "d1"), 5, 2, "d2")
        tf.compat.v1.train.get_or_create_global_step()
        var_list = None if names is None else [v for v in tf.compat.v1.global_variables()
                                               if v.op.name.split("/part_")[0] in names]
        saver = tf.compat.v1.train.Saver(var_list)
        with tf.compat.v1.Session() as s:
            saver.restore(s, prefix)
            out = {}
            for v in tf.compat.v1.trainable_variables():
                out.setdefault(v.op.name.split("/part_")[0], []).append(s.run(v))
    return {k: np.concatenate(v, 0) for k, v in out.items()}


def test_tf1_restores_the_shadows(written, tmp_path):
    out, expected = written
    want = {k[4:]: v for k, v in expected.items() if k.startswith("tf1/")}
    assert len(want) == 5
    convert(os.path.join(out, "tf1", "model.ckpt"), str(tmp_path / "ema"), ema=True)
    got = _restore_tf1(str(tmp_path / "ema"), None)
    for name, value in want.items():
        assert np.array_equal(got[name], value), name
    convert(os.path.join(out, "tf1", "model.ckpt"), str(tmp_path / "slim"), ema=True, strip_optimizer=True)
    assert sorted(n for n, _ in tf.train.list_variables(str(tmp_path / "slim"))) == sorted(want) + ["global_step"]
    got = _restore_tf1(str(tmp_path / "slim"), set(want) | {"global_step"})
    assert all(np.array_equal(got[n], v) for n, v in want.items())


def test_tf_keras_restores_the_averages(written, tmp_path):
    out, expected = written
    want = [expected[f"tf_keras/{i}"] for i in range(6)]
    for strip in (False, True):
        dst = str(tmp_path / f"ema{int(strip)}")
        convert(os.path.join(out, "tf_keras", "ckpt"), dst, ema=True, strip_optimizer=strip)
        m = gen.tf_keras_model(tf_keras)
        m.load_weights(dst).expect_partial()
        assert [v.numpy().tolist() for v in m.trainable_variables] == [w.tolist() for w in want]
        assert len(m.trainable_variables) == 6
    # tf.train.Checkpoint(model=, optimizer=): the model's variables read back as the averages
    dst = str(tmp_path / "ckpt")
    convert(os.path.join(out, "tf_keras_ckpt", "ckpt-1"), dst, ema=True, strip_optimizer=True)
    m = gen.tf_keras_model(tf_keras)
    m.build((None, 4))
    status = tf.train.Checkpoint(model=m).read(dst)
    status.expect_partial()  # the compiled model's optimizer was stripped from the file
    assert all(np.array_equal(v.numpy(), w) for v, w in zip(m.trainable_variables, want))


def test_keras3_averages_equal_keras_s_own(written, tmp_path):
    out, expected = written
    convert(os.path.join(out, "keras3.keras"), str(tmp_path / "k.npz"), ema=True, strip_optimizer=True)
    with np.load(tmp_path / "k.npz") as z:
        assert not any(n.startswith("optimizer/") for n in z.files)
        got = [z[n] for n in ("layers/dense/vars/0", "layers/dense/vars/1", "layers/batch_normalization/vars/0",
                              "layers/batch_normalization/vars/1", "layers/dense_1/vars/0", "layers/dense_1/vars/1")]
    assert all(np.array_equal(g, expected[f"keras3/{i}"]) for i, g in enumerate(got))
