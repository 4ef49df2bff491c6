"""Keras 3 loads what `convert --template` makes of tf_keras checkpoints, bit-exactly (weights and
Adam state), and tf_keras loads what it makes of Keras 3 files (issue 28).

The fixtures (tests/data/keras3/, tests/tf_fixtures/generate_keras.py) hold each model's tf_keras
checkpoint, its Keras 3 templates and expected.npz (tf_keras's get_weights() and Adam state)."""

import os
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("h5py")
keras = pytest.importorskip("keras")
tf_keras = pytest.importorskip("tf_keras")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tf_fixtures"))
import generate_keras as gen  # noqa: E402

from ckptool.ops.transform.convert.keras.bridge import convert_keras  # noqa: E402
from clirun import completed  # noqa: E402

pytestmark = pytest.mark.interop

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3")
MODELS = list(gen.MODELS)


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype.name, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _expected(name, which="expected"):
    with np.load(os.path.join(DATA, name, f"{which}.npz")) as z:
        weights = [z[f"w{i}"] for i in range(sum(1 for k in z.files if k.startswith("w")))]
        opt = [z[f"opt{j}"] for j in range(sum(1 for k in z.files if k.startswith("opt")))]
        return weights, int(z["iterations"]), opt


def _keras3_model(name):
    model, _, _ = gen.build(keras, name)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _check_keras3(model, name, which="expected"):
    weights, iterations, opt = _expected(name, which)
    got = model.get_weights()
    assert len(got) == len(weights)
    for i, (a, b) in enumerate(zip(got, weights)):
        assert _bits(a) == _bits(b), f"{name}: weight {i}"
    assert int(model.optimizer.iterations.numpy()) == iterations
    slots = [v.numpy() for v in model.optimizer.variables[2:]]
    assert len(slots) == len(opt)
    for j, (a, b) in enumerate(zip(slots, opt)):
        assert _bits(a) == _bits(b), f"{name}: optimizer slot {j}"


@pytest.mark.parametrize("name", MODELS)
def test_weights_h5_loads_in_keras3_bit_exact(tmp_path, name):
    dst = str(tmp_path / "new.weights.h5")
    convert_keras(os.path.join(DATA, name, "tf", "ckpt"), dst, os.path.join(DATA, name, "template.weights.h5"))
    model = _keras3_model(name)
    model.load_weights(dst)
    _check_keras3(model, name)


@pytest.mark.parametrize("name", [m for m in MODELS if m != "subclassed"])
def test_keras_file_loads_in_keras3_bit_exact(tmp_path, name):
    dst = str(tmp_path / "new.keras")
    template = os.path.join(DATA, name, "template.keras")
    convert_keras(os.path.join(DATA, name, "tf", "ckpt"), dst, template)
    model = keras.saving.load_model(dst)
    _check_keras3(model, name)
    import zipfile
    with zipfile.ZipFile(dst) as a, zipfile.ZipFile(template) as b:
        for member in ("config.json", "metadata.json"):
            assert a.read(member) == b.read(member)


@pytest.mark.parametrize("src,which", [("tf_ckpt", "expected"), ("tf_legacy/ckpt", "expected_legacy")])
def test_other_tf_layouts(tmp_path, src, which):
    """tf.train.Checkpoint(model=, optimizer=) (a model/ prefix) and the legacy Adam's slots."""
    dst = str(tmp_path / "new.weights.h5")
    convert_keras(os.path.join(DATA, "functional", src), dst,
                  os.path.join(DATA, "functional", "template.weights.h5"))
    model = _keras3_model("functional")
    model.load_weights(dst)
    _check_keras3(model, "functional", which)


def _tf_keras_model(name):
    model, _, _ = gen.build(tf_keras, name)
    model.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


@pytest.mark.parametrize("name", MODELS)
def test_keras3_back_to_tf_keras(tmp_path, name):
    """A Keras 3 model trained a step, saved, converted with the old checkpoint as template:
    tf_keras's load_weights gives the Keras 3 weights and Adam state bit for bit."""
    keras.utils.set_random_seed(5)
    model, x, y = gen.build(keras, name)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.train_on_batch(x[:8], y[:8])
    src = str(tmp_path / "k3.weights.h5")
    model.save_weights(src)
    dst = str(tmp_path / "back" / "ckpt")
    convert_keras(src, dst, os.path.join(DATA, name, "tf", "ckpt"))
    old = _tf_keras_model(name)
    old.load_weights(dst).assert_existing_objects_matched()
    for i, (a, b) in enumerate(zip(old.get_weights(), model.get_weights())):
        assert _bits(a) == _bits(b), f"{name}: weight {i}"
    assert int(old.optimizer.iterations.numpy()) == int(model.optimizer.iterations.numpy())
    for j, (a, b) in enumerate(zip(old.optimizer.variables[1:], model.optimizer.variables[2:])):
        assert _bits(a.numpy()) == _bits(b.numpy()), f"{name}: optimizer slot {j}"


def test_cli_errors_write_nothing(tmp_path):
    ckpt = os.path.join(DATA, "mha", "tf", "ckpt")
    dst = tmp_path / "x.weights.h5"

    def run(*args):
        return completed(*args)

    r = run("convert", ckpt, str(dst), "--template", os.path.join(DATA, "functional", "template.weights.h5"))
    assert r.returncode == 1 and "nothing written" in r.stderr and "layers/" in r.stderr, r.stderr
    r = run("convert", ckpt, str(dst))
    assert r.returncode == 2 and "--template" in r.stderr
    assert not os.listdir(tmp_path)
    # a template with a layer more: its entries are missing unless --allow-missing
    shutil.copy(os.path.join(DATA, "mha", "template.weights.h5"), tmp_path / "t.weights.h5")
    import h5py
    with h5py.File(tmp_path / "t.weights.h5", "r+") as h5:
        h5.create_dataset("layers/extra/vars/0", data=np.zeros(3, np.float32))
    r = run("convert", ckpt, str(dst), "--template", str(tmp_path / "t.weights.h5"))
    assert r.returncode == 1 and "layers/extra/vars/0" in r.stderr and not dst.exists(), r.stderr
    r = run("convert", ckpt, str(dst), "--template", str(tmp_path / "t.weights.h5"), "--allow-missing")
    assert r.returncode == 0 and dst.exists(), r.stderr


@pytest.mark.parametrize("name", ["functional", "sequential", "embedding"])
def test_savedmodel_without_template(tmp_path, name):
    """tf_keras model.save(dir): the layout from keras_metadata.pb, loaded by Keras 3 bit-exactly."""
    tf_keras.utils.set_random_seed(3)
    old, x, y = gen.build(tf_keras, name)
    old.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="mse")
    old.fit(x, y, batch_size=8, epochs=1, verbose=0)
    old.save(str(tmp_path / "sm"), save_format="tf")
    r = completed("convert", tmp_path / "sm", tmp_path / "new.weights.h5")
    assert r.returncode == 0, r.stderr
    model = _keras3_model(name)
    model.load_weights(str(tmp_path / "new.weights.h5"))
    for i, (a, b) in enumerate(zip(model.get_weights(), old.get_weights())):
        assert _bits(a) == _bits(b), f"{name}: weight {i}"
    assert int(model.optimizer.iterations.numpy()) == int(old.optimizer.iterations.numpy())
    for j, (a, b) in enumerate(zip(model.optimizer.variables[2:], old.optimizer.variables[1:])):
        assert _bits(a.numpy()) == _bits(b.numpy()), f"{name}: optimizer slot {j}"


def test_savedmodel_subclassed_needs_a_template(tmp_path):
    old, x, _ = gen.build(tf_keras, "subclassed")
    old.save(str(tmp_path / "sm"), save_format="tf")
    r = completed("convert", tmp_path / "sm", tmp_path / "new.weights.h5")
    assert r.returncode == 2 and "--template" in r.stderr and not (tmp_path / "new.weights.h5").exists()


def _optimizer(k, which):
    o = k.optimizers
    return {"sgd_momentum": lambda: o.SGD(0.01, momentum=0.9), "rmsprop": lambda: o.RMSprop(0.01),
            "adamw": lambda: o.AdamW(0.01), "amsgrad": lambda: o.Adam(0.01, amsgrad=True),
            "schedule": lambda: o.Adam(o.schedules.ExponentialDecay(0.01, 10, 0.9))}[which]()


@pytest.mark.parametrize("which", ["sgd_momentum", "rmsprop", "adamw", "amsgrad", "schedule"])
def test_other_optimizers(tmp_path, which):
    """Slots of other optimizers, and a schedule (no learning_rate variable on either side)."""
    tf_keras.utils.set_random_seed(4)
    old, x, y = gen.build(tf_keras, "sequential")
    old.compile(optimizer=_optimizer(tf_keras, which), loss="mse")
    old.fit(x, y, batch_size=8, epochs=1, verbose=0)
    old.save_weights(str(tmp_path / "tf" / "ckpt"))
    new, _, _ = gen.build(keras, "sequential")
    new.compile(optimizer=_optimizer(keras, which), loss="mse")
    new.optimizer.build(new.trainable_variables)
    new.save_weights(str(tmp_path / "t.weights.h5"))
    (tmp_path / "t.json").write_text(new.to_json())  # amsgrad or EMA: only the config says which
    convert_keras(str(tmp_path / "tf" / "ckpt"), str(tmp_path / "o.weights.h5"), str(tmp_path / "t.weights.h5"),
                  template_config=str(tmp_path / "t.json"))
    new.load_weights(str(tmp_path / "o.weights.h5"))
    for a, b in zip(new.get_weights(), old.get_weights()):
        assert _bits(a) == _bits(b)
    kv, tv = new.optimizer.variables, old.optimizer.variables
    first = 1 if which == "schedule" else 2
    assert len(kv) - first == len(tv) - 1 and int(kv[0].numpy()) == int(tv[0].numpy())
    for a, b in zip(kv[first:], tv[1:]):
        assert _bits(a.numpy()) == _bits(b.numpy())


@pytest.mark.parametrize("form", ["weights.h5", "keras"])
def test_template_with_unbuilt_optimizer(tmp_path, form):
    """The template saved right after compile (Keras 3 wrote only iterations and learning_rate):
    the Adam moments are added, and Keras 3 loads them."""
    name = "functional"
    new, _, _ = gen.build(keras, name)
    new.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    template = str(tmp_path / f"t.{form}")
    new.save_weights(template) if form == "weights.h5" else new.save(template)
    dst = str(tmp_path / f"o.{form}")
    convert_keras(os.path.join(DATA, name, "tf", "ckpt"), dst, template)
    if form == "keras":
        model = keras.saving.load_model(dst)
    else:
        model = _keras3_model(name)
        model.load_weights(dst)
    _check_keras3(model, name)


def test_plain_sgd_and_no_optimizer_in_template(tmp_path):
    """tf.keras keeps momentum slots for a plain SGD, Keras 3 none: with the config saying the SGD has
    no momentum they are not carried; a .weights.h5 alone cannot say (an unbuilt momentum SGD looks
    the same): refused. A template without an optimizer takes the weights with --skip-optimizer."""
    from ckptool.errors import RefusedError

    tf_keras.utils.set_random_seed(4)
    old, x, y = gen.build(tf_keras, "sequential")
    old.compile(optimizer=tf_keras.optimizers.SGD(0.01), loss="mse")
    old.fit(x, y, batch_size=8, epochs=1, verbose=0)
    old.save_weights(str(tmp_path / "tf" / "ckpt"))
    for compiled in (True, False):
        new, _, _ = gen.build(keras, "sequential")
        if compiled:
            new.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
            new.optimizer.build(new.trainable_variables)
        template = str(tmp_path / f"t{compiled}.weights.h5")
        new.save_weights(template)
        (tmp_path / "t.json").write_text(new.to_json())
        dst = str(tmp_path / f"o{compiled}.weights.h5")
        with pytest.raises(RefusedError, match="--skip-optimizer"):
            convert_keras(str(tmp_path / "tf" / "ckpt"), dst, template)
        if compiled:
            convert_keras(str(tmp_path / "tf" / "ckpt"), dst, template, template_config=str(tmp_path / "t.json"))
        else:
            convert_keras(str(tmp_path / "tf" / "ckpt"), dst, template, skip_optimizer=True)
        new.load_weights(dst)
        for a, b in zip(new.get_weights(), old.get_weights()):
            assert _bits(a) == _bits(b)
        if compiled:
            assert int(new.optimizer.iterations.numpy()) == int(old.optimizer.iterations.numpy())
