"""The Keras 3 bridge, round two (issue 37): the layer order Keras really uses, never HDF5
addresses; duplicate object-graph edges; optimizer state the target cannot hold; mixed precision.
On committed fixtures (tests/tf_fixtures/generate_keras_more.py): no TF or Keras needed."""

import gzip
import json
import os
import shutil

import h5py
import numpy as np
import pytest

import ckptool
from ckptool.errors import RefusedError
from ckptool.format.keras3 import counter
from ckptool.ops.transform.convert.keras.bridge import convert_keras
from ckptool.ops.transform.convert.keras.order import align
from clirun import completed

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3")
STACK = os.path.join(DATA, "stack")


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype.name, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _h5_values(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def _gunzip(name, tmp_path):
    dst = tmp_path / name[:-3]
    with gzip.open(os.path.join(STACK, name)) as g, open(dst, "wb") as out:
        shutil.copyfileobj(g, out)
    return dst


def _dense(i):
    return "layers/dense" + (f"_{i}" if i else "")


def test_stack_fixture_puts_addresses_out_of_order(tmp_path):
    """The fixture pins the bug: its groups' object-header addresses are not Keras's order."""
    t = _gunzip("template.weights.h5.gz", tmp_path)
    with h5py.File(t) as f:
        addr = {i: h5py.h5o.get_info(f[_dense(i) + "/vars/0"].id).addr for i in range(200)}
    by_addr = sorted(addr, key=addr.get)
    assert by_addr != list(range(200)) and by_addr.index(178) < by_addr.index(90)


@pytest.mark.parametrize("with_config", [False, True])
def test_stack_converts_in_the_models_order(tmp_path, with_config):
    """200 same-shaped Dense layers: layer_with_weights-K is Keras's K-th Dense (``dense_K``, its own
    counter in model.layers), its Adam moments the (2K, 2K+1)-th slots, whatever the addresses."""
    t = _gunzip("template.weights.h5.gz", tmp_path)
    args = ["--template-config", _gunzip("template.json.gz", tmp_path)] if with_config else []
    dst = tmp_path / "o.weights.h5"
    r = completed("convert", os.path.join(STACK, "tf", "ckpt"), dst, "--template", t, *args)
    assert r.returncode == 0, r.stderr
    got = _h5_values(dst)
    with ckptool.open(os.path.join(STACK, "tf", "ckpt")) as ck:
        for i in range(200):
            for j, attr in enumerate(("kernel", "bias")):
                key = f"layer_with_weights-{i}/{attr}/.ATTRIBUTES/VARIABLE_VALUE"
                assert _bits(got[f"{_dense(i)}/vars/{j}"]) == _bits(ck.read(key)), (i, attr)
                for k, slot in enumerate("mv"):  # Adam: m, v per variable in the model's order
                    n = 2 * (2 * i + j) + k
                    assert _bits(got[f"optimizer/vars/{2 + n}"]) == \
                        _bits(ck.read(f"optimizer/_variables/{1 + n}/.ATTRIBUTES/VARIABLE_VALUE")), (i, attr, slot)
        assert _bits(got["optimizer/vars/0"]) == _bits(ck.read("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"))


def test_a_config_that_contradicts_the_file_is_refused(tmp_path):
    """A config naming the layers in another order than Keras's counters say: no file written."""
    t = _gunzip("template.weights.h5.gz", tmp_path)
    doc = json.loads(_gunzip("template.json.gz", tmp_path).read_text())
    layers = doc["config"]["layers"]
    dense = [i for i, lay in enumerate(layers) if lay["class_name"] == "Dense"]
    a, b = dense[90], dense[178]
    layers[a], layers[b] = layers[b], layers[a]
    cfg = tmp_path / "swapped.json"
    cfg.write_text(json.dumps(doc))
    dst = tmp_path / "o.weights.h5"
    r = completed("convert", os.path.join(STACK, "tf", "ckpt"), dst, "--template", t, "--template-config", cfg)
    assert r.returncode == 1 and "against Keras's own counters" in r.stderr and not dst.exists(), r.stderr
    other = tmp_path / "other.json"  # the config of another model: its layer names are not this file's
    other.write_text(json.dumps({"class_name": "Functional", "config": {"name": "x", "layers": [
        {"class_name": "Dense", "config": {"name": "nope"}}]}}))
    r = completed("convert", os.path.join(STACK, "tf", "ckpt"), dst, "--template", t, "--template-config", other)
    assert r.returncode == 1 and "not a layer of the config's model" in r.stderr and not dst.exists(), r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    r = completed("convert", os.path.join(STACK, "tf", "ckpt"), dst, "--template", t, "--template-config", bad)
    assert r.returncode == 1 and "not JSON" in r.stderr and not dst.exists(), r.stderr


def _ambiguous(tmp_path):
    """A TF checkpoint of three same-shaped layers and a Keras file whose two classes (dense,
    einsum_dense) hold the same shapes: nothing but a config says which is which."""
    rng = np.random.default_rng(0)
    values = {}
    for k in range(3):
        values[f"layer_with_weights-{k}/kernel/.ATTRIBUTES/VARIABLE_VALUE"] = rng.standard_normal((4, 4)).astype("f4")
        values[f"layer_with_weights-{k}/bias/.ATTRIBUTES/VARIABLE_VALUE"] = rng.standard_normal(4).astype("f4")
    ckptool.write(str(tmp_path / "tf" / "ckpt"), values)
    t = tmp_path / "t.weights.h5"
    with h5py.File(t, "w") as f:
        f.create_group("vars").attrs["name"] = "functional"
        for group, name in (("dense", "d0"), ("einsum_dense", "e0"), ("dense_1", "d1")):
            g = f.create_group(f"layers/{group}/vars")
            g.attrs["name"] = name
            g.create_dataset("0", data=np.zeros((4, 4), "f4"))
            g.create_dataset("1", data=np.zeros(4, "f4"))
    cfg = tmp_path / "model.json"
    cfg.write_text(json.dumps({"class_name": "Functional", "config": {"name": "functional", "layers": [
        {"class_name": "InputLayer", "config": {"name": "input"}},
        {"class_name": "Dense", "config": {"name": "d0"}},
        {"class_name": "Dense", "config": {"name": "d1"}},
        {"class_name": "EinsumDense", "config": {"name": "e0"}}]}}))
    return str(tmp_path / "tf" / "ckpt"), t, cfg, values


def test_an_order_nothing_proves_is_refused_and_a_config_proves_it(tmp_path):
    src, t, cfg, values = _ambiguous(tmp_path)
    dst = tmp_path / "o.weights.h5"
    r = completed("convert", src, dst, "--template", t)
    assert r.returncode == 1 and "cannot be proved" in r.stderr and "--template-config" in r.stderr, r.stderr
    assert not dst.exists()
    r = completed("convert", src, dst, "--template", t, "--template-config", cfg)
    assert r.returncode == 0, r.stderr
    got = _h5_values(dst)
    for k, group in enumerate(("dense", "dense_1", "einsum_dense")):  # the config's order
        assert _bits(got[f"layers/{group}/vars/0"]) == _bits(values[f"layer_with_weights-{k}/kernel/.ATTRIBUTES/"
                                                                      "VARIABLE_VALUE"])
    # the way back proves the same order from the same config, and refuses without it
    back = tmp_path / "back" / "ckpt"
    r = completed("convert", dst, back, "--template", src)
    assert r.returncode == 1 and "cannot be proved" in r.stderr and not back.parent.exists(), r.stderr
    r = completed("convert", dst, back, "--template", src, "--template-config", cfg)
    assert r.returncode == 0, r.stderr
    with ckptool.open(str(back)) as b:
        for key, v in values.items():
            assert _bits(b.read(key)) == _bits(v), key


def test_align_counts_each_assignment_once():
    """The aligner's proof: one interleaving, several, none; skips only where the counts differ."""
    assert align(["a", "b", "a"], [["a", "a"], ["b"]]).pairs == [(0, (0, 0)), (1, (1, 0)), (2, (0, 1))]
    assert align(["a", "a"], [["a"], ["a"]]).disagree is not None
    assert align(["a", "c"], [["a"], ["b"]]).stuck == (1, [(1, 0)])
    extra = align(["a", "b"], [["a", "x", "b"]])  # a Keras layer more, skipped in the one place it fits
    assert extra.pairs == [(0, (0, 0)), (1, (0, 2))]
    assert align(["a", "b"], [["a", "a", "b"]]).why  # which of two same layers is the extra: unprovable
    assert counter("dense_12", {"dense", "dense_12"}) == ("dense", 12)
    assert counter("block_2", {"block_2"}) == ("block_2", 0)


def test_normalization_counts_each_variable_once(tmp_path):
    """Normalization's object graph names one node twice (mean/adapt_mean): once is its place."""
    d = os.path.join(DATA, "normalization")
    for template in ("template.weights.h5", "template.keras"):
        dst = str(tmp_path / ("o" + template[8:]))
        r = convert_keras(os.path.join(d, "tf", "ckpt"), dst, os.path.join(d, template))
        assert not r.kept and not r.unused and not r.mapping.problems
        with ckptool.open(dst) as ck:
            truth = _h5_values(os.path.join(d, "truth.weights.h5"))
            for n, v in truth.items():
                assert _bits(ck.read(n)) == _bits(v), (template, n)
    back = tmp_path / "back" / "ckpt"
    convert_keras(str(tmp_path / "o.weights.h5"), str(back), os.path.join(d, "tf", "ckpt"))
    with ckptool.open(os.path.join(d, "tf", "ckpt")) as a, ckptool.open(str(back)) as b:
        assert a.names() == b.names()
        for n in a.names():
            if a.variable(n).dtype != "string":
                assert _bits(a.read(n)) == _bits(b.read(n)), n


@pytest.mark.parametrize("template", ["template.weights.h5", "template.keras", "unbuilt.weights.h5"])
def test_mixed_precision_both_ways(tmp_path, template):
    """A LossScaleOptimizer: the loss scale to optimizer/vars/2,3, the inner Adam to both its places
    (an unbuilt template gains them); and back to exactly the source."""
    d = os.path.join(DATA, "mixed")
    suffix = ".keras" if template.endswith(".keras") else ".weights.h5"
    dst = str(tmp_path / ("o" + suffix))
    r = completed("convert", os.path.join(d, "tf", "ckpt"), dst, "--template", os.path.join(d, template))
    assert r.returncode == 0, r.stderr
    truth = _h5_values(os.path.join(d, "truth.weights.h5"))
    with ckptool.open(dst) as ck:
        assert sorted(ck.names()) == sorted(truth)
        for n, v in truth.items():
            assert _bits(ck.read(n)) == _bits(v), n
    back = tmp_path / "back" / "ckpt"
    r = completed("convert", dst, back, "--template", os.path.join(d, "tf", "ckpt"))
    assert r.returncode == 0, r.stderr
    with ckptool.open(os.path.join(d, "tf", "ckpt")) as a, ckptool.open(str(back)) as b:
        assert a.names() == b.names() and any("loss_scale" in n for n in a.names())
        for n in a.names():
            if a.variable(n).dtype != "string":
                assert _bits(a.read(n)) == _bits(b.read(n)), n


def test_mixed_source_into_a_plain_template_needs_allow_unused(tmp_path):
    d = os.path.join(DATA, "mixed")
    dst = tmp_path / "o.weights.h5"
    r = completed("convert", os.path.join(d, "tf", "ckpt"), dst, "--template",
                  os.path.join(DATA, "functional", "template.weights.h5"))
    assert r.returncode == 1 and "loss_scale" in r.stderr and "--allow-unused" in r.stderr, r.stderr


def _unbuilt(tmp_path, name, label):
    t = tmp_path / f"{label}.weights.h5"
    shutil.copy(os.path.join(DATA, name, "template.weights.h5"), t)
    with h5py.File(t, "r+") as h5:
        for i in range(2, len(h5["optimizer/vars"])):
            del h5[f"optimizer/vars/{i}"]
        h5["optimizer/vars"].attrs["name"] = label
    return t


def test_unbuilt_template_whose_slots_nothing_tells_is_refused(tmp_path):
    """An SGD template saved unbuilt: nothing in a .weights.h5 says whether it has momentum (Keras
    would skip the whole optimizer): refused, or the weights alone with --skip-optimizer."""
    src = os.path.join(DATA, "functional", "tf", "ckpt")
    t = _unbuilt(tmp_path, "functional", "sgd")
    dst = tmp_path / "o.weights.h5"
    r = completed("convert", src, dst, "--template", t)
    assert r.returncode == 1 and "optimizer.build" in r.stderr and "--skip-optimizer" in r.stderr, r.stderr
    assert not dst.exists()
    r = completed("convert", src, dst, "--template", t, "--skip-optimizer")
    assert r.returncode == 0 and "start the optimizer fresh" in r.stderr, r.stderr
    got = _h5_values(dst)
    with h5py.File(t) as h5:
        assert _bits(got["optimizer/vars/0"]) == _bits(h5["optimizer/vars/0"][()])  # the template's: fresh
    assert sorted(n for n in got if n.startswith("optimizer")) == ["optimizer/vars/0", "optimizer/vars/1"]
    # an optimizer whose kinds differ from the source's (EMA/amsgrad averages): refused too
    r = completed("convert", src, dst, "--template", _unbuilt(tmp_path, "functional", "adamw"), "--force")
    assert r.returncode == 0, r.stderr  # AdamW keeps m, v as Adam does


def test_a_config_lays_out_an_unbuilt_optimizer(tmp_path):
    """--template-config (model.to_json() of the compiled model) says what an unbuilt optimizer keeps:
    an SGD with momentum keeps one slot per variable, which Adam's source does not fit."""
    src = os.path.join(DATA, "functional", "tf", "ckpt")
    t = _unbuilt(tmp_path, "functional", "sgd")
    with open(os.path.join(DATA, "functional", "template.keras"), "rb") as f:
        import zipfile
        doc = json.loads(zipfile.ZipFile(f).read("config.json"))
    doc["compile_config"]["optimizer"] = {"class_name": "SGD", "config": {"name": "sgd", "momentum": 0.9}}
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(doc))
    r = completed("convert", src, tmp_path / "o.weights.h5", "--template", t, "--template-config", cfg)
    assert r.returncode == 1 and "SGD keeps slots ['m']" in r.stderr, r.stderr
    doc["compile_config"]["optimizer"] = {"class_name": "Adam", "config": {"name": "adam"}}
    cfg.write_text(json.dumps(doc))
    r = completed("convert", src, tmp_path / "o.weights.h5", "--template", t, "--template-config", cfg)
    assert r.returncode == 0, r.stderr
    truth = _h5_values(os.path.join(DATA, "functional", "truth.weights.h5"))
    got = _h5_values(tmp_path / "o.weights.h5")
    assert [n for n in truth if n not in got] == []
    for n in truth:
        assert _bits(got[n]) == _bits(truth[n]), n


def test_back_without_optimizer_state_writes_none(tmp_path):
    """A Keras file without optimizer state into a TF template with one: the output has no optimizer
    (tf.keras starts it fresh), never the template's old moments."""
    d = os.path.join(DATA, "functional")
    k = tmp_path / "k.weights.h5"
    shutil.copy(os.path.join(d, "truth.weights.h5"), k)
    with h5py.File(k, "r+") as h5:
        del h5["optimizer"]
    back = tmp_path / "back" / "ckpt"
    r = completed("convert", k, back, "--template", os.path.join(d, "tf", "ckpt"))
    assert r.returncode == 0 and "fresh" in r.stderr, r.stderr
    with ckptool.open(str(back)) as b:
        assert not [n for n in b.names() if n.startswith("optimizer")]
        g = b.object_graph()
        assert "optimizer" not in dict(g.nodes[0].children) and len(b.names()) == 12
    with pytest.raises(RefusedError, match="skip-optimizer"):  # the other way round: state would be lost
        convert_keras(os.path.join(d, "template.weights.h5"), str(tmp_path / "b2" / "ckpt"),
                      str(tmp_path / "back" / "ckpt"))


def _without(tmp_path, drop):
    """The functional template with one variable of a layer gone, the others renumbered (a layer
    built with use_bias=False, a BatchNormalization with scale=False), its optimizer left out."""
    t = tmp_path / "less.weights.h5"
    shutil.copy(os.path.join(DATA, "functional", "template.weights.h5"), t)
    group, index = drop.rsplit("/vars/", 1)
    with h5py.File(t, "r+") as h5:
        del h5["optimizer"]
        vs = h5[f"{group}/vars"]
        kept = [vs[str(i)][()] for i in range(len(vs)) if i != int(index)]
        for i in range(len(vs)):
            del vs[str(i)]
        for i, v in enumerate(kept):
            vs[str(i)] = v
    return t


def test_a_variable_more_on_one_side_pairs_only_where_the_shapes_prove_it(tmp_path):
    """Keras files do not name variables: where a layer has one fewer in the template, its others are
    paired only if dtype and shape leave one order-keeping way (a Dense without bias: the kernel),
    never by position (a BatchNormalization without gamma: beta would take gamma's values)."""
    src = os.path.join(DATA, "functional", "tf", "ckpt")
    nobias = _without(tmp_path, "layers/dense_1/vars/1")
    out = tmp_path / "o.weights.h5"
    r = convert_keras(src, str(out), str(nobias), allow_unused=True, skip_optimizer=True)
    assert ("layer_with_weights-3/kernel/.ATTRIBUTES/VARIABLE_VALUE", "layers/dense_1/vars/0") in r.mapping.pairs
    assert "layer_with_weights-3/bias/.ATTRIBUTES/VARIABLE_VALUE" in r.unused
    with ckptool.open(src) as a:
        want = a.read("layer_with_weights-3/kernel/.ATTRIBUTES/VARIABLE_VALUE")
    assert _bits(_h5_values(out)["layers/dense_1/vars/0"]) == _bits(want)
    noscale = _without(tmp_path, "layers/batch_normalization/vars/0")
    with pytest.raises(RefusedError, match="layer-2: which of its variables are which cannot be proved .*layers/batch_normalization 3"):
        convert_keras(src, str(tmp_path / "bn.weights.h5"), str(noscale), allow_unused=True, skip_optimizer=True)
    assert not (tmp_path / "bn.weights.h5").exists()
