"""Issue 52: a tf_keras SavedModel becomes a Keras 3 ``.keras`` file (``convert model_dir/
model.keras``, no template), which Keras 3 (TF backend here; torch in tests/kerastorch) loads with no
custom object and which predicts what tf_keras predicted. The models are written at test time by
tests/tf_fixtures/generate_keras_whole.py (keras.applications among them); tf_keras is the oracle.
"""

import json
import os
import sys
import zipfile

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("h5py")
keras = pytest.importorskip("keras")
tf_keras = pytest.importorskip("tf_keras")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tf_fixtures"))
import generate_keras_whole as gen  # noqa: E402

from ckptool.api import convert  # noqa: E402
from clirun import completed  # noqa: E402

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each model saved by tf_keras (its whole SavedModel directory), made once."""
    root = tmp_path_factory.mktemp("whole")
    return lambda name: gen.save(name, str(root)) if not (root / name).exists() else str(root / name)


def _io(d):
    with np.load(os.path.join(d, "io.npz")) as z:
        xs = [z[f"x{i}"] for i in range(sum(k.startswith("x") for k in z.files))]
        ys = [z[f"y{i}"] for i in range(sum(k.startswith("y") for k in z.files))]
    return xs, ys


def _predict(model, xs):
    got = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    return [np.asarray(g) for g in (got if isinstance(got, (list, tuple)) else [got])]


def _same(got, want):
    """Equal within round-off at the outputs' own scale (a fresh MobileNetV3's logits are ~1e-10)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * min(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("name", gen.MODELS + gen.LARGE)
def test_keras3_loads_the_converted_savedmodel_and_predicts_the_same(saved, name, tmp_path):
    src = saved(name)
    dst = str(tmp_path / f"{name}.keras")
    r = completed("convert", src, dst)
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(dst) as z:
        assert z.namelist() == ["metadata.json", "config.json", "model.weights.h5"]
        config = json.loads(z.read("config.json"))
    assert "compile_config" not in config  # the optimizer only with --with-optimizer
    model = keras.saving.load_model(dst)  # no custom_objects
    xs, ys = _io(src)
    _same(_predict(model, xs), ys)


def test_with_optimizer_training_resumes_as_in_tf_keras(tmp_path):
    """The compile config and Adam's state go across: one more step in Keras 3 gives the weights
    one more step of the tf_keras model gives."""
    k2, xs = gen.build("shared")  # one step taken
    src = str(tmp_path / "sm")
    k2.save(src)
    dst = str(tmp_path / "shared.keras")
    res = convert(src, dst, with_optimizer=True)
    assert res.mapping.optimizer_pairs > 0
    k3 = keras.saving.load_model(dst)
    assert int(k3.optimizer.iterations.numpy()) == int(k2.optimizer.iterations.numpy()) == 1
    assert k3.optimizer.get_config()["learning_rate"] == pytest.approx(0.001)
    target = [np.ones_like(y) for y in _predict(k2, xs)]
    k2.train_on_batch(xs, target)
    k3.train_on_batch(xs, target)
    for a, b in zip(k2.get_weights(), k3.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_weights_h5_of_wrappers_loads_into_the_translated_model(saved, tmp_path):
    """``.weights.h5`` output (no template) for TimeDistributed, Bidirectional with its own backward
    layer and stacked cells, refused before this issue; the .keras's config builds the model."""
    src = saved("recurrent")
    whole, weights = str(tmp_path / "r.keras"), str(tmp_path / "r.weights.h5")
    assert completed("convert", src, whole).returncode == 0
    r = completed("convert", src, weights, "--skip-optimizer")
    assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(whole) as z:
        model = keras.models.model_from_json(z.read("config.json").decode())
    model.load_weights(weights)
    xs, ys = _io(src)
    _same(_predict(model, xs), ys)


def test_tf_checkpoint_with_template_config(tmp_path):
    """A TF-format checkpoint (save_weights) and the model's to_json() take the same path."""
    model, xs = gen.build("recurrent")
    model.save_weights(str(tmp_path / "ckpt"))
    (tmp_path / "model.json").write_text(model.to_json())
    dst = str(tmp_path / "m.keras")
    r = completed("convert", tmp_path / "ckpt", dst, "--template-config", tmp_path / "model.json")
    assert r.returncode == 0, r.stderr
    _same(_predict(keras.saving.load_model(dst), xs), _predict(model, xs))


def _save(model, d):
    model.save(str(d))
    return str(d)


def test_a_custom_layer_is_refused_naming_class_and_layer(tmp_path):
    class Scale(tf_keras.layers.Layer):
        def call(self, x):
            return x * 2.0

    inp = tf_keras.Input((3,))
    src = _save(tf_keras.Model(inp, Scale(name="twice")(tf_keras.layers.Dense(2)(inp))), tmp_path / "sm")
    r = completed("convert", src, tmp_path / "m.keras")
    assert r.returncode == 1 and not (tmp_path / "m.keras").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'twice'" in lines[0] and "Scale" in lines[0] and "custom" in lines[0], r.stderr


def test_what_keras3_cannot_express_is_refused_with_the_reason(tmp_path):
    inp = tf_keras.Input((3,))
    x = tf_keras.layers.Lambda(lambda t: t + 1.0, name="plus_one")(inp)
    src = _save(tf_keras.Model(inp, x), tmp_path / "lam")
    r = completed("convert", src, tmp_path / "a.keras")
    assert r.returncode == 1 and "'plus_one'" in r.stderr and "bytecode" in r.stderr, r.stderr
    src = _save(_convlstm(), tmp_path / "hs")  # recurrent_activation='hard_sigmoid' by default
    r = completed("convert", src, tmp_path / "b.keras")
    assert r.returncode == 1 and "hard_sigmoid" in r.stderr, r.stderr


def test_a_tf_function_without_a_keras3_operation_is_refused_naming_it(tmp_path):
    import tensorflow as tf

    inp = tf_keras.Input((3,))
    src = _save(tf_keras.Model(inp, tf.math.cumsum(inp * 2.0, axis=1)), tmp_path / "cs")
    r = completed("convert", src, tmp_path / "cs.keras")
    assert r.returncode == 1 and not (tmp_path / "cs.keras").exists()
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "'tf.math.cumsum'" in lines[0] and "TFOpLambda" in lines[0], r.stderr


def _convlstm():
    inp = tf_keras.Input((2, 5, 3))
    return tf_keras.Model(inp, tf_keras.layers.ConvLSTM1D(2, 3)(inp))


def test_lookup_vocabulary_from_assets_or_refused(tmp_path):
    """A vocabulary file is carried from the SavedModel's assets into the .keras file; the always-
    empty token_counts table is left out by name (no --allow-unused); a list vocabulary without the
    saved_model.pb that holds it is refused, never written empty."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\ncat\nsat\nmat\n")
    inp = tf_keras.Input((1,), dtype="string")
    tv = tf_keras.layers.TextVectorization(vocabulary=str(vocab), output_sequence_length=4)
    model = tf_keras.Model(inp, tf_keras.layers.Dense(2)(tf_keras.layers.Embedding(8, 3)(tv(inp))))
    src = _save(model, tmp_path / "tv")
    assert os.listdir(os.path.join(src, "assets")) == ["vocab.txt"]
    dst = str(tmp_path / "tv.keras")
    res = convert(src, dst)
    assert any("vocab.txt" in n for n in res.mapping.notes)
    k3 = keras.saving.load_model(dst)
    import tensorflow as tf

    x = tf.constant([["the cat sat"], ["a mat"]])
    assert k3.layers[1].get_vocabulary() == ["", "[UNK]", "the", "cat", "sat", "mat"]
    np.testing.assert_allclose(np.asarray(k3(x)), np.asarray(model(x)), atol=1e-6)
    r = completed("convert", src, tmp_path / "tv.weights.h5", "--skip-optimizer")
    assert r.returncode == 0, r.stderr
    inp = tf_keras.Input((1,), dtype="string")
    lk = tf_keras.layers.StringLookup(vocabulary=["a", "b"])
    src = _save(tf_keras.Model(inp, tf_keras.layers.Embedding(4, 2)(lk(inp))), tmp_path / "lk")
    os.remove(os.path.join(src, "saved_model.pb"))  # where a list vocabulary lives (test_tf_keras_whole_state)
    r = completed("convert", src, tmp_path / "lk.keras")
    assert r.returncode == 1 and "vocabulary of 3 tokens" in r.stderr and "empty" in r.stderr, r.stderr


def test_with_optimizer_mixed_precision_keeps_the_loss_scale(tmp_path):
    """tf_keras's LossScaleOptimizerV3 becomes Keras 3's LossScaleOptimizer, its state loaded."""
    src = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras_whole", "mixed")
    dst = str(tmp_path / "mixed.keras")
    convert(src, dst, with_optimizer=True)
    k3 = keras.saving.load_model(dst)
    assert type(k3.optimizer).__name__ == "LossScaleOptimizer"
    assert int(k3.optimizer.iterations.numpy()) == 1  # loaded, not a fresh optimizer
    xs, ys = _io(src)
    k3.train_on_batch(xs[0], ys[0])
    assert int(k3.optimizer.iterations.numpy()) == 2


def test_template_path_leaves_token_counts_out_by_name(tmp_path):
    """--template: the always-empty token_counts table needs no --allow-unused, and the note says
    that the .keras keeps its template's vocabulary."""
    inp = tf_keras.Input((1,), dtype="string")
    tv = tf_keras.layers.TextVectorization(output_sequence_length=3)
    tv.adapt(["the cat sat", "the cat", "the"])  # adapt() makes the token_counts table
    vocab = tv.get_vocabulary()[2:]
    k2 = tf_keras.Model(inp, tf_keras.layers.Dense(2)(tf_keras.layers.Embedding(5, 3)(tv(inp))))
    k2.save_weights(str(tmp_path / "ckpt"))
    inp3 = keras.Input((1,), dtype="string")
    tv3 = keras.layers.TextVectorization(vocabulary=vocab, output_sequence_length=3)
    k3 = keras.Model(inp3, keras.layers.Dense(2)(keras.layers.Embedding(5, 3)(tv3(inp3))))
    k3.save(str(tmp_path / "template.keras"))
    res = convert(str(tmp_path / "ckpt"), str(tmp_path / "out.keras"), template=str(tmp_path / "template.keras"))
    assert any("token_counts" in n for n in res.mapping.notes)
    assert any("template's assets" in n for n in res.mapping.notes)
    import tensorflow as tf

    x = tf.constant([["the cat"], ["sat on"]])
    got = keras.saving.load_model(str(tmp_path / "out.keras"))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(k2(x)), atol=1e-6)


@pytest.mark.parametrize("name", gen.MODELS + ("mobilenet_v2",))
def test_tf_keras_h5_model_becomes_a_keras3_model_predicting_the_same(name, tmp_path):
    """model.save("model.h5") (a tf_keras whole-model HDF5 file) takes the SavedModel's path: the
    .keras loads in Keras 3 and predicts what tf_keras predicted; a .weights.h5 DST loads into it."""
    k2, xs = gen.build(name)
    want = _predict(k2, xs)
    src = str(tmp_path / "model.h5")
    k2.save(src)
    dst = str(tmp_path / f"{name}.keras")
    r = completed("convert", src, dst)
    assert r.returncode == 0, r.stderr
    model = keras.saving.load_model(dst)
    _same(_predict(model, xs), want)
    wdst = str(tmp_path / "w.weights.h5")
    assert completed("convert", src, wdst).returncode == 0
    fresh = keras.saving.load_model(dst)
    for w in fresh.weights:
        w.assign(np.zeros(w.shape, w.dtype))
    fresh.load_weights(wdst)
    _same(_predict(fresh, xs), want)
