"""Keras 3's own order (ckptool.format.keras3), on files Keras 3 wrote (tests/data/keras3/order,
tests/tf_fixtures/generate_keras_order.py; trained with ``Adam(use_ema=True)`` by ``train_on_batch``,
so a weight and its average differ; Nadam keeps its product after the slots): ``convert --ema`` writes each weight with the value Keras's own
``finalize_variable_values`` gives it (``NAME.truth.npz``), for a nested block of 12 same-shaped Dense
layers (``dense_10`` sorts before ``dense_2`` as text) and for a block of 11 Dense and 11
LayerNormalization interleaved (two per-class counters: only the config interleaves them); a
``.weights.h5`` takes the same route with ``--template-config``; a plain one says nothing of
averages."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest

pytest.importorskip("h5py")

from ckptool.errors import CkptError, UnsupportedError  # noqa: E402
from ckptool.format.keras3 import Saved, counter, ema_splits, head_length, numbered, weights_order  # noqa: E402
from clirun import run  # noqa: E402

D = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3", "order")


def _unzip(tmp_path, name):
    out = tmp_path / name
    with gzip.open(os.path.join(D, name + ".gz"), "rb") as f, open(out, "wb") as g:
        shutil.copyfileobj(f, g)
    return str(out)


def _differ(out, name):
    with np.load(out) as got, np.load(os.path.join(D, f"{name}.truth.npz")) as want:
        assert len(want.files) == {"nested12": 26, "mixed22": 46, "nadam": 8}[name]
        return [n for n in want.files if not np.array_equal(got[n], want[n])]


@pytest.mark.parametrize("name", ["nested12", "mixed22", "nadam"])
def test_ema_of_a_keras_file_takes_each_layers_own_average(tmp_path, capsys, name):
    src = _unzip(tmp_path, f"{name}.keras")
    code, _, err = run(capsys, "convert", src, tmp_path / "o.npz", "--ema")
    assert code == 0, err
    assert _differ(tmp_path / "o.npz", name) == []
    # and each weight is its average, not its value (the test would see the other)
    with np.load(tmp_path / "o.npz") as got:
        assert not np.array_equal(got["layers/sequential/layers/dense_2/vars/0"],
                                  _raw(src, "layers/sequential/layers/dense_2/vars/0"))


def _raw(path, name):
    import ckptool

    with ckptool.open(path) as ck:
        return np.asarray(ck.read(name))


@pytest.mark.parametrize("name", ["nested12", "mixed22", "nadam"])
def test_a_weights_h5_takes_the_same_route_with_its_config(tmp_path, capsys, name):
    src = _unzip(tmp_path, f"{name}.weights.h5")
    code, _, err = run(capsys, "convert", src, tmp_path / "o.safetensors", "--ema")
    assert code == 1 and err.count("\n") == 1 and "--template-config" in err, err
    assert not (tmp_path / "o.safetensors").exists()
    code, _, err = run(capsys, "convert", src, tmp_path / "o.npz", "--ema", "--template-config",
                       _unzip(tmp_path, f"{name}.json"))
    assert code == 0, err
    assert _differ(tmp_path / "o.npz", name) == []
    code, _, err = run(capsys, "convert", src, tmp_path / "p.npz", "--template-config", _unzip(tmp_path, f"{name}.json"))
    assert code == 2 and "--ema" in err and not (tmp_path / "p.npz").exists()


def test_template_config_is_refused_for_a_tf_source(tmp_path, capsys):
    import ckptool

    ckptool.write(str(tmp_path / "ck"), {"w": np.ones(2, np.float32)})
    code, _, err = run(capsys, "convert", tmp_path / "ck", tmp_path / "o.npz", "--ema", "--template-config",
                       _unzip(tmp_path, "nested12.json"))
    assert code == 2 and "not a Keras 3 file" in err


def test_a_deep_template_config_is_one_error_line(tmp_path, capsys):
    src = _unzip(tmp_path, "nested12.weights.h5")
    (tmp_path / "deep.json").write_text("[" * 100000)
    code, _, err = run(capsys, "convert", src, tmp_path / "o.npz", "--ema", "--template-config", tmp_path / "deep.json")
    assert code == 1 and err.count("\n") == 1 and "deep.json: not JSON: nested too deep" in err, err


def test_inspect_of_a_plain_weights_h5_says_nothing_of_averages(tmp_path, capsys):
    src = _unzip(tmp_path, "plain.weights.h5")
    code, out, err = run(capsys, "inspect", src, "--json")
    assert code == 0, err
    assert "ema" not in json.loads(out)
    code, out, err = run(capsys, "inspect", src)
    assert code == 0 and "average" not in out + err
    # a file whose optimizer state could hold averages says how to tell them, in a way that works
    code, out, _ = run(capsys, "inspect", _unzip(tmp_path, "nested12.weights.h5"), "--json")
    assert "--template-config" in json.loads(out)["ema"]["error"]


def test_inspect_lists_nested_layers_in_keras_order(tmp_path, capsys):
    code, out, err = run(capsys, "inspect", _unzip(tmp_path, "mixed22.keras"), "--json")
    assert code == 0, err
    paths = [lay["path"] for lay in json.loads(out)["keras"]["layers"]]
    block = [p.rsplit("/", 1)[1] for p in paths if p.startswith("layers/sequential/layers/")]
    assert block[:5] == ["dense", "layer_normalization", "dense_1", "layer_normalization_1", "dense_2"]
    assert block[-2:] == ["dense_10", "layer_normalization_10"] and len(block) == 22


def test_order_rules():
    assert counter("dense_3", {"dense", "dense_3"}) == ("dense", 3) and counter("dense_3", {"dense_3"}) == ("dense_3", 0)
    assert sorted(["a/dense_10", "a/dense_2", "a/dense"], key=numbered) == ["a/dense", "a/dense_2", "a/dense_10"]
    objs = [Saved("", "m", "", []), Saved("layers/dense_10", "", "", ["x"]), Saved("layers/dense_2", "", "", ["y"]),
            Saved("layers/dense", "", "", ["z"]), Saved("optimizer", "adam", "", ["o"])]
    got = weights_order(objs)
    assert [s.path for s in got.objects] == ["", "layers/dense", "layers/dense_2", "layers/dense_10"]
    assert not got.unproved  # one class: its counters are its order
    mixed = weights_order(objs + [Saved("layers/conv", "", "", ["w"])])
    assert mixed.unproved and mixed.unproved[0][0] == "the model/layers"  # two classes, no config
    mha = weights_order([Saved("", "", "", []), Saved("att", "att", "MultiHeadAttention", []),
                         *(Saved(f"att/{n}", "", "", ["v"]) for n in ("key_dense", "output_dense", "query_dense",
                                                                      "value_dense"))])
    assert [s.path for s in mha.objects][2:] == ["att/query_dense", "att/key_dense", "att/value_dense",
                                                 "att/output_dense"]
    assert head_length([(), ()]) == 2 and head_length([(), (3,)]) == 1
    f = ("float32", (3,))
    g = ("float32", (2,))
    # averages f, g then m, v of each; or six averages and no slots (which the model's variables settle)
    assert list(ema_splits([f, g, f, f, g, g])) == [(2, 2), (6, 0)]
    assert list(ema_splits([f, f, g, g])) == [(4, 0)]  # a plain Adam's m, v of f, g: averages only without slots


def test_same_shaped_siblings_of_unknown_order_are_refused():
    from ckptool.ops.read.ema import keras3_plan
    from ckptool.ops.read.keras import KerasLayer

    f32 = "float32"
    layers = [KerasLayer("", "m", "", []), KerasLayer("layers/blk", "blk", "Custom", []),
              KerasLayer("layers/blk/a", "a", "", ["layers/blk/a/vars/0"]),
              KerasLayer("layers/blk/b", "b", "", ["layers/blk/b/vars/0"])]
    tensors = [(n, f32, (3,)) for n in ("layers/blk/a/vars/0", "layers/blk/b/vars/0", "optimizer/vars/2",
                                        "optimizer/vars/3")] + [("optimizer/vars/0", "int64", ()),
                                                                ("optimizer/vars/1", f32, ())]
    config = {"class_name": "Functional", "config": {"name": "m", "layers": [
        {"class_name": "Custom", "config": {"name": "blk"}}]},
        "compile_config": {"optimizer": {"class_name": "SGD", "config": {"use_ema": True}}}}
    with pytest.raises(CkptError, match="not recorded in the file"):
        keras3_plan(tensors, config, layers, "x.weights.h5")
    with pytest.raises(UnsupportedError, match="--template-config"):
        keras3_plan(tensors, None, layers, "x.weights.h5")


def test_deep_json_in_a_keras_input_is_one_error_line(tmp_path, capsys):
    """A .weights.json shard map, a .keras config.json and keras_metadata.pb's node metadata nested
    100,000 deep: one error naming the file (format.json_doc.load_json), no RecursionError."""
    (tmp_path / "m.weights.json").write_text("[" * 100000)
    code, _, err = run(capsys, "inspect", tmp_path / "m.weights.json")
    assert code == 1 and err.count("\n") == 1 and "m.weights.json: not a sharded-weights index: nested too deep" \
        in err, err

    from ckptool.errors import CorruptError
    from ckptool.format.keras_metadata import parse

    meta = b"[" * 100000

    def field(number, payload):  # a length-delimited protobuf field
        n, size = bytearray(), len(payload)
        while True:
            n.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
            size >>= 7
            if not size:
                break
        return bytes([number << 3 | 2]) + bytes(n) + payload

    data = field(1, field(3, b"root") + field(5, meta))
    with pytest.raises(CorruptError, match="not metadata JSON: nested too deep"):
        parse(data, "keras_metadata.pb")
    assert parse(field(1, field(3, b"root") + field(5, b'{"class_name": "Functional"}')))[0].class_name == "Functional"


def test_the_library_takes_the_same_route(tmp_path):
    import ckptool

    src = _unzip(tmp_path, "mixed22.weights.h5")
    r = ckptool.convert(src, str(tmp_path / "o.npz"), ema=True, template_config=_unzip(tmp_path, "mixed22.json"))
    assert r.ema["averaged"] == 46 and _differ(tmp_path / "o.npz", "mixed22") == []


def test_the_bridge_and_format_agree_on_what_follows_the_slots():
    from ckptool.format.keras3 import TRAILING_STATE
    from ckptool.ops.transform.convert.keras.optim import TRAILING

    assert {k: len(v) for k, v in TRAILING.items()} == TRAILING_STATE
