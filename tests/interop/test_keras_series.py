"""``prune --series`` on what Keras really writes (issue 43): a Keras 3 training run with
``ModelCheckpoint`` (``.keras`` and ``.weights.h5``) and ``CSVLogger``, pruned by count and by the
best ``val_loss`` (from the file names and from the CSV), Keras loading every file kept; tf_keras's
TF-format prefix series (``save_weights_only``) and its ``.h5`` series, tf_keras loading what is
kept and TF's ``latest_checkpoint`` still answering."""

import os
import shutil

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("h5py")
keras = pytest.importorskip("keras")
tf_keras = pytest.importorskip("tf_keras")

from clirun import completed  # noqa: E402

pytestmark = pytest.mark.interop

EPOCHS = 6
KERAS_T = "model-{epoch:02d}-{val_loss:.4f}.keras"
WEIGHTS_T = "w-{epoch:02d}.weights.h5"


def _data(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + rng.normal(size=(64, 1)) * 0.5).astype("float32")
    return x, y


@pytest.fixture(scope="module")
def keras3_run(tmp_path_factory):
    """One Keras 3 training run: a .keras series, a .weights.h5 series, a CSVLogger file."""
    root = tmp_path_factory.mktemp("keras3run")
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    x, y = _data()
    (root / "full").mkdir()
    (root / "weights").mkdir()
    hist = model.fit(x, y, validation_split=0.25, epochs=EPOCHS, batch_size=8, verbose=0, callbacks=[
        keras.callbacks.ModelCheckpoint(str(root / "full" / KERAS_T)),
        keras.callbacks.ModelCheckpoint(str(root / "weights" / WEIGHTS_T), save_weights_only=True),
        keras.callbacks.CSVLogger(str(root / "weights" / "log.csv"))])
    return root, [float(v) for v in hist.history["val_loss"]]


def _files(d):
    """What is in ``d`` but ckptool's own lock file."""
    return sorted(n for n in os.listdir(d) if n != ".ckptool.lock")


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _best_epoch(values, key=lambda v: v):
    """ModelCheckpoint's 1-based epoch of the lowest value; of equal ones the newer (ckptool's rule)."""
    scored = [(key(v), -i) for i, v in enumerate(values)]
    return -min(scored)[1] + 1


def test_the_run_wrote_one_file_per_epoch(keras3_run):
    root, val = keras3_run
    full = sorted(os.listdir(root / "full"))
    assert full == [KERAS_T.format(epoch=e + 1, val_loss=v) for e, v in enumerate(val)]
    assert len([n for n in os.listdir(root / "weights") if n.endswith(".weights.h5")]) == EPOCHS


def test_pruned_by_count_keras_loads_what_is_kept(keras3_run, tmp_path):
    root, val = keras3_run
    d = _copy(root / "full", tmp_path / "full")
    r = completed("prune", d, "--series", KERAS_T, "--max-to-keep", 2)
    assert r.returncode == 0, r.stderr
    kept = _files(d)
    assert kept == [KERAS_T.format(epoch=e, val_loss=val[e - 1]) for e in (EPOCHS - 1, EPOCHS)]
    for n in kept:
        m = keras.models.load_model(str(d / n))
        assert m.predict(np.ones((1, 4), "float32"), verbose=0).shape == (1, 1)
    assert "deleted" in r.stdout and r.stdout.count("deleted") == EPOCHS - 2


def test_pruned_by_best_from_the_names_and_from_the_csv(keras3_run, tmp_path):
    root, val = keras3_run
    d = _copy(root / "full", tmp_path / "full")
    r = completed("prune", d, "--series", KERAS_T, "--max-to-keep", 1, "--keep-best", 1, "--metric", "val_loss")
    assert r.returncode == 0, r.stderr
    best = _best_epoch(val, key=lambda v: float(format(v, ".4f")))  # the names hold val_loss to 4 places
    want = {KERAS_T.format(epoch=e, val_loss=val[e - 1]) for e in {best, EPOCHS}}
    assert set(_files(d)) == want
    for n in want:
        keras.models.load_model(str(d / n))
    # the .weights.h5 series, the metric from the CSVLogger file (epochs from 0 there), full precision
    w = _copy(root / "weights", tmp_path / "weights")
    r = completed("prune", w, "--series", WEIGHTS_T, "--max-to-keep", 1, "--keep-best", 1, "--metric", "val_loss",
                  "--metrics", w / "log.csv")
    assert r.returncode == 0, r.stderr
    best = _best_epoch(val)
    want = {WEIGHTS_T.format(epoch=e) for e in {best, EPOCHS}}
    assert set(_files(w)) == want | {"log.csv"}
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
    for n in want:
        model.load_weights(str(w / n))


def test_a_save_in_progress_is_not_counted_nor_touched(keras3_run, tmp_path):
    """A .weights.h5 Keras is still writing (h5py holds it open, as save_weights does): not whole."""
    import h5py

    root, _ = keras3_run
    w = _copy(root / "weights", tmp_path / "weights")
    f = h5py.File(w / WEIGHTS_T.format(epoch=EPOCHS + 1), "w")
    try:
        f["layers/dense/vars/0"] = np.zeros((4, 8), "float32")
        f.flush()
        r = completed("prune", w, "--series", WEIGHTS_T, "--max-to-keep", 2, "-v")  # -v: the kept rows too
        assert r.returncode == 0, r.stderr
    finally:
        f.close()
    left = sorted(n for n in os.listdir(w) if n.endswith(".weights.h5"))
    assert left == [WEIGHTS_T.format(epoch=e) for e in (EPOCHS - 1, EPOCHS, EPOCHS + 1)]
    assert "in progress" in r.stdout


def _tf_keras_model():
    m = tf_keras.Sequential([tf_keras.layers.Dense(8, activation="relu", input_shape=(4,)), tf_keras.layers.Dense(1)])
    m.compile(optimizer=tf_keras.optimizers.SGD(0.05), loss="mse")
    return m


def test_tf_keras_tf_format_and_h5_series(tmp_path):
    import tensorflow as tf

    x, y = _data(2)
    m = _tf_keras_model()
    (tmp_path / "tf").mkdir()
    (tmp_path / "h5").mkdir()
    m.fit(x, y, epochs=4, batch_size=16, verbose=0, callbacks=[
        tf_keras.callbacks.ModelCheckpoint(str(tmp_path / "tf" / "w-{epoch:02d}"), save_weights_only=True),
        tf_keras.callbacks.ModelCheckpoint(str(tmp_path / "h5" / "m-{epoch:02d}.h5"), save_weights_only=True)])
    state = (tmp_path / "tf" / "checkpoint").read_bytes()
    r = completed("prune", tmp_path / "tf", "--series", "w-{epoch:02d}", "--max-to-keep", 2)
    assert r.returncode == 0, r.stderr
    names = _files(tmp_path / "tf")
    assert names == ["checkpoint", "w-03.data-00000-of-00001", "w-03.index", "w-04.data-00000-of-00001",
                     "w-04.index"]
    assert (tmp_path / "tf" / "checkpoint").read_bytes() == state  # tf_keras's own state file, untouched
    assert tf.train.latest_checkpoint(str(tmp_path / "tf")).endswith("w-04")
    for p in ("w-03", "w-04"):
        _tf_keras_model().load_weights(str(tmp_path / "tf" / p)).expect_partial()
    r = completed("prune", tmp_path / "h5", "--series", "m-{epoch:02d}.h5", "--max-to-keep", 1)
    assert r.returncode == 0, r.stderr
    assert _files(tmp_path / "h5") == ["m-04.h5"]
    _tf_keras_model().load_weights(str(tmp_path / "h5" / "m-04.h5"))


def test_without_series_the_directory_says_what_it_holds(keras3_run):
    root, _ = keras3_run
    r = completed("prune", root / "full", "--dry-run")
    assert r.returncode == 1
    assert "--series 'model-{epoch:02d}-{metric:.4f}.keras'" in r.stderr
    r = completed("inspect", root / "weights")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("weights.h5") >= EPOCHS and "latest" in r.stdout
    r = completed("verify", root / "full")
    assert r.returncode == 0 and r.stdout.count("ok ") == EPOCHS, r.stdout + r.stderr
