"""``convert --ema`` / ``--strip-optimizer`` through the Keras 3 bridge, on files tf_keras and Keras 3
wrote (tests/data/keras3/ema, tests/tf_fixtures/generate_keras_more.py; trained by train_on_batch,
so that a weight and its average differ): each weight takes the value the framework's own average
holds (``truth.weights.h5``, ``back/ckpt``: what Keras and tf_keras hold after
``finalize_variable_values``), both ways. Keras judges the same in tests/interop/test_tf_keras_real.py."""

import os

import numpy as np
import pytest

pytest.importorskip("h5py")

from ckptool.errors import CkptError  # noqa: E402
from ckptool.ops.read.reader import open as open_checkpoint  # noqa: E402
from ckptool.ops.transform.convert.keras.bridge import convert_keras  # noqa: E402
from clirun import run  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3")
D = os.path.join(DATA, "ema")
TF = os.path.join(D, "tf", "ckpt")
TEMPLATE = os.path.join(D, "template.keras")
K3 = os.path.join(D, "k3.keras")


def _model(path):
    """The model's variables (no optimizer state, no bookkeeping) by name."""
    with open_checkpoint(path) as ck:
        return {v.name: np.asarray(ck.read(v.name)) for v in ck.variables()
                if v.name.startswith(("layers/", "layer_with_weights-"))}


def _same(a, b):
    assert sorted(a) == sorted(b)
    bad = [n for n in a if a[n].dtype != b[n].dtype or not np.array_equal(a[n], b[n])]
    assert not bad, bad


def test_tf_keras_to_keras3_writes_the_averages(tmp_path):
    dst = str(tmp_path / "o.keras")
    r = convert_keras(TF, dst, TEMPLATE, ema=True)
    assert r.ema is not None and r.ema.kind == "tf_keras" and len(r.ema.averaged) == 9
    assert sorted(n.split("/")[1] for n in r.ema.without) == ["moving_mean", "moving_variance"]
    _same(_model(dst), _model(os.path.join(D, "truth.weights.h5")))
    # a weight and its average differ here, so the test sees which one was written
    assert not np.array_equal(_model(dst)["layers/dense/vars/0"],
                              _model(TF)["layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"])
    with open_checkpoint(dst) as ck:  # the optimizer's state went across (iterations: 2 steps)
        assert int(ck.read("optimizer/vars/0")) == 2 and len([v for v in ck.variables() if "optimizer" in v.name]) > 2
    assert r.to_json()["ema"]["averaged"] == 9


def test_strip_optimizer_keeps_the_templates_fresh_optimizer(tmp_path):
    dst = str(tmp_path / "o.keras")
    r = convert_keras(TF, dst, TEMPLATE, ema=True, strip_optimizer=True)
    assert any("left out as asked" in n for n in r.mapping.notes)
    assert r.ema is not None and r.ema.dropped == 2 + 3 * 9  # iterations, learning rate; average, m, v of 9
    _same(_model(dst), _model(os.path.join(D, "truth.weights.h5")))
    with open_checkpoint(dst) as ck, open_checkpoint(TEMPLATE) as t:
        assert [v.name for v in ck.variables() if "optimizer" in v.name] == ["optimizer/vars/0", "optimizer/vars/1"]
        assert int(ck.read("optimizer/vars/0")) == int(t.read("optimizer/vars/0")) == 0


def test_keras3_to_tf_writes_the_averages(tmp_path):
    dst = str(tmp_path / "back" / "ckpt")
    r = convert_keras(K3, dst, TF, ema=True)
    assert r.ema is not None and r.ema.kind == "keras3" and len(r.ema.averaged) == 9
    _same(_model(dst), _model(os.path.join(D, "back", "ckpt")))


def test_savedmodel_without_template_writes_the_averages(tmp_path):
    """A SavedModel's object graph lists each layer's variables again (``variables/N``): the averages
    pair with the layers' own attributes, BatchNormalization's statistics left as they are."""
    dst = str(tmp_path / "o.weights.h5")
    r = convert_keras(os.path.join(D, "savedmodel"), dst, None, ema=True, strip_optimizer=True)
    assert r.ema is not None and len(r.ema.averaged) == 9 and r.ema.dropped > 0
    _same(_model(dst), _model(os.path.join(D, "truth.weights.h5")))


def test_weights_h5_needs_the_config(tmp_path):
    """A .weights.h5 records neither the layer order nor that the optimizer keeps averages (amsgrad's
    slots have the same shapes): refused without a config, exact with --template-config."""
    src = os.path.join(D, "k3.weights.h5")
    with pytest.raises(CkptError, match="config"):
        convert_keras(src, str(tmp_path / "no" / "ckpt"), TF, ema=True)
    assert not (tmp_path / "no").exists()
    dst = str(tmp_path / "back" / "ckpt")
    convert_keras(src, dst, TF, ema=True, template_config=os.path.join(D, "k3.json"))
    _same(_model(dst), _model(os.path.join(D, "back", "ckpt")))


def test_cli_says_what_ema_did(tmp_path, capsys):
    dst = str(tmp_path / "o.keras")
    code, _, err = run(capsys, "convert", TF, dst, "--template", TEMPLATE, "--ema")
    assert code == 0, err
    assert "--ema (tf_keras): 9 variables written with their moving averages; 2 variables without one" in err
    _same(_model(dst), _model(os.path.join(D, "truth.weights.h5")))
    code, out, err = run(capsys, "convert", TF, tmp_path / "d.keras", "--template", TEMPLATE, "--ema", "--dry-run",
                         "--json")
    assert code == 0, err
    assert '"averaged": 9' in out and not (tmp_path / "d.keras").exists()
    code, out, err = run(capsys, "convert", TF, tmp_path / "d.keras", "--template", TEMPLATE, "--ema", "--dry-run")
    row = next(line for line in out.splitlines() if line.startswith("layer_with_weights-0/kernel/"))
    assert row.split() == ["layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", "->", "layers/dense/vars/0",
                           "[4,", "8]", "(its", "average", "optimizer/_variables/1/.ATTRIBUTES/VARIABLE_VALUE)"]


def test_no_averages_is_an_error(tmp_path):
    src = os.path.join(DATA, "normalization", "tf", "ckpt")
    with pytest.raises(CkptError, match="no moving averages"):
        convert_keras(src, str(tmp_path / "o.keras"), os.path.join(DATA, "normalization", "template.keras"),
                      ema=True)
    assert not (tmp_path / "o.keras").exists()
