"""Issue 52, the keras-torch tier: tf_keras SavedModels (tests/data/keras_whole, written by
tests/tf_fixtures/generate_keras_whole.py) converted by ckptool to ``.keras`` files, which Keras 3
loads with ``KERAS_BACKEND=torch`` and no TensorFlow installed, and which predict what tf_keras
predicted (the ``io.npz`` beside each). Run in a venv with keras, h5py and torch==2.13.0 (no TF):

    KERAS_BACKEND=torch CKPTOOL_REQUIRE=kerastorch python -m pytest -q -m kerastorch tests/kerastorch

(CKPTOOL_REQUIRE=kerastorch: a skipped test fails the run, tests/conftest.py.)
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ckptool.api import convert

pytestmark = pytest.mark.kerastorch

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "keras_whole")
MODELS = ("sequential", "shared", "nested", "recurrent", "masking", "attention", "convolutional", "mixed", "ops",
          "einsum")


@pytest.fixture(scope="module")
def keras():
    if os.environ.get("KERAS_BACKEND") != "torch":
        pytest.skip("the keras-torch tier runs with KERAS_BACKEND=torch")
    k = pytest.importorskip("keras")
    pytest.importorskip("torch")
    assert k.backend.backend() == "torch"
    return k


def test_no_tensorflow_here(keras):
    """The point of the tier: Keras 3 loads these without TensorFlow."""
    import importlib.util

    assert importlib.util.find_spec("tensorflow") is None
    assert importlib.util.find_spec("tf_keras") is None


@pytest.mark.parametrize("name", MODELS)
def test_converted_savedmodel_predicts_as_tf_keras_did(keras, name, tmp_path):
    src = os.path.join(DATA, name)
    dst = str(tmp_path / f"{name}.keras")
    result = convert(src, dst)
    assert result.files == [dst]
    model = keras.saving.load_model(dst)
    io = np.load(os.path.join(src, "io.npz"))
    xs = [io[f"x{i}"] for i in range(sum(k.startswith("x") for k in io.files))]
    ys = [io[f"y{i}"] for i in range(sum(k.startswith("y") for k in io.files))]
    got = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(ys)
    for g, y in zip(got, ys):
        np.testing.assert_allclose(np.asarray(g), y, rtol=1e-4, atol=1e-5)


def test_with_optimizer_resumes_training(keras, tmp_path):
    """--with-optimizer: the compile config and the optimizer state load; one more step trains."""
    src = os.path.join(DATA, "shared")
    dst = str(tmp_path / "shared.keras")
    convert(src, dst, with_optimizer=True)
    model = keras.saving.load_model(dst)
    assert model.optimizer.__class__.__name__ == "Adam"
    assert int(model.optimizer.iterations.numpy()) == 1  # the fixture took one step
    assert any(float(np.abs(v.numpy()).max()) > 0 for v in model.optimizer.variables[2:])
    io = np.load(os.path.join(src, "io.npz"))
    before = [w.copy() for w in model.get_weights()]
    model.train_on_batch([io["x0"], io["x1"]], [np.zeros_like(io["y0"]), np.zeros_like(io["y1"])])
    assert int(model.optimizer.iterations.numpy()) == 2
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


H5_DATA = os.path.join(os.path.dirname(__file__), "..", "data", "keras_h5")


@pytest.mark.parametrize("name", ("sequential", "shared", "nested", "recurrent", "masking", "attention",
                                  "convolutional"))
def test_converted_h5_model_predicts_as_tf_keras_did(keras, name, tmp_path):
    """A tf_keras whole-model .h5 (tests/data/keras_h5, generate_keras_h5.py) takes the same path."""
    d = os.path.join(H5_DATA, name)
    dst = str(tmp_path / f"{name}.keras")
    assert convert(os.path.join(d, "model.h5"), dst).files == [dst]
    model = keras.saving.load_model(dst)
    io = np.load(os.path.join(d, "io.npz"))
    xs = [io[f"x{i}"] for i in range(sum(k.startswith("x") for k in io.files))]
    ys = [io[f"y{i}"] for i in range(sum(k.startswith("y") for k in io.files))]
    got = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(ys)
    for g, y in zip(got, ys):
        np.testing.assert_allclose(np.asarray(g), y, rtol=1e-4, atol=1e-5)


def test_h5_with_optimizer_loads_the_state_on_torch(keras, tmp_path):
    """A tf_keras .h5 with --with-optimizer: on torch Keras 3's optimizer holds the .h5's iteration,
    the training config's learning rate and each of its optimizer_weights; one more step trains."""
    import h5py

    src = os.path.join(H5_DATA, "shared", "model.h5")
    with h5py.File(src, "r") as f:
        g = f["optimizer_weights"]
        want = [g[n.decode() if isinstance(n, bytes) else n][()] for n in g.attrs["weight_names"]]
    dst = str(tmp_path / "shared.keras")
    convert(src, dst, with_optimizer=True)
    model = keras.saving.load_model(dst)
    opt = model.optimizer
    assert opt.__class__.__name__ == "Adam" and int(opt.iterations.numpy()) == int(want[0]) == 1
    assert float(opt.learning_rate.numpy()) == pytest.approx(0.001)
    slots = [np.asarray(v.numpy()) for v in opt.variables[2:]]
    assert len(slots) == len(want) - 1
    for got, w in zip(slots, want[1:]):
        np.testing.assert_array_equal(got, w)
    io = np.load(os.path.join(H5_DATA, "shared", "io.npz"))
    model.train_on_batch([io["x0"], io["x1"]], [np.zeros_like(io["y0"]), np.zeros_like(io["y1"])])
    assert int(opt.iterations.numpy()) == 2
