"""Issue 52, the state beside the weights: a tf_keras whole-model ``.h5``'s optimizer (``convert
model.h5 model.keras --with-optimizer``), and lookup layers' vocabularies given as a list or learnt by
``adapt()``. tf_keras is the oracle: Keras 3 (TF backend; torch in tests/kerastorch) takes one more
training step and lands on the weights tf_keras's next step gives, or maps the same strings to the
same outputs."""

import os
import sys

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


def _optimizer(kind):
    o = tf_keras.optimizers
    return {"adam": lambda: o.Adam(0.01), "adam_amsgrad": lambda: o.Adam(0.01, amsgrad=True),
            "sgd_momentum": lambda: o.SGD(0.05, momentum=0.9, nesterov=True), "sgd": lambda: o.SGD(0.05),
            "rmsprop": lambda: o.RMSprop(0.01, momentum=0.5, centered=True), "adamw": lambda: o.AdamW(0.01),
            "adam_schedule": lambda: o.Adam(o.schedules.ExponentialDecay(0.01, 2, 0.5))}[kind]()


def _outputs(model, xs):
    y = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    return [np.ones_like(t) for t in y] if isinstance(y, list) else np.ones_like(y)


@pytest.mark.parametrize("name,kind,fmt", [
    ("shared", "adam", "h5"), ("nested", "adam_amsgrad", "h5"), ("recurrent", "sgd_momentum", "h5"),
    ("shared", "rmsprop", "h5"), ("attention", "adamw", "h5"), ("masking", "adam_schedule", "h5"), ("nested", "sgd", "h5"),
    ("masking", "adam_schedule", "sm")])
def test_h5_with_optimizer_training_resumes_as_in_tf_keras(tmp_path, name, kind, fmt):
    """tf_keras compiles, fits three steps, saves model.h5 (or, for a schedule, a SavedModel too);
    the .keras Keras 3 loads holds the same iterations, learning rate and slots: one more step gives
    tf_keras's next weights."""
    k2, xs = gen._models()[name]()
    k2.compile(optimizer=_optimizer(kind), loss="mse")
    x = xs if len(xs) > 1 else xs[0]
    y = _outputs(k2, xs)
    k2.fit(x, y, epochs=3, batch_size=len(xs[0]), verbose=0)
    src, dst = str(tmp_path / ("model.h5" if fmt == "h5" else "sm")), str(tmp_path / "m.keras")
    k2.save(src)
    r = completed("convert", src, dst, "--with-optimizer")
    assert r.returncode == 0, r.stderr
    k3 = keras.saving.load_model(dst)
    assert type(k3.optimizer).__name__ == type(k2.optimizer).__name__
    assert int(k3.optimizer.iterations.numpy()) == int(k2.optimizer.iterations.numpy()) == 3
    if kind.endswith("schedule"):  # tf_keras's learning_rate says the last step's rate, Keras 3's the next one's
        assert float(k3.optimizer.learning_rate.numpy()) == pytest.approx(0.01 * 0.5 ** 1.5)
    else:
        assert float(k3.optimizer.learning_rate.numpy()) == pytest.approx(float(k2.optimizer.learning_rate.numpy()))
    k2.train_on_batch(x, y)
    k3.train_on_batch(x, y)
    for a, b in zip(k2.get_weights(), k3.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_h5_without_with_optimizer_starts_fresh_and_a_legacy_optimizer_is_refused(tmp_path):
    k2, xs = gen._models()["shared"]()
    k2.compile(optimizer=tf_keras.optimizers.legacy.Adam(0.01), loss="mse")
    k2.train_on_batch(xs, _outputs(k2, xs))
    src = str(tmp_path / "legacy.h5")
    k2.save(src)
    r = completed("convert", src, tmp_path / "a.keras", "--with-optimizer")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "legacy" in r.stderr, r.stderr
    assert not (tmp_path / "a.keras").exists()
    res = convert(src, str(tmp_path / "b.keras"))
    assert any("optimizer_weights" in n and "--with-optimizer" in n for n in res.mapping.notes)


def _lookup_model():
    """TextVectorization learnt by adapt(), StringLookup given a list (a mask token, two OOV
    indices), StringLookup learnt by adapt() counting, IntegerLookup given a list: tf_keras writes
    none of these vocabularies outside saved_model.pb."""
    import tensorflow as tf

    L = tf_keras.layers
    text, words, ids = (tf_keras.Input((1,), dtype="string"), tf_keras.Input((2,), dtype="string"),
                        tf_keras.Input((2,), dtype="int64"))
    tv = L.TextVectorization(output_sequence_length=5, name="tv")
    tv.adapt(["The cat sat on the mat.", "the dog ran", "a cat, a dog"])
    sl = L.StringLookup(vocabulary=["b", "a", "\u00e9"], mask_token="[MASK]", num_oov_indices=2, name="sl")
    il = L.IntegerLookup(vocabulary=[7, -3, 9], name="il")
    counts = L.StringLookup(output_mode="count", name="counts")
    counts.adapt(["x", "y", "y", "z"])
    e = L.Embedding(12, 3, name="emb")
    x = L.Concatenate()([L.Flatten()(e(tv(text))), L.Flatten()(e(sl(words))), L.Flatten()(e(il(ids))),
                         counts(words)])
    model = tf_keras.Model([text, words, ids], L.Dense(2, name="out")(x))
    xs = [tf.constant([["The cat sat"], ["a DOG, a bird"]]), tf.constant([["a", "\u00e9"], ["zz", "[MASK]"]]),
          tf.constant([[7, 8], [9, -3]], dtype="int64")]
    return model, xs


def test_list_and_adapted_vocabularies_come_from_saved_model_pb(tmp_path):
    """Each vocabulary is read from the constants saved_model.pb initializes the layer's table from;
    Keras 3 maps the same strings and integers to the same outputs. Without saved_model.pb the
    conversion is refused in one line, nothing written."""
    import shutil

    k2, xs = _lookup_model()
    src = str(tmp_path / "sm")
    k2.save(src)
    dst = str(tmp_path / "lk.keras")
    res = convert(src, dst)
    assert sum("saved_model.pb" in n for n in res.mapping.notes) == 4, res.mapping.notes
    k3 = keras.saving.load_model(dst)
    for name in ("tv", "sl", "il", "counts"):
        assert k3.get_layer(name).get_vocabulary() == k2.get_layer(name).get_vocabulary(), name
    np.testing.assert_allclose(np.asarray(k3(xs)), np.asarray(k2(xs)), rtol=1e-6, atol=1e-6)
    os.remove(os.path.join(src, "saved_model.pb"))
    r = completed("convert", src, tmp_path / "gone.keras")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "learnt by adapt()" in r.stderr, r.stderr
    assert "saved_model.pb" in r.stderr and not (tmp_path / "gone.keras").exists()
    shutil.rmtree(src)


def test_a_tf_idf_vocabulary_is_refused_with_the_reason(tmp_path):
    inp = tf_keras.Input((1,), dtype="string")
    tv = tf_keras.layers.TextVectorization(output_mode="tf_idf", name="tfidf")
    tv.adapt(["a b", "b c"])
    src = str(tmp_path / "sm")
    tf_keras.Model(inp, tf_keras.layers.Dense(2)(tv(inp))).save(src)
    r = completed("convert", src, tmp_path / "t.keras")
    assert r.returncode == 1 and "idf_weights" in r.stderr and r.stderr.count("\n") == 1, r.stderr


_TORCH_SIDE = """
import json, sys
import numpy as np
import keras
import tensorflow as tf

assert keras.backend.backend() == "torch"
ints = keras.saving.load_model(sys.argv[1])
out = {"ints": np.asarray(ints.predict(np.array(json.loads(sys.argv[3])), verbose=0)).tolist()}
strings = keras.saving.load_model(sys.argv[2])
for name, x in json.loads(sys.argv[4]).items():
    out[name] = np.asarray(strings.get_layer(name)(tf.constant(x))).tolist()
print(json.dumps(out))
"""


def test_torch_backend_takes_the_vocabularies_where_keras3_takes_lookups_on_torch(tmp_path):
    """KERAS_BACKEND=torch (TensorFlow installed: Keras 3's lookup layers need it on any backend): an
    integer model with IntegerLookup layers (a list, adapt()) predicts what tf_keras does; the string
    lookup layers map strings as tf_keras's do when called on them (a Functional model with string
    inputs is refused by Keras 3 on torch: 'Invalid dtype')."""
    import json
    import subprocess

    pytest.importorskip("torch")
    L = tf_keras.layers
    ids = tf_keras.Input((2,), dtype="int64")
    ia = L.IntegerLookup(name="ia")
    ia.adapt(np.array([4, 4, 5, 6]))
    x = L.Concatenate()([L.Flatten()(L.Embedding(6, 3)(L.IntegerLookup(vocabulary=[7, -3, 9])(ids))),
                         L.Flatten()(L.Embedding(6, 3)(ia(ids)))])
    k2i = tf_keras.Model(ids, L.Dense(2)(x))
    k2i.save(str(tmp_path / "ints"))
    k2s, _ = _lookup_model()
    k2s.save(str(tmp_path / "strings"))
    for name in ("ints", "strings"):
        convert(str(tmp_path / name), str(tmp_path / f"{name}.keras"))
    xi = [[7, 4], [9, -3]]
    xs = {"tv": [["The cat sat"], ["a DOG, a bird"]], "sl": [["a", "\u00e9"], ["zz", "[MASK]"]],
          "counts": [["x", "y"], ["w", "z"]]}
    env = dict(os.environ, KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", _TORCH_SIDE, str(tmp_path / "ints.keras"), str(tmp_path / "strings.keras"),
                        json.dumps(xi), json.dumps(xs)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    import tensorflow as tf

    np.testing.assert_allclose(got["ints"], np.asarray(k2i(np.array(xi))), rtol=1e-6, atol=1e-6)
    for name, x in xs.items():
        np.testing.assert_array_equal(got[name], np.asarray(k2s.get_layer(name)(tf.constant(x))), err_msg=name)
