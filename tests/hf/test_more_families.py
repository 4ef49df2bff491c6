"""EfficientNet, MobileNetV2, XLNet, ImageGPT and the Decision Transformer's GPT-2 (fixtures of
tests/tf_fixtures/generate_hf_more2.py): detection, the config each family settles (and an HF
``config.json`` taken back as it is), ``--dry-run``'s mapping and what it leaves out, and the errors
for what transformers' model cannot hold. No TF, no torch: tests/hf/test_export.py compares the
weights with the 4.57 side's, test_transformers5.py and test_forward_outputs.py load them."""

import json
import shutil

import numpy as np
import pytest
from test_export import DATA, case, export, folder

from clirun import completed

NEW = ["efficientnet", "efficientnet_features", "mobilenet_v2", "mobilenet_v2_features", "xlnet", "xlnet_regression",
       "imagegpt", "decision_transformer", "lxmert"]


def _plan(name, tmp_path, *extra):
    r = export(name, tmp_path / "dry", "--dry-run", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name, arch", [("efficientnet", "efficientnet"), ("efficientnet_features", "efficientnet-features"),
                                        ("mobilenet_v2", "mobilenet-v2"), ("mobilenet_v2_features", "mobilenet-v2-features"),
                                        ("xlnet", "xlnet-lm"), ("xlnet_regression", "xlnet-classifier"),
                                        ("imagegpt", "imagegpt"), ("lxmert", "lxmert-pretraining")])
def test_detected_from_the_names(name, arch, tmp_path):
    c = case(name)
    args = [a for i, a in enumerate(c["args"]) if "--arch" not in c["args"][max(0, i - 1):i + 1]]
    r = completed("convert", DATA / name / c["src"], tmp_path / "o", "--to", "hf", "--dry-run", "--json",
                  *[DATA / name / a if (DATA / name / a).exists() else a for a in args])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arch"] == arch


@pytest.mark.parametrize("name", NEW)
def test_an_hf_config_json_is_taken_back(name, tmp_path):
    assert export(name, tmp_path / "a").returncode == 0
    c = case(name)
    arch = c["args"][c["args"].index("--arch") + 1:][:1] if "--arch" in c["args"] else []
    r = completed("convert", DATA / name / c["src"], tmp_path / "b", "--to", "hf", "--config",
                  tmp_path / "a" / "config.json", *(["--arch", *arch] if arch else []))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a" / "config.json").read_text() == (tmp_path / "b" / "config.json").read_text()
    a, b = folder(tmp_path / "a"), folder(tmp_path / "b")
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_configs_say_what_the_original_code_computed(tmp_path):
    def cfg(name):
        out = tmp_path / name
        assert export(name, out).returncode == 0
        return json.loads((out / "config.json").read_text())

    e = cfg("efficientnet")  # EfficientNet(0.05, 1.0, 36) with its own stages: Keras pads blocks 3, 4, 6 both sides
    assert (e["width_coefficient"], e["image_size"], e["depthwise_padding"], e["hidden_act"]) == (0.05, 36, [3, 4, 6],
                                                                                                  "swish")
    assert (e["batch_norm_eps"], e["hidden_dim"], e["num_labels"] if "num_labels" in e else len(e["id2label"])) == \
        (1e-3, 64, 5)
    m = cfg("mobilenet_v2")
    assert (m["depth_multiplier"], m["finegrained_output"], m["hidden_act"], m["layer_norm_eps"]) == \
        (0.1, False, "relu6", 1e-3)
    x = cfg("xlnet")
    assert (x["ff_activation"], x["vocab_size"], x["n_layer"], x["d_head"]) == ("gelu_new", 40, 2, 4)
    assert cfg("xlnet_regression")["ff_activation"] == "relu"
    i = cfg("imagegpt")
    assert (i["vocab_size"], i["n_head"], i["activation_function"], i["tie_word_embeddings"]) == (17, 2, "quick_gelu",
                                                                                                   False)
    assert cfg("decision_transformer")["activation_function"] == "gelu_new"


def test_dry_run_names_every_mapping_and_what_is_left_out(tmp_path):
    mv2 = _plan("mobilenet_v2", tmp_path)
    tf = {m["tf"]: m["hf"] for m in mv2["mapping"]}
    why = {d["tf"]: d["why"] for d in mv2["dropped"]}
    # the 4.57 loader's ema(): the shadow is exported, the raw weight left out saying so; moving stats stay raw
    assert tf["MobilenetV2/Conv/weights/ExponentialMovingAverage"] == "mobilenet_v2.conv_stem.first_conv.convolution.weight"
    assert "ExponentialMovingAverage is exported in its place" in why["MobilenetV2/Conv/weights"]
    assert tf["MobilenetV2/Conv/BatchNorm/moving_mean"].endswith("normalization.running_mean")
    assert "MobilenetV2/Conv/BatchNorm/moving_mean/ExponentialMovingAverage" in why
    eff = _plan("efficientnet", tmp_path)
    assert {m["tf"]: m["hf"] for m in eff["mapping"]}["layer_with_weights-3/depthwise_kernel"] == \
        "efficientnet.encoder.blocks.0.depthwise_conv.depthwise_conv.weight"
    assert "EfficientNetImageProcessor" in {d["tf"]: d["why"] for d in eff["dropped"]}["layer_with_weights-0/mean"]
    xl = _plan("xlnet", tmp_path)
    rows = [m for m in xl["mapping"] if m["tf"] == "model/transformer/r_w_bias"]
    assert [m["hf"] for m in rows] == [f"transformer.layer.{k}.rel_attn.r_w_bias" for k in range(2)]
    ig = _plan("imagegpt", tmp_path)
    hf = {m["hf"]: m["tf"] for m in ig["mapping"]}
    assert hf["transformer.wte.weight"] == "model/wte+sos"
    assert hf["transformer.h.0.attn.c_attn.bias"] == "(0)"  # image-gpt has no biases: zeros, not random


def test_efficientnet_config_that_contradicts_the_tensors(tmp_path):
    bad = tmp_path / "config.json"
    doc = json.loads((DATA / "efficientnet" / "config.json").read_text())
    bad.write_text(json.dumps(dict(doc, width_coefficient=0.25)))
    r = completed("convert", DATA / "efficientnet" / "ckpt", tmp_path / "o", "--to", "hf", "--config", bad)
    assert r.returncode == 1 and "but the tensors have" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_efficientnet_a_first_block_with_a_residual_is_refused():
    """Keras adds a stage's first block's input where it keeps the channels at stride 1 (a tiny width
    rounds B0's 32 and 16 both to 8); transformers' model cannot: an error, not a model that computes
    otherwise."""
    from ckptool.errors import CkptError
    from ckptool.ops.transform.hf.efficientnet import BASE, no_first_residual

    cfg = {**BASE, "width_coefficient": 0.1, "depth_coefficient": 1.0, "depth_divisor": 8}
    with pytest.raises(CkptError, match="stage 1's first block keeps its channels at stride 1"):
        no_first_residual(cfg, "")
    no_first_residual({**cfg, "width_coefficient": 1.0}, "")  # B0 itself: none


def test_decision_transformer_only_by_arch_and_features_lose_no_weight(tmp_path):
    plain = _plan("gpt2", tmp_path)
    assert plain["architecture"] == "GPT2LMHeadModel"
    dt = _plan("decision_transformer", tmp_path)
    assert dt["architecture"] == "DecisionTransformerGPT2Model"
    assert all(not m["hf"].startswith("transformer.") for m in dt["mapping"])


def test_mobilenet_v2_without_its_shadows_takes_the_raw_weights(tmp_path):
    """The features fixture has no EMA: the raw weights, as the loader's ema() falls back."""
    p = _plan("mobilenet_v2_features", tmp_path)
    assert not any(m["tf"].endswith("ExponentialMovingAverage") for m in p["mapping"])
    assert not p["dropped"] or all("ExponentialMovingAverage" not in d["why"] for d in p["dropped"])
    shutil.rmtree(tmp_path / "dry", ignore_errors=True)
