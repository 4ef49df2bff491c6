"""Issue 52 without TensorFlow: tf_keras whole-model ``.h5`` files (tests/data/keras_h5, written by
tests/tf_fixtures/generate_keras_h5.py with ``model.save("model.h5")``) converted to Keras 3
``.keras`` and ``.weights.h5`` files. Keras 3 judges the outputs in the interop tier (TF backend)
and the keras-torch tier (tests/kerastorch)."""

import json
import os
import shutil
import zipfile

import numpy as np
import pytest

from ckptool.api import convert
from ckptool.ops.read.keras_legacy import is_legacy_path
from clirun import completed

h5py = pytest.importorskip("h5py")

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras_h5")
MODELS = sorted(os.listdir(DATA))


def _source_weights(path):
    """Every dataset of the source's model_weights, by the layer_names/weight_names attributes."""
    with h5py.File(path, "r") as f:
        g = f["model_weights"]
        text = [n.decode() if isinstance(n, bytes) else n for n in g.attrs["layer_names"]]
        return {f"model_weights/{n}/{w}": g[n][w][()] for n in text
                for w in (w.decode() if isinstance(w, bytes) else w for w in g[n].attrs["weight_names"])}


def _datasets(h5):
    out = {}
    h5.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_every_keras3_dataset_is_its_source_weight(tmp_path, name):
    src = os.path.join(DATA, name, "model.h5")
    dst = str(tmp_path / "m.keras")
    res = convert(src, dst)
    want = _source_weights(src)
    with zipfile.ZipFile(dst) as z:
        assert z.namelist() == ["metadata.json", "config.json", "model.weights.h5"]
        config = json.loads(z.read("config.json"))
        with z.open("model.weights.h5") as f, h5py.File(f, "r") as h5:
            got = _datasets(h5)
    assert config["class_name"] in ("Functional", "Sequential") and "compile_config" not in config
    placed = dict((k, t) for t, k in res.mapping.pairs)
    assert set(got) == set(placed)  # nothing in the output without a source
    assert sorted(placed.values()) == sorted(want)  # every source weight placed once
    for k, t in placed.items():
        np.testing.assert_array_equal(got[k], want[t], err_msg=k)
    assert not any(k.startswith("optimizer") for k in got)
    assert any("optimizer_weights" in n for n in res.mapping.notes)


def test_wrappers_land_where_keras3_saves_them(tmp_path):
    dst = str(tmp_path / "r.weights.h5")
    r = completed("convert", os.path.join(DATA, "recurrent", "model.h5"), dst)
    assert r.returncode == 0, r.stderr
    assert "optimizer_weights" in r.stdout + r.stderr and "layout from its model_config" in r.stdout + r.stderr
    with h5py.File(dst, "r") as h5:
        groups = []
        h5.visit(lambda n: groups.append(n) if n.endswith("/vars") and len(h5[n]) else None)
        assert "optimizer" not in h5
    assert "layers/time_distributed/layer/vars" in groups
    assert "layers/bidirectional/forward_layer/cell/vars" in groups
    assert "layers/bidirectional/backward_layer/cell/vars" in groups
    assert {"layers/rnn/cell/cells/gru_cell/vars", "layers/rnn/cell/cells/simple_rnn_cell/vars"} <= set(groups)


def test_nested_and_attention_sublayers(tmp_path):
    out = {}
    for name in ("nested", "attention"):
        dst = str(tmp_path / f"{name}.weights.h5")
        convert(os.path.join(DATA, name, "model.h5"), dst)
        with h5py.File(dst, "r") as h5:
            out[name] = set(_datasets(h5))
    assert out["nested"] == {f"layers/{p}/vars/{i}" for i in (0, 1) for p in (
        "dense", "functional/layers/functional/layers/dense", "functional/layers/functional/layers/layer_normalization",
        "functional/layers/sequential/layers/dense", "functional/layers/sequential/layers/dense_1")}
    assert {f"layers/multi_head_attention/{p}_dense/vars/0" for p in ("query", "key", "value", "output")} <= \
        out["attention"]


def test_an_h5_model_takes_no_template_config(tmp_path):
    dst = tmp_path / "m.keras"
    r = completed("convert", os.path.join(DATA, "shared", "model.h5"), dst, "--template-config", "x.json")
    assert r.returncode == 2 and r.stderr.startswith("ckptool: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "tf_keras .h5" in r.stderr and not dst.exists()


@pytest.mark.parametrize("name", MODELS)
def test_with_optimizer_lays_out_iterations_learning_rate_then_the_slots(tmp_path, name):
    """Keras 3's optimizer/vars: the .h5's iteration:0, the training config's learning rate (tf_keras
    writes no variable of it), then the optimizer_weights in their weight_names order."""
    src = os.path.join(DATA, name, "model.h5")
    with h5py.File(src, "r") as f:
        g = f["optimizer_weights"]
        names = [n.decode() if isinstance(n, bytes) else n for n in g.attrs["weight_names"]]
        want = [g[n][()] for n in names]
        rate = json.loads(f.attrs["training_config"])["optimizer_config"]["config"]["learning_rate"]
    dst = str(tmp_path / "m.keras")
    res = convert(src, dst, with_optimizer=True)
    assert res.mapping.optimizer_pairs == len(names) + 1 and names[0] == "iteration:0"
    with zipfile.ZipFile(dst) as z:
        config = json.loads(z.read("config.json"))
        with z.open("model.weights.h5") as f, h5py.File(f, "r") as h5:
            vg = h5["optimizer/vars"]
            got = [vg[str(i)][()] for i in range(len(vg))]
            assert vg.attrs["name"] == "adam"
    assert config["compile_config"]["optimizer"]["class_name"] == "Adam"
    assert len(got) == len(want) + 1 and got[1].dtype == np.float32 and got[1] == np.float32(rate)
    for i, (g, w) in enumerate(zip([got[0]] + got[2:], want)):
        np.testing.assert_array_equal(g, w, err_msg=names[i])
    assert not any("optimizer_weights" in n for n in res.mapping.notes)


def test_with_optimizer_refuses_what_it_cannot_place(tmp_path):
    """A slot the optimizer_weights name but whose variable no layer holds is left over, and refused."""
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:
        g = f["optimizer_weights"]
        names = [n.decode() if isinstance(n, bytes) else n for n in g.attrs["weight_names"]]
        g.attrs["weight_names"] = np.array(names[:1] + ["Adam/m/nowhere/kernel:0"] + names[2:], dtype="S")
        g["Adam/m/nowhere/kernel:0"] = g[names[1]][()]
    r = completed("convert", p, tmp_path / "m.keras", "--with-optimizer")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and not (tmp_path / "m.keras").exists(), r.stderr
    with h5py.File(p, "r+") as f:
        del f["optimizer_weights/Adam/m/nowhere/kernel:0"]
    r = completed("convert", p, tmp_path / "m.keras", "--with-optimizer")
    assert r.returncode == 1 and "nowhere/kernel:0" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def _copy(tmp_path, name="shared"):
    p = str(tmp_path / "model.h5")
    shutil.copy(os.path.join(DATA, name, "model.h5"), p)
    return p


def test_a_keras3_weights_file_named_h5_is_not_taken_for_a_tf_keras_model(tmp_path):
    """Told by content: a Keras 3 .weights.h5 (no model_config, no model_weights) under a .h5 name."""
    k3 = str(tmp_path / "k3.weights.h5")
    convert(os.path.join(DATA, "shared", "model.h5"), k3)
    assert not is_legacy_path(k3) and is_legacy_path(str(tmp_path / "model.h5"))
    renamed = str(tmp_path / "model.h5")
    shutil.copy(k3, renamed)
    r = completed("convert", renamed, tmp_path / "m.keras")
    assert r.returncode == 1 and "not a tf_keras whole-model .h5 file" in r.stderr and r.stderr.count("\n") == 1


def test_damaged_files_are_one_line_errors(tmp_path):
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:  # a weight name the file does not hold
        names = list(f["model_weights/shared"].attrs["weight_names"])
        f["model_weights/shared"].attrs["weight_names"] = np.array(names[:-1] + [b"shared/gone:0"], dtype="S")
    r = completed("convert", p, tmp_path / "m.keras")
    assert r.returncode == 1 and "shared/gone:0" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:
        f.attrs["model_config"] = "{not json"
    r = completed("convert", p, tmp_path / "m.keras")
    assert r.returncode == 1 and "model_config" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:
        f["model_weights/ext"] = h5py.SoftLink("/model_weights/shared")
    r = completed("convert", p, tmp_path / "m.keras")
    assert r.returncode == 1 and "SoftLink" in r.stderr, r.stderr
    assert not (tmp_path / "m.keras").exists()


def test_a_subclassed_model_is_refused(tmp_path):
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:
        doc = json.loads(f.attrs["model_config"])
        doc["class_name"] = "MyModel"
        f.attrs["model_config"] = json.dumps(doc)
    r = completed("convert", p, tmp_path / "m.weights.h5")
    assert r.returncode == 2 and "MyModel" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_with_optimizer_refuses_a_mixed_precision_h5_which_holds_no_loss_scale(tmp_path):
    p = _copy(tmp_path)
    with h5py.File(p, "r+") as f:
        doc = json.loads(f.attrs["training_config"])
        inner = doc["optimizer_config"]
        doc["optimizer_config"] = {"class_name": "LossScaleOptimizerV3",
                                   "config": {"inner_optimizer": inner, "dynamic": True}}
        f.attrs["training_config"] = json.dumps(doc)
    r = completed("convert", p, tmp_path / "m.keras", "--with-optimizer")
    assert r.returncode == 2 and "loss scale" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "m.keras").exists()
    assert completed("convert", p, tmp_path / "m.keras").returncode == 0  # the weights alone
