"""``convert --to hf`` of issue 51's families, without TF or torch (the quick tier): detection from the
names (RoFormer by its missing position embeddings), the heads each checkpoint holds picking the
model class, the release's config translated (TAPAS's seven table sizes and its tanh gelu), what
``--dry-run`` says of each variable, and the errors a config that contradicts the tensors gets.
The weights themselves are held to the 4.57 loaders' by test_export.py."""

import json

import pytest
from test_export import DATA, body_only, export

from clirun import completed


def _dry(name, tmp_path, *extra):
    r = export(name, tmp_path / "out", "--dry-run", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name, arch, cls", [
    ("roformer", "roformer-mlm", "RoFormerForMaskedLM"),
    ("roformer_small", "roformer-mlm", "RoFormerForMaskedLM"),
    ("megatron_bert", "megatron-bert-pretraining", "MegatronBertForPreTraining"),
    ("roc_bert", "roc-bert-pretraining", "RoCBertForPreTraining"),
    ("tapas", "tapas-mlm", "TapasForMaskedLM"),
    ("tapas_wtq", "tapas-qa", "TapasForQuestionAnswering"),
    ("tapas_tabfact", "tapas-classifier", "TapasForSequenceClassification"),
    ("rembert", "rembert", "RemBertModel"),
    ("convbert", "convbert", "ConvBertModel"),
    ("convbert_grouped", "convbert", "ConvBertModel")])
def test_detected_from_the_names(name, arch, cls, tmp_path):
    doc = _dry(name, tmp_path)
    assert (doc["arch"], doc["architecture"]) == (arch, cls)


def test_a_roformer_release_is_not_taken_for_bert(tmp_path):
    # its bert_config.json has no model_type: the missing position embeddings tell it from BERT
    r = completed("convert", DATA / "roformer" / "model.ckpt", tmp_path / "out", "--to", "hf")
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (cfg["model_type"], cfg["architectures"], cfg["embedding_size"]) == ("roformer", ["RoFormerForMaskedLM"], 8)
    assert cfg["hidden_act"] == "gelu"  # bert4keras's gelu is the erf form
    doc = _dry("roformer", tmp_path)
    computed = [m for m in doc["mapping"] if m["hf"] == "roformer.encoder.embed_positions.weight"]
    assert computed == [{"tf": "(computed: sinusoidal positions)", "hf": "roformer.encoder.embed_positions.weight",
                         "shape": [16, 4], "transform": ""}]


def test_roformer_body_and_what_it_leaves_out(tmp_path):
    doc = _dry("roformer", tmp_path, "--arch", "RoFormerModel")  # --arch roformer: the family
    assert doc["architecture"] == "RoFormerModel"
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert why["cls/predictions/output_bias"].startswith("the MLM head")
    assert {m["hf"] for m in doc["mapping"]} >= {"encoder.embed_positions.weight", "embeddings.word_embeddings.weight"}


def test_roformer_needs_the_table_length(tmp_path):
    d = tmp_path / "cfg.json"
    cfg = json.loads((DATA / "roformer" / "bert_config.json").read_text())
    del cfg["max_position_embeddings"]
    d.write_text(json.dumps(cfg))
    r = completed("convert", DATA / "roformer" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1 and "max_position_embeddings" in r.stderr and not (tmp_path / "out").exists()


def test_the_heads_pick_the_class(tmp_path):
    src = body_only("megatron_bert", tmp_path / "a", ("cls/seq_relationship/",))
    r = completed("convert", src, tmp_path / "m", "--to", "hf", "--config", DATA / "megatron_bert" / "bert_config.json",
                  "--dry-run", "--json")
    doc = json.loads(r.stdout)
    assert doc["architecture"] == "MegatronBertForMaskedLM"
    assert {d["tf"]: d["why"] for d in doc["dropped"]}["bert/pooler/dense/kernel"].endswith("has no pooler")
    src = body_only("megatron_bert", tmp_path / "b", ("cls/",))
    r = completed("convert", src, tmp_path / "m2", "--to", "hf", "--config", DATA / "megatron_bert" / "bert_config.json",
                  "--dry-run", "--json")
    assert json.loads(r.stdout)["architecture"] == "MegatronBertModel"
    src = body_only("roc_bert", tmp_path / "c", ("roc_bert/pooler/",))
    r = completed("convert", src, tmp_path / "r", "--to", "hf", "--config", DATA / "roc_bert" / "config.json",
                  "--dry-run", "--json")
    assert json.loads(r.stdout)["architecture"] == "RoCBertForMaskedLM"


def test_tapas_release_config_translated(tmp_path):
    assert export("tapas_wtq", tmp_path / "out").returncode == 0
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert cfg["type_vocab_sizes"] == [3, 4, 4, 2, 4, 4, 5] and "type_vocab_size" not in cfg
    assert (cfg["hidden_act"], cfg["num_aggregation_labels"]) == ("gelu_new", 4)
    doc = _dry("tapas", tmp_path)
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert "next-sentence" in why["cls/seq_relationship/output_weights"]
    assert why["bert/pooler/dense/bias"] == "TapasForMaskedLM has no pooler"
    # an HF config.json says what it means: its gelu stays
    hf = tmp_path / "config.json"
    hf.write_text(json.dumps(dict(json.loads((tmp_path / "out" / "config.json").read_text()), hidden_act="gelu")))
    r = completed("convert", DATA / "tapas_wtq" / "model.ckpt", tmp_path / "o2", "--to", "hf", "--config", hf)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "o2" / "config.json").read_text())["hidden_act"] == "gelu"


def test_tapas_table_sizes_must_agree(tmp_path):
    d = tmp_path / "bert_config.json"
    cfg = json.loads((DATA / "tapas" / "bert_config.json").read_text())
    d.write_text(json.dumps(dict(cfg, type_vocab_size=[3, 256, 256, 2, 256, 256, 10])))
    r = completed("convert", DATA / "tapas" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1 and "type_vocab_sizes" in r.stderr and "[3, 4, 4, 2, 4, 4, 5]" in r.stderr


def test_roc_bert_mixing_layer_width_must_agree(tmp_path):
    d = tmp_path / "config.json"
    cfg = json.loads((DATA / "roc_bert" / "config.json").read_text())
    d.write_text(json.dumps(dict(cfg, enable_shape=False)))
    r = completed("convert", DATA / "roc_bert" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1 and "map_inputs_layer takes 18 inputs" in r.stderr and "12" in r.stderr


def test_family_tokenizers(tmp_path):
    for name, cls in (("roformer", "RoFormerTokenizer"), ("tapas", "TapasTokenizer"),
                      ("megatron_bert", "BertTokenizer")):
        assert export(name, tmp_path / name).returncode == 0
        doc = json.loads((tmp_path / name / "tokenizer_config.json").read_text())
        assert (doc["tokenizer_class"], doc["do_lower_case"]) == (cls, True)
        assert (tmp_path / name / "vocab.txt").read_bytes() == (DATA / name / "vocab.txt").read_bytes()


def test_rembert_leaves_the_output_side_out_and_writes_its_sentencepiece(tmp_path):
    doc = _dry("rembert", tmp_path)
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert why["bert/embeddings/output_embedding"].startswith("the pretraining output side")
    assert why["cls/predictions/output_bias"] == why["bert/embeddings/output_embedding"]
    assert export("rembert", tmp_path / "out").returncode == 0
    doc = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert (doc["tokenizer_class"], doc["do_lower_case"], doc["keep_accents"]) == ("RemBertTokenizer", False, True)
    assert (tmp_path / "out" / "sentencepiece.model").read_bytes() == (DATA / "rembert" / "sentencepiece.model").read_bytes()
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (cfg["input_embedding_size"], cfg["output_embedding_size"]) == (6, 10)


def test_convbert_config_from_the_tensors(tmp_path):
    def cfg(name):
        assert export(name, tmp_path / name).returncode == 0
        return json.loads((tmp_path / name / "config.json").read_text())
    plain, grouped = cfg("convbert"), cfg("convbert_grouped")
    assert (plain["num_groups"], plain["head_ratio"], plain["conv_kernel_size"], plain["embedding_size"]) == (1, 2, 3, 6)
    assert plain["hidden_act"] == "gelu"  # ConvBERT's modeling.py: tf.math.erf
    assert (grouped["num_groups"], grouped["hidden_act"]) == (2, "gelu")  # an HF config.json says what it means
    why = {d["tf"]: d["why"] for d in _dry("convbert", tmp_path)["dropped"]}
    assert why["generator_predictions/output_bias"].startswith("not ConvBertModel's")
    maps = {m["hf"]: m["transform"] for m in _dry("convbert", tmp_path)["mapping"]}
    assert maps["encoder.layer.0.attention.self.key_conv_attn_layer.bias"] == "reshape to (-1,1)"
    assert maps["encoder.layer.0.attention.self.key_conv_attn_layer.depthwise.weight"] == "axes (1,2,0)"


def test_convbert_heads_must_fit_the_convolution(tmp_path):
    cfg = json.loads((DATA / "convbert" / "convbert_config.json").read_text())
    d = tmp_path / "c.json"
    d.write_text(json.dumps(dict(cfg, num_attention_heads=4)))  # head_ratio 2: 2 convolution heads, not 1
    r = completed("convert", DATA / "convbert" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1, r.stderr
    assert "head_ratio is 2 (2 heads of 4), but the checkpoint's conv_kernel_layer has 1 of width 3" in r.stderr
    del cfg["head_ratio"]  # the one convolution head of 4 attention heads: head_ratio 4
    d.write_text(json.dumps(dict(cfg, num_attention_heads=4)))
    r = completed("convert", DATA / "convbert" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["head_ratio"] == 4


def test_funnel_net_config_translated_and_layers_placed_by_block(tmp_path):
    assert export("funnel_base", tmp_path / "base").returncode == 0
    cfg = json.loads((tmp_path / "base" / "config.json").read_text())
    assert (cfg["block_sizes"], cfg["block_repeats"], cfg["num_decoder_layers"]) == ([2, 1], [2, 1], 0)
    assert (cfg["hidden_act"], cfg["layer_norm_eps"], cfg["attention_type"]) == ("gelu_new", 1e-8, "factorized")
    assert (cfg["hidden_dropout"], cfg["attention_dropout"], cfg["initializer_std"]) == (0.1, 0.1, 0.02)
    assert "d_embed" not in cfg and "block_size" not in cfg and "init" not in cfg
    maps = {m["tf"]: m["hf"] for m in _dry("funnel", tmp_path)["mapping"]}
    assert maps["model/encoder/layer_2/rel_attn/q/kernel"] == "encoder.blocks.1.1.attention.q_head.weight"
    assert maps["model/decoder/layer_3/ff/layer_1/kernel"] == "decoder.layers.0.ffn.linear_1.weight"
    doc = _dry("funnel", tmp_path, "--arch", "funnel-base")  # the decoder left out, saying why
    assert doc["architecture"] == "FunnelBaseModel"
    assert {d["tf"]: d["why"] for d in doc["dropped"]}["model/decoder/layer_3/rel_attn/o/bias"].startswith(
        "FunnelBaseModel has no decoder")


@pytest.mark.parametrize("block_size, said", [("2_2", "decoder layer 3 does not fit block_sizes [2, 2]"),
                                              ("1_1", "encoder layer 2 does not fit block_sizes [1, 1]"),
                                              ("1_two", "is not Funnel's")])
def test_funnel_blocks_must_fit(block_size, said, tmp_path):
    d = tmp_path / "net_config.json"
    d.write_text(json.dumps(dict(json.loads((DATA / "funnel" / "net_config.json").read_text()), block_size=block_size)))
    r = completed("convert", DATA / "funnel" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1 and said in r.stderr, r.stderr


def test_canine_heads_left_out_and_config_from_the_tensors(tmp_path):
    doc = _dry("canine", tmp_path)
    why = {d["tf"]: d["why"] for d in doc["dropped"]}
    assert why["char_output_weights"] == why["cls/predictions/output_bias"] == "a pretraining head: 4.57's loader leaves it out"
    maps = {m["tf"]: (m["hf"], m["transform"]) for m in doc["mapping"]}
    assert maps["initial_char_encoder/initial_char_encoder/chars_to_molecules/conv/kernel"] == (
        "chars_to_molecules.conv.weight", "transpose")
    assert maps["final_char_encoder/LayerNorm/gamma"][0] == "projection.LayerNorm.weight"
    assert maps["final_char_encoder/layer_0/output/dense/kernel"][0] == "final_char_encoder.layer.0.output.dense.weight"
    cfg = json.loads((DATA / "canine" / "config.json").read_text())
    for k in ("num_hash_functions", "num_hash_buckets", "downsampling_rate", "upsampling_kernel_size", "num_hidden_layers"):
        del cfg[k]
    del cfg["model_type"]  # transformers' names without a model_type: the code's tanh gelu
    d = tmp_path / "c.json"
    d.write_text(json.dumps(cfg))
    r = completed("convert", DATA / "canine" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (out["num_hash_functions"], out["num_hash_buckets"], out["downsampling_rate"], out["upsampling_kernel_size"],
            out["num_hidden_layers"], out["hidden_act"]) == (2, 16, 2, 3, 2, "gelu_new")


def test_big_bird_per_head_kernels_and_config(tmp_path):
    doc = _dry("big_bird", tmp_path)
    maps = {m["tf"]: (m["hf"], m["shape"], m["transform"]) for m in doc["mapping"]}
    assert maps["bert/encoder/layer_0/attention/self/query/kernel"] == (
        "bert.encoder.layer.0.attention.self.query.weight", [8, 8], "merge axes at 1, transpose")
    assert maps["bert/encoder/layer_0/attention/output/dense/kernel"][2] == "merge axes at -1, transpose"
    assert maps["bert/encoder/LayerNorm/gamma"][0] == "bert.embeddings.LayerNorm.weight"
    assert maps["bert/pooler/dense/kernel"][0] == "bert.pooler.weight"
    cfg = json.loads((DATA / "big_bird" / "bert_config.json").read_text())
    del cfg["num_attention_heads"]  # the per-head kernels tell it
    d = tmp_path / "bert_config.json"
    d.write_text(json.dumps(cfg))
    r = completed("convert", DATA / "big_bird" / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d,
                  "--vocab", DATA / "big_bird" / "spiece.model")
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (out["num_attention_heads"], out["hidden_act"], out["attention_type"]) == (2, "gelu_new", "block_sparse")
    tok = json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())
    assert (tok["tokenizer_class"], tok["cls_token"]) == ("BigBirdTokenizer", "[CLS]")
    assert (tmp_path / "out" / "spiece.model").is_file()


@pytest.mark.parametrize("name, config, key", [("tapas", "bert_config.json", "hidden_act"),
                                               ("funnel", "net_config.json", "ff_activation")])
def test_a_release_activation_its_code_lacks_is_refused(name, config, key, tmp_path):
    d = tmp_path / config
    d.write_text(json.dumps(dict(json.loads((DATA / name / config).read_text()), **{key: "swish"})))
    r = completed("convert", DATA / name / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d)
    assert r.returncode == 1 and f"config's {key} is 'swish'" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()
