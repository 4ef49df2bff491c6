"""``convert --to hf`` against the oracle: each fixture in tests/data/hf/ is a TF checkpoint written by
TensorFlow under a release's variable names, with the weights transformers 4.57.6's own TF loader put
in the model (``expected.safetensors``, tests/tf_fixtures/generate_hf.py). The exported folder must
hold exactly those tensors, value for value, under the same names; neither TF nor torch is needed."""

import json
import pathlib
import re
import shutil

import numpy as np
import pytest

from ckptool.ops.transform.convert.stfile import StFile
from clirun import completed

DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "hf"
CASES = sorted(p.name for p in DATA.iterdir() if (p / "case.json").is_file())


def case(name):
    return json.loads((DATA / name / "case.json").read_text())


def export(name, out, *extra):
    c = case(name)
    args = [a if not (DATA / name / a).exists() else DATA / name / a for a in c["args"]]
    return completed("convert", DATA / name / c["src"], out, "--to", "hf", *args, *extra)


def folder(out):
    """{name: array} of an exported folder, from model.safetensors or the index and its shards."""
    out = pathlib.Path(out)
    index = out / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
        else ["model.safetensors"]
    tensors = {}
    for f in files:
        with StFile(str(out / f)) as st:
            assert st.extras.format == "pt"
            for t in st.tensors:
                assert t.name not in tensors
                tensors[t.name] = st.read(t.name)
    return tensors


def expected(name):
    with StFile(str(DATA / name / "expected.safetensors")) as st:
        return {t.name: st.read(t.name) for t in st.tensors}


def test_every_release_has_a_fixture():
    assert set(CASES) >= {"bert_pretraining", "bert_classifier", "bert_squad", "bert_tf2", "bert_tf2_late", "albert",
                          "electra", "electra_generator", "t5_v1_0", "t5_v1_1", "mt5", "gpt2", "gpt_neo",
                          "mobilenet_v1"}


@pytest.mark.parametrize("name", CASES)
def test_weights_equal_the_tf_loaders(name, tmp_path):
    out = tmp_path / "out"
    r = export(name, out)
    assert r.returncode == 0, r.stderr
    got, want = folder(out), expected(name)
    # PyTorch's batch-norm counters, which TF never held: 0, as the loader leaves them
    counters = {k: got.pop(k) for k in list(got) if k.endswith(".num_batches_tracked")}
    assert all(v.dtype == np.int64 and v.shape == () and v == 0 for v in counters.values())
    assert len(counters) == (27 if name == "mobilenet_v1" else 0)
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        assert got[k].shape == w.shape, k
        assert np.array_equal(got[k].astype(np.float64), w.astype(np.float64)), k
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [case(name)["architecture"]]


@pytest.mark.parametrize("name", ["t5_v1_1", "gpt_neo", "mt5"])
def test_bfloat16_stays_bfloat16(name, tmp_path):
    assert export(name, tmp_path / "out").returncode == 0
    assert {str(a.dtype) for a in folder(tmp_path / "out").values()} == {"bfloat16"}
    assert json.loads((tmp_path / "out" / "config.json").read_text())["dtype"] == "bfloat16"


def test_configs_translated_and_completed(tmp_path):
    def cfg(name):
        out = tmp_path / name
        assert export(name, out).returncode == 0
        return json.loads((out / "config.json").read_text())
    t5 = cfg("t5_v1_1")  # from operative_config.gin and the tensors
    assert (t5["model_type"], t5["feed_forward_proj"], t5["tie_word_embeddings"]) == ("t5", "gated-gelu", False)
    assert (t5["d_model"], t5["d_ff"], t5["d_kv"], t5["num_heads"], t5["num_layers"], t5["num_decoder_layers"],
            t5["relative_attention_num_buckets"], t5["vocab_size"]) == (8, 12, 4, 2, 2, 2, 8, 32)
    v10 = cfg("t5_v1_0")
    assert (v10["feed_forward_proj"], v10["tie_word_embeddings"]) == ("relu", True)
    assert cfg("mt5")["model_type"] == "mt5"
    gpt2 = cfg("gpt2")  # hparams.json: n_vocab, n_ctx
    assert (gpt2["vocab_size"], gpt2["n_positions"], gpt2["n_embd"], gpt2["n_layer"]) == (259, 16, 8, 2)
    neo = cfg("gpt_neo")  # the run's JSON: the padded vocabulary cut back to n_vocab
    assert (neo["vocab_size"], neo["hidden_size"], neo["num_layers"], neo["max_position_embeddings"]) == (30, 8, 2, 16)
    assert "lr" not in neo
    mobile = cfg("mobilenet_v1")  # no config at all: from the shapes
    assert (mobile["depth_multiplier"], mobile["num_channels"], len(mobile["id2label"])) == (0.0625, 3, 11)
    assert cfg("bert_classifier")["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    assert cfg("electra_generator")["hidden_size"] == 4


def test_detection(tmp_path):
    for name, arch in (("bert_pretraining", "bert-pretraining"), ("bert_classifier", "bert-classifier"),
                       ("bert_squad", "bert-squad"), ("bert_tf2_late", "bert-tf2"), ("electra", "electra"),
                       ("mobilenet_v1", "mobilenet-v1")):
        r = export(name, tmp_path / name, "--dry-run", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["arch"] == arch


def test_dry_run_prints_the_mapping_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    r = export("bert_pretraining", out, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert not out.exists()
    lines = r.stdout.splitlines()
    assert any(line.split()[:3] == ["bert/encoder/layer_0/attention/self/query/kernel", "->",
                                    "bert.encoder.layer.0.attention.self.query.weight"] and "(transpose)" in line
               for line in lines)
    assert any(line.startswith("bert/pooler/dense/bias/adam_m ") and "(optimizer state)" in line for line in lines)
    assert any(line.startswith("global_step ") and "(training bookkeeping)" in line for line in lines)
    assert "nothing written" in r.stderr
    doc = json.loads(export("mobilenet_v1", out, "--dry-run", "--json").stdout)
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert why["MobilenetV1/Conv2d_0/weights/ExponentialMovingAverage"].startswith("moving average")
    assert why["MobilenetV1/Conv2d_0/weights/RMSProp_1"] == "optimizer state"
    assert not out.exists()


def test_sharded_as_save_pretrained(tmp_path):
    out = tmp_path / "out"
    r = export("t5_v1_0", out, "--max-shard-size", "2KB")
    assert r.returncode == 0, r.stderr
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    assert not (out / "model.safetensors").exists()
    got = folder(out)
    assert sorted(got) == sorted(index["weight_map"]) == sorted(expected("t5_v1_0"))
    assert index["metadata"]["total_size"] == sum(a.nbytes for a in got.values())


def test_existing_folder_needs_force_and_stale_shards_go(tmp_path):
    out = tmp_path / "out"
    assert export("t5_v1_0", out, "--max-shard-size", "2KB").returncode == 0
    r = export("t5_v1_0", out)
    assert r.returncode == 1 and "--force" in r.stderr
    r = export("t5_v1_0", out, "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]


def test_tokenizer_files_and_casing(tmp_path):
    out = tmp_path / "out"
    assert export("bert_pretraining", out).returncode == 0
    cfg = json.loads((out / "tokenizer_config.json").read_text())
    assert (cfg["tokenizer_class"], cfg["do_lower_case"], cfg["model_max_length"]) == ("BertTokenizer", True, 16)
    assert (out / "vocab.txt").read_bytes() == (DATA / "bert_pretraining" / "vocab.txt").read_bytes()
    cased = tmp_path / "cased" / "vocab.txt"
    cased.parent.mkdir()
    cased.write_text((DATA / "bert_pretraining" / "vocab.txt").read_text().replace("hello", "Hello"))
    r = export("bert_pretraining", tmp_path / "out2", "--vocab", cased.parent)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out2" / "tokenizer_config.json").read_text())["do_lower_case"] is False
    assert export("gpt2", tmp_path / "gpt2").returncode == 0
    assert (tmp_path / "gpt2" / "merges.txt").read_text().startswith("#version: 0.2")
    assert json.loads((tmp_path / "gpt2" / "tokenizer_config.json").read_text())["tokenizer_class"] == "GPT2Tokenizer"


def _copy(name, tmp_path):
    d = tmp_path / name
    shutil.copytree(DATA / name, d)
    return d


def test_config_disagreeing_with_shapes_names_the_field_and_both_values(tmp_path):
    d = _copy("bert_pretraining", tmp_path)
    cfg = json.loads((d / "bert_config.json").read_text())
    (d / "bert_config.json").write_text(json.dumps(dict(cfg, intermediate_size=16)))
    r = completed("convert", d / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d / "bert_config.json")
    assert r.returncode == 1
    assert "intermediate_size is 16" in r.stderr and "gives 12" in r.stderr and "traceback" not in r.stderr.lower()
    (d / "bert_config.json").write_text(json.dumps(dict(cfg, num_hidden_layers=3)))
    r = completed("convert", d / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d / "bert_config.json")
    assert r.returncode == 1 and "num_hidden_layers is 3" in r.stderr and "gives 2" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_field_the_tensors_cannot_tell_needs_the_config(tmp_path):
    src = body_only("bert_pretraining", tmp_path, ("cls/",))  # no config beside it
    r = completed("convert", src, tmp_path / "out", "--to", "hf")
    assert r.returncode == 1 and "num_attention_heads" in r.stderr and "--config" in r.stderr


def test_the_release_config_beside_the_checkpoint(tmp_path):
    r = completed("convert", DATA / "gpt2" / "model.ckpt", tmp_path / "out", "--to", "hf")
    assert r.returncode == 0, r.stderr
    assert "hparams.json (found beside the checkpoint" in r.stderr
    assert sorted(folder(tmp_path / "out")) == sorted(expected("gpt2"))


def test_unplaced_variable_is_an_error_unless_allowed(tmp_path):
    import ckptool

    src = DATA / "bert_pretraining" / "model.ckpt"
    with ckptool.open(str(src)) as ck:
        weights = {v.name: ck.read(v.name) for v in ck.variables()}
    weights["bert/encoder/layer_0/attention/self/rotary"] = np.zeros(3, np.float32)
    ckptool.write(str(tmp_path / "ck" / "model.ckpt"), weights)
    cfg = DATA / "bert_pretraining" / "bert_config.json"
    r = completed("convert", tmp_path / "ck" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", cfg)
    assert r.returncode == 1 and "'bert/encoder/layer_0/attention/self/rotary'" in r.stderr
    assert "--allow-unused" in r.stderr and not (tmp_path / "out").exists()
    r = completed("convert", tmp_path / "ck" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", cfg,
                  "--allow-unused", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["skipped"] == ["bert/encoder/layer_0/attention/self/rotary"]
    assert sorted(folder(tmp_path / "out")) == sorted(expected("bert_pretraining"))


def test_unknown_architecture_lists_the_known_ones(tmp_path):
    r = completed("convert", DATA / "bert_pretraining" / "model.ckpt", tmp_path / "o", "--to", "hf", "--arch", "xlnet")
    assert r.returncode == 2 and "unknown architecture 'xlnet'" in r.stderr
    for known in ("bert", "albert", "electra", "t5", "mt5", "gpt2", "gpt-neo", "mobilenet-v1"):
        assert known in r.stderr
    import ckptool

    ckptool.write(str(tmp_path / "x" / "ckpt"), {"lstm/kernel": np.zeros((2, 2), np.float32)})
    r = completed("convert", tmp_path / "x" / "ckpt", tmp_path / "o", "--to", "hf")
    assert r.returncode == 1 and "no known architecture" in r.stderr and "gpt-neo" in r.stderr


def test_arch_names_the_model(tmp_path):
    r = export("electra", tmp_path / "gen", "--arch", "ElectraForMaskedLM", "--config",
               DATA / "electra" / "generator_config.json", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["architecture"] == "ElectraForMaskedLM"
    assert sorted(folder(tmp_path / "gen")) == sorted(expected("electra_generator"))


def test_hf_options_need_to_hf(tmp_path):
    r = completed("convert", DATA / "gpt2" / "model.ckpt", tmp_path / "w.npz", "--arch", "gpt2")
    assert r.returncode == 2 and "go with --to hf" in r.stderr
    r = completed("convert", DATA / "gpt2" / "model.ckpt", tmp_path / "o", "--to", "hf", "--cast", "float32=bfloat16")
    assert r.returncode == 2 and "--cast does not go with --to hf" in r.stderr


def test_the_library_takes_any_convert_source_view(tmp_path):
    """convert_hf(opened=...) exports a view of a source (what convert --ema hands it), not the file."""
    from ckptool.ops.transform.convert.source import open_specs
    from ckptool.ops.transform.hf.export import convert_hf

    src = str(DATA / "mobilenet_v1" / "model.ckpt")
    opened = open_specs(src)
    try:
        shadow = {s.name: s for s in opened.specs}
        for s in opened.specs:  # the moving averages in place of the raw weights
            avg = shadow.get(s.name + "/ExponentialMovingAverage")
            if avg is not None:
                s.load, s.raw = avg.load, None
        convert_hf(src, str(tmp_path / "ema"), opened=opened)
    finally:
        opened.close()
    got, raw = folder(tmp_path / "ema"), expected("mobilenet_v1")
    assert sorted(k for k in got if not k.endswith("num_batches_tracked")) == sorted(raw)
    assert np.allclose(got["classifier.bias"], raw["classifier.bias"] * np.float32(0.9))


def test_api(tmp_path):
    import ckptool

    c = case("gpt2")
    result = ckptool.convert(str(DATA / "gpt2" / c["src"]), str(tmp_path / "o"), to="hf",
                             config=str(DATA / "gpt2" / "hparams.json"))
    assert result.architecture == "GPT2LMHeadModel" and result.tensors == len(expected("gpt2"))


def test_json_matches_the_convert_schema(tmp_path):
    import jsonschema

    schema = json.loads((DATA.parent.parent.parent / "docs" / "json" / "convert.schema.json").read_text())
    for extra in (("--dry-run",), ()):
        r = export("albert", tmp_path / "out", "--json", *extra)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
        assert doc["format"] == "hf" and doc["dry_run"] == bool(extra)
    assert len(doc["files"]) == 2 and doc["tensors"] == len(expected("albert"))


def test_config_directory_finds_the_release_config(tmp_path):
    r = completed("convert", DATA / "albert" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", DATA / "albert")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["num_hidden_layers"] == 3
    r = completed("convert", DATA / "albert" / "model.ckpt", tmp_path / "o2", "--to", "hf", "--config", tmp_path)
    assert r.returncode == 1 and "no config here" in r.stderr


def body_only(name, tmp_path, drop):
    """The fixture's checkpoint without the variables whose names start with ``drop`` (a bare encoder)."""
    import ckptool

    c = case(name)
    with ckptool.open(str(DATA / name / c["src"])) as ck:
        weights = {v.name: ck.read(v.name) for v in ck.variables() if not v.name.startswith(drop)}
    prefix = tmp_path / "body" / "model.ckpt"
    ckptool.write(str(prefix), weights)
    return prefix


@pytest.mark.parametrize("name, drop, prefix, cls", [
    ("bert_pretraining", ("cls/",), "bert.", "BertModel"),
    ("albert", ("cls/",), "albert.", "AlbertModel"),
    ("mobilenet_v1", ("MobilenetV1/Logits/",), "mobilenet_v1.", "MobileNetV1Model"),
    ("electra", ("electra/encoder/", "electra/embeddings_project", "discriminator_predictions/"), "",
     "ElectraForMaskedLM"),
])
def test_a_checkpoint_without_heads_is_the_base_model(name, drop, prefix, cls, tmp_path):
    src = body_only(name, tmp_path, drop)
    args = [DATA / name / a if (DATA / name / a).exists() else a for a in case(name)["args"]]
    if cls == "ElectraForMaskedLM":  # a generator alone: no --arch needed
        args = ["--config", DATA / name / "generator_config.json"]
    r = completed("convert", src, tmp_path / "out", "--to", "hf", *args)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [cls]
    got = {k: v for k, v in folder(tmp_path / "out").items() if not k.endswith("num_batches_tracked")}
    want = expected("electra_generator") if cls == "ElectraForMaskedLM" else \
        {k[len(prefix):]: v for k, v in expected(name).items() if k.startswith(prefix)}
    assert sorted(got) == sorted(want)
    assert all(np.array_equal(got[k].astype(np.float64), want[k].astype(np.float64)) for k in want)


def test_config_for_another_model_is_refused(tmp_path):
    r = completed("convert", DATA / "bert_pretraining" / "model.ckpt", tmp_path / "o", "--to", "hf",
                  "--config", DATA / "electra" / "config.json")
    assert r.returncode == 1 and "model_type is 'electra'" in r.stderr and "bert" in r.stderr


def test_bad_shard_size_is_a_usage_error(tmp_path):
    r = export("gpt2", tmp_path / "o", "--max-shard-size", "lots")
    assert r.returncode == 2 and "--max-shard-size" in r.stderr


def test_a_missing_layer_is_named(tmp_path):
    src = body_only("gpt2", tmp_path, ("model/h0/",))
    r = completed("convert", src, tmp_path / "o", "--to", "hf", "--config", DATA / "gpt2" / "hparams.json")
    assert r.returncode == 1 and "n_layer are [1]: 0 is missing" in r.stderr


def test_t5_config_contradicting_the_tensors(tmp_path):
    cfg = json.loads((DATA / "mt5" / "config.json").read_text())
    for change, words in (({"tie_word_embeddings": True}, "tie_word_embeddings is True"),
                          ({"feed_forward_proj": "relu"}, "feed_forward_proj is 'relu'"),
                          ({"d_kv": 8}, "num_heads*d_kv is 16")):
        (tmp_path / "config.json").write_text(json.dumps(dict(cfg, **change)))
        r = completed("convert", DATA / "mt5" / "model.ckpt-1000000", tmp_path / "o", "--to", "hf",
                      "--config", tmp_path / "config.json")
        assert r.returncode == 1 and words in r.stderr, r.stderr


def test_gin_bindings():
    from ckptool.ops.transform.hf.config import parse_gin

    doc = parse_gin((DATA / "t5_v1_1" / "operative_config.gin").read_text(), "gin")
    assert doc["d_model"] == 8 and doc["DenseReluDense.activation"] == ["gelu", "linear"]
    assert doc["DenseReluDense.hidden_size"] == 12 and doc["make_layer_stack.num_layers"] == 2  # %macros resolved
    assert doc["make_layer_stack.layers"].startswith("[@mesh_tensorflow")  # not a literal: kept as text


def test_hf_config_labels_are_checked_against_the_head(tmp_path):
    cfg = json.loads((DATA / "bert_classifier" / "bert_config.json").read_text())
    cfg.update(model_type="bert", id2label={"0": "neg", "1": "pos"})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    src = DATA / "bert_classifier" / "model.ckpt"
    r = completed("convert", src, tmp_path / "o", "--to", "hf", "--config", tmp_path / "config.json")
    assert r.returncode == 1 and "num_labels is 2" in r.stderr and "gives 3" in r.stderr
    cfg["id2label"]["2"] = "neutral"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = completed("convert", src, tmp_path / "o", "--to", "hf", "--config", tmp_path / "config.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "o" / "config.json").read_text())["id2label"]["2"] == "neutral"


def test_ema_exports_the_moving_averages(tmp_path):
    """convert --to hf --ema: each weight is its ExponentialMovingAverage shadow's value (the
    fixture's shadows are 0.9x the weights), under the same HF names the raw export has."""
    got = export("mobilenet_v1", tmp_path / "ema", "--ema")
    assert got.returncode == 0, got.stderr
    assert "--ema:" in got.stderr
    ema, raw = folder(tmp_path / "ema"), expected("mobilenet_v1")
    assert sorted(k for k in ema if not k.endswith("num_batches_tracked")) == sorted(raw)
    for k, v in raw.items():
        assert np.array_equal(ema[k], (v * np.float32(0.9)).astype(v.dtype)), k


def test_ema_dry_run_says_the_averages_are_exported(tmp_path):
    doc = json.loads(export("mobilenet_v1", tmp_path / "out", "--ema", "--dry-run", "--json").stdout)
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert why["MobilenetV1/Conv2d_0/weights/ExponentialMovingAverage"] == \
        "exported (--ema): its value is mobilenet_v1.conv_stem.convolution.weight"
    assert not any("raw weight is exported" in w for w in why.values())
    row = next(m for m in doc["mapping"] if m["tf"] == "MobilenetV1/Conv2d_0/weights")
    assert row["transform"].startswith("its moving average's value")
    plain = json.loads(export("mobilenet_v1", tmp_path / "out", "--dry-run", "--json").stdout)
    assert {d["tf"]: d["why"] for d in plain["dropped"]}["MobilenetV1/Conv2d_0/weights/ExponentialMovingAverage"] \
        == "moving average (the raw weight is exported)"


def _with_config(name, tmp_path, cfg_name, change):
    d = _copy(name, tmp_path)
    path = d / cfg_name
    if cfg_name.endswith(".gin"):
        path.write_text(change(path.read_text()))
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    args = [d / a if (d / a).exists() else a for a in case(name)["args"]]
    return completed("convert", d / case(name)["src"], tmp_path / "out", "--to", "hf", *args)


def test_activations_are_what_the_original_code_computed(tmp_path):
    """mesh TF's and ALBERT's "gelu" is the tanh approximation, transformers' "gelu_new"; GPT-Neo reads
    activation_fn (its run JSON's "activation_function" is read by nothing); BERT's and ELECTRA's is erf."""
    def cfg(name, *extra):
        out = tmp_path / name
        assert export(name, out, *extra).returncode == 0
        return json.loads((out / "config.json").read_text())
    assert cfg("gpt_neo")["activation_function"] == "gelu_new"  # the fixture's JSON says "gelu"
    assert cfg("albert")["hidden_act"] == "gelu_new"
    assert cfg("bert_pretraining")["hidden_act"] == "gelu"
    assert cfg("electra").get("hidden_act", "gelu") == "gelu"  # ElectraConfig's default: erf
    assert cfg("t5_v1_1")["feed_forward_proj"] == "gated-gelu"  # transformers: gelu_new, gated
    r = _with_config("gpt_neo", tmp_path / "relu", "config.json", lambda c: dict(c, activation_fn="relu"))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "relu" / "out" / "config.json").read_text())["activation_function"] == "relu"
    r = _with_config("gpt_neo", tmp_path / "spike", "config.json", lambda c: dict(c, activation_fn="spike"))
    assert r.returncode == 1 and "activation_fn is 'spike'" in r.stderr
    r = _with_config("t5_v1_0", tmp_path / "t5", "operative_config.gin",
                     lambda t: re.sub(r"(DenseReluDense\.activation\s*=\s*)\S+", r"\1'gelu'", t))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "t5" / "out" / "config.json").read_text())["feed_forward_proj"] == "gelu_new"
    hf = json.loads((tmp_path / "gpt_neo" / "config.json").read_text())  # an HF config is taken as it says
    (tmp_path / "hf.json").write_text(json.dumps(dict(hf, activation_function="gelu")))
    r = completed("convert", DATA / "gpt_neo" / case("gpt_neo")["src"], tmp_path / "hfout", "--to", "hf",
                  "--config", tmp_path / "hf.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "hfout" / "config.json").read_text())["activation_function"] == "gelu"
