#!/usr/bin/env python
"""Write more ``convert --to hf`` fixtures in tests/data/hf/ (issue 51: the families whose TF loaders
transformers 5 dropped), as generate_hf.py writes its own: a small TF checkpoint under the release's
variable names, written by TensorFlow, the release's config (or an HF ``config.json`` where the model
has no TF release), a vocabulary, and what transformers 4.57.6's own loader puts in the model.

    VENV=/root/v/tf   # tensorflow-cpu==2.21.0, transformers==4.57.6, torch==2.13.0
    $VENV/bin/python tests/tf_fixtures/generate_hf_more.py [--out tests/data/hf] [--only CASE ...]

Beside generate_hf.py's files each case has:

``forward.npz``
    ``in:NAME`` the inputs and ``out:NAME`` the outputs of the 4.57 model (eval mode) holding what the
    loader set, for transformers 5's forward to be held to (tests/hf/test_families.py).
``case.json``
    also ``loader`` (the 4.57 function), ``model`` (the class it fills), ``hidden`` (variables the
    loader is not shown: ones it cannot place, which ckptool places by the model code; listed in
    ``by_hand`` with the weights they become) and ``computed`` (weights the model computes itself:
    RoFormer's sinusoidal table, in ``expected.safetensors`` as the 4.57 model computed it).
"""

import argparse
import inspect
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate_hf as g  # noqa: E402

tf, torch, T = g.tf, g.torch, g.T
OUT = g.OUT
SEQ = 7


def loader_fn(name):
    """transformers 4.57's ``load_tf_weights_in_FAMILY``, from the family's modeling module."""
    import importlib

    fam = name.removeprefix("load_tf_weights_in_")
    return getattr(importlib.import_module(f"transformers.models.{fam}.modeling_{fam}"), name)


def run_loader(d, loader, model, config, hidden=()):
    """``loader(model, config, d/model.ckpt)`` with ``hidden`` left out of TF's listing."""
    real = tf.train.list_variables
    tf.train.list_variables = g._listing_without(set(hidden))
    try:
        fn = loader_fn(loader)
        if "config" in inspect.signature(fn).parameters:
            fn(model, config, os.path.join(d, "model.ckpt"))
        else:  # BigBird's: (model, tf_checkpoint_path)
            fn(model, tf_checkpoint_path=os.path.join(d, "model.ckpt"))
    finally:
        tf.train.list_variables = real


def forward(d, model, inputs):
    model.eval()
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    arrays = {f"in:{k}": v for k, v in inputs.items()}
    for k, v in out.items():
        if isinstance(v, torch.Tensor):
            arrays[f"out:{k}"] = v.numpy()
    np.savez(os.path.join(d, "forward.npz"), **arrays)


def untied(model, tensors):
    """``tensors`` without a later alias of an earlier entry's storage (a tied decoder), as
    save_pretrained leaves them out."""
    seen, out = set(), {}
    for k, v in model.state_dict().items():
        if k in tensors and v.data_ptr() not in seen:
            seen.add(v.data_ptr())
            out[k] = tensors[k]
    return out


def finish(d, model, tensors, args, loader, hidden=(), by_hand=(), computed=()):
    cls = type(model).__name__
    tensors = untied(model, tensors)
    g.finish(d, model, tensors, "model.ckpt", args, cls, f"{loader}({cls})", by_hand)
    path = os.path.join(d, "case.json")
    with open(path) as f:
        case = json.load(f)
    case.update(loader=loader, model=cls, hidden=sorted(hidden), computed=sorted(computed))
    g.write_json(path, case)


def ids(rng, vocab, n=SEQ):
    return rng.integers(1, vocab, size=(2, n)).astype(np.int64)


def _vocab(d):
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(g.VOCAB) + "\n")


def mlm_head(a, H, V, E=None):
    E = E or H
    a.add("cls/predictions/transform/dense/kernel", H, E)
    a.add("cls/predictions/transform/dense/bias", E)
    a.add("cls/predictions/transform/LayerNorm/beta", E)
    a.add("cls/predictions/transform/LayerNorm/gamma", E)
    a.add("cls/predictions/output_bias", V)


# --------------------------------------------------------------------------- RoFormer (bert4keras)


ROFORMER = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
                max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, initializer_range=0.02)


def roformer(d):
    """bert4keras's RoFormer: Google BERT's names, no position embeddings, the MLM head; the release's
    bert_config.json (no model_type, no embedding_size)."""
    a = g.Arrays(21)
    g.bert_body(a, "bert", ROFORMER)
    del a["bert/embeddings/position_embeddings"], a["bert/pooler/dense/kernel"], a["bert/pooler/dense/bias"]
    mlm_head(a, 8, 24)
    g.adam(a, ["bert/encoder/layer_1/output/dense/kernel"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), ROFORMER)
    _vocab(d)
    config = T.RoFormerConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = g.nan_model(T.RoFormerForMaskedLM(config))
    run_loader(d, "load_tf_weights_in_roformer", model, config)
    table = "roformer.encoder.embed_positions.weight"
    fresh = T.RoFormerForMaskedLM(config).state_dict()[table]
    with torch.no_grad():
        model.state_dict()[table].copy_(fresh)  # computed at construction; the loader leaves it
    forward(d, model, {"input_ids": ids(np.random.default_rng(1), 24), "token_type_ids": np.zeros((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "vocab.txt"],
           "load_tf_weights_in_roformer", computed=[table])


def roformer_small(d):
    """Embeddings narrower than the layers (bert4keras's embedding_hidden_mapping_in), which 4.57's
    loader cannot place (it looks in the encoder, then fails): shown to it without that layer, the
    layer set by hand as the model holds it (embeddings_project = kernel transposed)."""
    a = g.Arrays(36)
    cfg = dict(ROFORMER, embedding_size=6)
    g.bert_body(a, "bert", ROFORMER)
    for k in ("word_embeddings", "token_type_embeddings"):
        a[f"bert/embeddings/{k}"] = a.rng.standard_normal((a[f"bert/embeddings/{k}"].shape[0], 6)).astype(np.float32)
    for k in ("beta", "gamma"):
        a[f"bert/embeddings/LayerNorm/{k}"] = a.rng.standard_normal(6).astype(np.float32)
    del a["bert/embeddings/position_embeddings"], a["bert/pooler/dense/kernel"], a["bert/pooler/dense/bias"]
    a.add("bert/encoder/embedding_hidden_mapping_in/kernel", 6, 8)
    a.add("bert/encoder/embedding_hidden_mapping_in/bias", 8)
    mlm_head(a, 8, 24, E=6)
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), cfg)
    config = T.RoFormerConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = g.nan_model(T.RoFormerForMaskedLM(config))
    hidden = ["bert/encoder/embedding_hidden_mapping_in/kernel", "bert/encoder/embedding_hidden_mapping_in/bias"]
    run_loader(d, "load_tf_weights_in_roformer", model, config, hidden)
    table = "roformer.encoder.embed_positions.weight"
    by_hand = {"roformer.embeddings_project.weight": a[hidden[0]].T, "roformer.embeddings_project.bias": a[hidden[1]],
               table: T.RoFormerForMaskedLM(config).state_dict()[table].numpy()}
    with torch.no_grad():
        for k, v in by_hand.items():
            model.state_dict()[k].copy_(torch.from_numpy(np.ascontiguousarray(v)))
    forward(d, model, {"input_ids": ids(np.random.default_rng(8), 24), "token_type_ids": np.zeros((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json"], "load_tf_weights_in_roformer", hidden,
           by_hand=[k for k in by_hand if k != table], computed=[table])


# --------------------------------------------------------------------------- Megatron-BERT


MEGATRON = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
                max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)


def megatron_bert(d):
    """No TF release: Google BERT's names for MegatronBertForPreTraining's own modules (pre-norm)."""
    a = g.Arrays(22)
    H, FF, V = 8, 12, 24
    a.add("bert/embeddings/word_embeddings", V, H)
    a.add("bert/embeddings/position_embeddings", 16, H)
    a.add("bert/embeddings/token_type_embeddings", 2, H)
    for n in range(2):
        p = f"bert/encoder/layer_{n}"
        a.add(f"{p}/attention/ln/gamma", H)
        a.add(f"{p}/attention/ln/beta", H)
        for q in ("query", "key", "value"):
            a.add(f"{p}/attention/self/{q}/kernel", H, H)
            a.add(f"{p}/attention/self/{q}/bias", H)
        a.add(f"{p}/attention/output/dense/kernel", H, H)
        a.add(f"{p}/attention/output/dense/bias", H)
        a.add(f"{p}/ln/gamma", H)
        a.add(f"{p}/ln/beta", H)
        a.add(f"{p}/intermediate/dense/kernel", H, FF)
        a.add(f"{p}/intermediate/dense/bias", FF)
        a.add(f"{p}/output/dense/kernel", FF, H)
        a.add(f"{p}/output/dense/bias", H)
    a.add("bert/encoder/ln/gamma", H)
    a.add("bert/encoder/ln/beta", H)
    a.add("bert/pooler/dense/kernel", H, H)
    a.add("bert/pooler/dense/bias", H)
    mlm_head(a, H, V)
    a.add("cls/seq_relationship/output_weights", 2, H)
    a.add("cls/seq_relationship/output_bias", 2)
    g.adam(a, ["bert/encoder/ln/gamma"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), MEGATRON)
    _vocab(d)
    config = T.MegatronBertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = g.nan_model(T.MegatronBertForPreTraining(config))
    run_loader(d, "load_tf_weights_in_megatron_bert", model, config)
    forward(d, model, {"input_ids": ids(np.random.default_rng(2), V), "token_type_ids": np.ones((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "vocab.txt"],
           "load_tf_weights_in_megatron_bert")


# --------------------------------------------------------------------------- RoCBERT


ROC = dict(model_type="roc_bert", vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
           intermediate_size=12, max_position_embeddings=16, type_vocab_size=2, pronunciation_vocab_size=10,
           pronunciation_embed_dim=4, shape_vocab_size=12, shape_embed_dim=6, concat_input=True)


def roc_bert(d):
    """No TF release: Google BERT's names for RoCBertForPreTraining's modules under roc_bert/, its two
    extra tables as Keras names a table's weight (``.../shape_embed/embeddings``); an HF config.json."""
    a = g.Arrays(23)
    g.bert_body(a, "roc_bert", ROC)
    a.add("roc_bert/embeddings/pronunciation_embed/embeddings", 10, 4)
    a.add("roc_bert/embeddings/shape_embed/embeddings", 12, 6)
    a.add("roc_bert/embeddings/map_inputs_layer/kernel", 8 + 4 + 6, 8)
    a.add("roc_bert/embeddings/map_inputs_layer/bias", 8)
    mlm_head(a, 8, 24)
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "config.json"), ROC)
    config = T.RoCBertConfig.from_json_file(os.path.join(d, "config.json"))
    model = g.nan_model(T.RoCBertForPreTraining(config))
    hidden = ["roc_bert/embeddings/pronunciation_embed/embeddings", "roc_bert/embeddings/shape_embed/embeddings"]
    run_loader(d, "load_tf_weights_in_roc_bert", model, config, hidden)
    by_hand = {"roc_bert.embeddings.pronunciation_embed.weight": hidden[0],
               "roc_bert.embeddings.shape_embed.weight": hidden[1]}
    with torch.no_grad():
        for k, n in by_hand.items():
            model.state_dict()[k].copy_(torch.from_numpy(a[n]))  # the table as stored (what the model holds)
    rng = np.random.default_rng(3)
    forward(d, model, {"input_ids": ids(rng, 24), "input_shape_ids": ids(rng, 12),
                       "input_pronunciation_ids": ids(rng, 10)})
    finish(d, model, g.expected(model), ["--config", "config.json"], "load_tf_weights_in_roc_bert", hidden,
           by_hand=list(by_hand))


# --------------------------------------------------------------------------- TAPAS (google-research/tapas)


TAPAS = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
             hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
             max_position_embeddings=16, type_vocab_size=[3, 4, 4, 2, 4, 4, 5], initializer_range=0.02,
             softmax_temperature=1.0)


def _tapas_body(a, pooler=True):
    g.bert_body(a, "bert", dict(TAPAS, type_vocab_size=2))
    del a["bert/embeddings/token_type_embeddings"]
    for i, n in enumerate(TAPAS["type_vocab_size"]):
        a.add(f"bert/embeddings/token_type_embeddings_{i}", n, 8)
    if not pooler:
        del a["bert/pooler/dense/kernel"], a["bert/pooler/dense/bias"]


def _tapas_config(d):
    """The release's bert_config.json as ckptool reads it: the seven sizes, gelu as TAPAS computes it
    (tanh: gelu_new); what 4.57's model is built with."""
    g.write_json(os.path.join(d, "bert_config.json"), TAPAS)
    kw = {k: v for k, v in TAPAS.items() if k not in ("type_vocab_size", "softmax_temperature")}
    return T.TapasConfig(**dict(kw, type_vocab_sizes=TAPAS["type_vocab_size"], hidden_act="gelu_new"))


def _tapas_inputs(rng, n=SEQ):
    types = np.stack([rng.integers(0, k, size=(2, n)) for k in TAPAS["type_vocab_size"]], axis=-1)
    return {"input_ids": ids(rng, 24, n), "attention_mask": np.ones((2, n), np.int64),
            "token_type_ids": types.astype(np.int64)}


def tapas(d):
    """TAPAS's pretrained MLM checkpoint: pooler and NSP head beside the MLM head (both left out)."""
    a = g.Arrays(24)
    _tapas_body(a)
    mlm_head(a, 8, 24)
    a.add("cls/seq_relationship/output_weights", 2, 8)
    a.add("cls/seq_relationship/output_bias", 2)
    g.adam(a, ["bert/embeddings/token_type_embeddings_3"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    config = _tapas_config(d)
    _vocab(d)
    model = g.nan_model(T.TapasForMaskedLM(config))
    run_loader(d, "load_tf_weights_in_tapas", model, config)
    forward(d, model, _tapas_inputs(np.random.default_rng(4)))
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "vocab.txt"],
           "load_tf_weights_in_tapas")


def tapas_wtq(d):
    """A WTQ-style fine-tuned checkpoint: cell selection, column selection and aggregation heads."""
    a = g.Arrays(25)
    _tapas_body(a)
    a.add("output_weights", 8)
    a["output_bias"] = np.float32(0.25)
    a.add("column_output_weights", 8)
    a["column_output_bias"] = np.float32(-0.5)
    a.add("output_weights_agg", 4, 8)
    a.add("output_bias_agg", 4)
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    config = _tapas_config(d)
    config.num_aggregation_labels = 4
    model = g.nan_model(T.TapasForQuestionAnswering(config))
    run_loader(d, "load_tf_weights_in_tapas", model, config)
    forward(d, model, _tapas_inputs(np.random.default_rng(5)))
    finish(d, model, g.expected(model), ["--config", "bert_config.json"], "load_tf_weights_in_tapas")


def tapas_tabfact(d):
    """A TabFact-style fine-tuned checkpoint: the classification head output_weights_cls [labels, hidden]."""
    a = g.Arrays(37)
    _tapas_body(a)
    a.add("output_weights_cls", 2, 8)
    a.add("output_bias_cls", 2)
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    config = _tapas_config(d)
    config.num_labels = 2
    model = g.nan_model(T.TapasForSequenceClassification(config))
    run_loader(d, "load_tf_weights_in_tapas", model, config)
    forward(d, model, _tapas_inputs(np.random.default_rng(9)))
    finish(d, model, g.expected(model), ["--config", "bert_config.json"], "load_tf_weights_in_tapas")


# --------------------------------------------------------------------------- RemBERT


REMBERT = dict(vocab_size=32, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
               input_embedding_size=6, output_embedding_size=10, max_position_embeddings=16, type_vocab_size=2,
               hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
               layer_norm_eps=1e-12)


def rembert(d):
    """RemBERT's release: decoupled embeddings, the output embedding and MLM bias (which 4.57 leaves out)."""
    a = g.Arrays(26)
    E = 6
    a.add("bert/embeddings/word_embeddings", 32, E)
    a.add("bert/embeddings/token_type_embeddings", 2, E)
    a.add("bert/embeddings/position_embeddings", 16, E)
    a.add("bert/embeddings/LayerNorm/beta", E)
    a.add("bert/embeddings/LayerNorm/gamma", E)
    a.add("bert/encoder/embedding_hidden_mapping_in/kernel", E, 8)
    a.add("bert/encoder/embedding_hidden_mapping_in/bias", 8)
    body = g.Arrays(27)
    g.bert_body(body, "bert", dict(REMBERT, vocab_size=32))
    for k, v in body.items():
        if "/encoder/" in k or "/pooler/" in k:
            a[k] = v
    a.add("bert/embeddings/output_embedding", 32, 10)
    a.add("cls/predictions/output_bias", 32)
    g.adam(a, ["bert/encoder/embedding_hidden_mapping_in/kernel"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), REMBERT)
    # the tiny SentencePiece model generate_hf.py trained for T5 (32 pieces; sentencepiece need not be here)
    shutil.copy(os.path.join(OUT, "t5_v1_1", "spiece.model"), os.path.join(d, "sentencepiece.model"))
    config = T.RemBertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = g.nan_model(T.RemBertModel(config))
    run_loader(d, "load_tf_weights_in_rembert", model, config)
    forward(d, model, {"input_ids": ids(np.random.default_rng(6), 32), "token_type_ids": np.ones((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "sentencepiece.model"],
           "load_tf_weights_in_rembert")


# --------------------------------------------------------------------------- ConvBERT (yitu-opensource/ConvBert)


CONVBERT = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
                max_position_embeddings=16, type_vocab_size=2, head_ratio=2, conv_kernel_size=3)


def _convbert_arrays(seed, cfg):
    """The discriminator's body under electra/ (ConvBERT's names), and a generator beside it."""
    a = g.Arrays(seed)
    H, FF, E, k, G = cfg["hidden_size"], cfg["intermediate_size"], cfg["embedding_size"], 3, cfg["num_groups"]
    inner = (cfg["num_attention_heads"] // cfg["head_ratio"]) * (H // cfg["num_attention_heads"])
    conv = cfg["num_attention_heads"] // cfg["head_ratio"] * k
    a.add("electra/embeddings/word_embeddings", 24, E)
    a.add("electra/embeddings/token_type_embeddings", 2, E)
    a.add("electra/embeddings/position_embeddings", 16, E)
    a.add("electra/embeddings/LayerNorm/beta", E)
    a.add("electra/embeddings/LayerNorm/gamma", E)
    if E != H:
        a.add("electra/embeddings_project/kernel", E, H)
        a.add("electra/embeddings_project/bias", H)
    for n in range(cfg["num_hidden_layers"]):
        p = f"electra/encoder/layer_{n}"
        for q in ("query", "key", "value"):
            a.add(f"{p}/attention/self/{q}/kernel", H, inner)
            a.add(f"{p}/attention/self/{q}/bias", inner)
        a.add(f"{p}/attention/self/conv_attn_key/depthwise_kernel", k, H, 1)
        a.add(f"{p}/attention/self/conv_attn_key/pointwise_kernel", 1, H, inner)
        a.add(f"{p}/attention/self/conv_attn_key/bias", inner)
        a.add(f"{p}/attention/self/conv_attn_kernel/kernel", inner, conv)
        a.add(f"{p}/attention/self/conv_attn_kernel/bias", conv)
        a.add(f"{p}/attention/self/conv_attn_point/kernel", H, inner)
        a.add(f"{p}/attention/self/conv_attn_point/bias", inner)
        a.add(f"{p}/attention/output/dense/kernel", H, H)
        a.add(f"{p}/attention/output/dense/bias", H)
        a.add(f"{p}/attention/output/LayerNorm/beta", H)
        a.add(f"{p}/attention/output/LayerNorm/gamma", H)
        if G > 1:
            a.add(f"{p}/intermediate/g_dense/kernel", G, H // G, FF // G)
            a.add(f"{p}/intermediate/g_dense/bias", FF)
            a.add(f"{p}/output/g_dense/kernel", G, FF // G, H // G)
            a.add(f"{p}/output/g_dense/bias", H)
        else:
            a.add(f"{p}/intermediate/dense/kernel", H, FF)
            a.add(f"{p}/intermediate/dense/bias", FF)
            a.add(f"{p}/output/dense/kernel", FF, H)
            a.add(f"{p}/output/dense/bias", H)
        a.add(f"{p}/output/LayerNorm/beta", H)
        a.add(f"{p}/output/LayerNorm/gamma", H)
    a.add("generator/encoder/layer_0/attention/self/query/kernel", 4, 4)
    a.add("generator_predictions/output_bias", 24)
    a.add("discriminator_predictions/dense/kernel", H, H)
    a.add("discriminator_predictions/dense_1/kernel", H, 1)
    return a


def _convbert(d, seed, cfg, config_file, doc):
    a = _convbert_arrays(seed, cfg)
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, config_file), doc)
    _vocab(d)
    config = T.ConvBertConfig(**cfg)
    model = g.nan_model(T.ConvBertModel(config))
    run_loader(d, "load_tf_weights_in_convbert", model, config)
    forward(d, model, {"input_ids": ids(np.random.default_rng(seed), 24), "token_type_ids": np.ones((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", config_file, "--vocab", "vocab.txt"], "load_tf_weights_in_convbert")


def convbert(d):
    """Embeddings narrower than the layers, ungrouped; a JSON of transformers' names (no model_type;
    ConvBERT's modeling.py computes gelu with erf: transformers' gelu)."""
    cfg = dict(CONVBERT, embedding_size=6, num_groups=1)
    _convbert(d, 28, dict(cfg, hidden_act="gelu"), "convbert_config.json", dict(cfg, hidden_act="gelu"))


def convbert_grouped(d):
    """Grouped feed-forward (num_groups 2); an HF config.json (its gelu as it says)."""
    cfg = dict(CONVBERT, embedding_size=8, num_groups=2, hidden_act="gelu")
    _convbert(d, 29, cfg, "config.json", T.ConvBertConfig(**cfg).to_dict())


# --------------------------------------------------------------------------- MobileBERT (google-research)


MOBILEBERT = dict(vocab_size=24, embedding_size=4, hidden_size=8, intra_bottleneck_size=6, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=16, num_feedforward_networks=3, max_position_embeddings=16,
                  type_vocab_size=2, hidden_act="relu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.1,
                  initializer_range=0.02, trigram_input=True, use_bottleneck=True, use_bottleneck_attention=False,
                  key_query_shared_bottleneck=True, normalization_type="no_norm", classifier_activation=False)


def mobilebert(d):
    """MobileBERT's pretraining release: bottlenecks, stacked FFNs, FakeLayerNorm, extra_output_weights."""
    a = g.Arrays(30)
    V, E, H, B, FF = 24, 4, 8, 6, 16

    def fake(scope, n):
        a.add(f"{scope}/FakeLayerNorm/beta", n)
        a.add(f"{scope}/FakeLayerNorm/gamma", n)

    def dense(scope, i, o):
        a.add(f"{scope}/kernel", i, o)
        a.add(f"{scope}/bias", o)
    a.add("bert/embeddings/word_embeddings", V, E)
    a.add("bert/embeddings/position_embeddings", 16, H)
    a.add("bert/embeddings/token_type_embeddings", 2, H)
    dense("bert/embeddings/embedding_transformation", 3 * E, H)
    fake("bert/embeddings", H)
    for n in range(2):
        p = f"bert/encoder/layer_{n}"
        dense(f"{p}/attention/self/query", B, B)
        dense(f"{p}/attention/self/key", B, B)
        dense(f"{p}/attention/self/value", H, B)
        dense(f"{p}/attention/output/dense", B, B)
        fake(f"{p}/attention/output", B)
        dense(f"{p}/intermediate/dense", B, FF)
        dense(f"{p}/output/dense", FF, B)
        fake(f"{p}/output", B)
        dense(f"{p}/output/bottleneck/dense", B, H)
        fake(f"{p}/output/bottleneck", H)
        for part in ("input", "attention"):
            dense(f"{p}/bottleneck/{part}/dense", H, B)
            fake(f"{p}/bottleneck/{part}", B)
        for i in range(2):
            dense(f"{p}/ffn_layer_{i}/intermediate/dense", B, FF)
            dense(f"{p}/ffn_layer_{i}/output/dense", FF, B)
            fake(f"{p}/ffn_layer_{i}/output", B)
    # classifier_activation false: the pooler is the first token as it is, no dense layer
    dense("cls/predictions/transform/dense", H, H)
    a.add("cls/predictions/transform/LayerNorm/beta", H)
    a.add("cls/predictions/transform/LayerNorm/gamma", H)
    a.add("cls/predictions/output_bias", V)
    a.add("cls/predictions/extra_output_weights", V, H - E)
    a.add("cls/seq_relationship/output_weights", 2, H)
    a.add("cls/seq_relationship/output_bias", 2)
    g.adam(a, ["bert/encoder/layer_1/ffn_layer_1/output/dense/kernel"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), MOBILEBERT)
    _vocab(d)
    config = T.MobileBertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = g.nan_model(T.MobileBertForPreTraining(config))
    run_loader(d, "load_tf_weights_in_mobilebert", model, config)
    forward(d, model, {"input_ids": ids(np.random.default_rng(7), V), "token_type_ids": np.ones((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "vocab.txt"],
           "load_tf_weights_in_mobilebert")


# --------------------------------------------------------------------------- Funnel-Transformer


def _funnel_net(block_size, decoder_size):
    """The release's net_config.json (ModelConfig.keys)."""
    return {"block_size": block_size, "vocab_size": 24, "d_embed": 8, "d_model": 8, "n_head": 2, "d_head": 4,
            "d_inner": 16, "ff_activation": "gelu", "dropout": 0.1, "dropatt": 0.1, "dropact": 0.0,
            "init": "truncated_normal", "init_std": 0.02, "init_range": 0.1, "rel_attn_type": "factorized",
            "separate_cls": True, "pooling_type": "mean", "pooling_size": 2, "pool_q_only": True,
            "decoder_size": decoder_size}


def _funnel_arrays(seed, n_layers):
    """Funnel-Transformer's names: layers numbered across the encoder's blocks, the decoder's after."""
    a = g.Arrays(seed)
    D, N, Hd, FF = 8, 2, 4, 16
    a.add("model/input/word_embedding/lookup_table", 24, D)
    a.add("model/input/layer_norm/beta", D)
    a.add("model/input/layer_norm/gamma", D)
    for part, idx in n_layers:
        t = f"model/{part}/layer_{idx}"
        a.add(f"{t}/rel_attn/q/kernel", D, N, Hd)
        for q in "kv":
            a.add(f"{t}/rel_attn/{q}/kernel", D, N, Hd)
            a.add(f"{t}/rel_attn/{q}/bias", N, Hd)
        a.add(f"{t}/rel_attn/o/kernel", N, Hd, D)
        a.add(f"{t}/rel_attn/o/bias", D)
        a.add(f"{t}/rel_attn/r/kernel", D, N, Hd)
        for b in ("r_w_bias", "r_r_bias", "r_s_bias"):
            a.add(f"{t}/rel_attn/{b}", N, Hd)
        a.add(f"{t}/rel_attn/seg_embed", 2, N, Hd)
        a.add(f"{t}/rel_attn/layer_norm/beta", D)
        a.add(f"{t}/rel_attn/layer_norm/gamma", D)
        a.add(f"{t}/ff/layer_1/kernel", D, FF)
        a.add(f"{t}/ff/layer_1/bias", FF)
        a.add(f"{t}/ff/layer_2/kernel", FF, D)
        a.add(f"{t}/ff/layer_2/bias", D)
        a.add(f"{t}/ff/layer_norm/beta", D)
        a.add(f"{t}/ff/layer_norm/gamma", D)
    return a


def _funnel(d, seed, net, layers, cls, **hf):
    a = _funnel_arrays(seed, layers)
    a.add("generator/encoder/layer_0/ff/layer_1/kernel", 4, 4)  # ELECTRA-style pretraining's generator
    g.adam(a, ["model/input/layer_norm/gamma"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "net_config.json"), net)
    _vocab(d)
    # net_config.json as ckptool translates it (Funnel's tanh gelu, its layer norm's 1e-8)
    config = T.FunnelConfig(vocab_size=24, d_model=8, n_head=2, d_head=4, d_inner=16, hidden_act="gelu_new",
                            hidden_dropout=0.1, attention_dropout=0.1, activation_dropout=0.0, initializer_range=0.1,
                            initializer_std=0.02, attention_type="factorized", separate_cls=True, pooling_type="mean",
                            pool_q_only=True, layer_norm_eps=1e-8, **hf)
    model = g.nan_model(getattr(T, cls)(config))
    run_loader(d, "load_tf_weights_in_funnel", model, config)
    rng = np.random.default_rng(seed)
    forward(d, model, {"input_ids": ids(rng, 24, 8), "token_type_ids": rng.integers(0, 2, (2, 8)).astype(np.int64)})
    finish(d, model, g.expected(model), ["--config", "net_config.json", "--vocab", "vocab.txt"],
           "load_tf_weights_in_funnel")


def funnel(d):
    """Two blocks (1 and 2 layers), a one-layer decoder numbered after them: FunnelModel."""
    layers = [("encoder", 0), ("encoder", 1), ("encoder", 2), ("decoder", 3)]
    _funnel(d, 31, _funnel_net("1_2", "1"), layers, "FunnelModel", block_sizes=[1, 2], num_decoder_layers=1)


def funnel_base(d):
    """No decoder; a block of 2 layers each repeated twice ("2x2_1"): FunnelBaseModel."""
    layers = [("encoder", 0), ("encoder", 1), ("encoder", 2)]
    _funnel(d, 32, _funnel_net("2x2_1", "0"), layers, "FunnelBaseModel", block_sizes=[2, 1], block_repeats=[2, 1],
            num_decoder_layers=0)


# --------------------------------------------------------------------------- CANINE (google-research/language)


CANINE = dict(model_type="canine", hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
              max_position_embeddings=16, type_vocab_size=2, downsampling_rate=2, upsampling_kernel_size=3,
              local_transformer_stride=4, num_hash_functions=2, num_hash_buckets=16, hidden_act="gelu")


def _canine_layer(a, t, H=8, FF=16):
    for q in ("query", "key", "value"):
        a.add(f"{t}/attention/self/{q}/kernel", H, H)
        a.add(f"{t}/attention/self/{q}/bias", H)
    a.add(f"{t}/attention/output/dense/kernel", H, H)
    a.add(f"{t}/attention/output/dense/bias", H)
    a.add(f"{t}/attention/output/LayerNorm/beta", H)
    a.add(f"{t}/attention/output/LayerNorm/gamma", H)
    a.add(f"{t}/intermediate/dense/kernel", H, FF)
    a.add(f"{t}/intermediate/dense/bias", FF)
    a.add(f"{t}/output/dense/kernel", FF, H)
    a.add(f"{t}/output/dense/bias", H)
    a.add(f"{t}/output/LayerNorm/beta", H)
    a.add(f"{t}/output/LayerNorm/gamma", H)


def canine(d):
    """CANINE-C's names: hashed embedders, the local encoders, the strided convolutions, the MLM-side
    heads (left out); an HF config.json (CANINE has no release config file)."""
    a = g.Arrays(33)
    H = 8
    for k in range(2):
        a.add(f"char_embeddings/embeddings/HashBucketCodepointEmbedder_{k}", 16, H // 2)
    a.add("char_embeddings/char_position_embeddings", 16, H)
    a.add("char_embeddings/segment_embeddings", 2, H)
    a.add("char_embeddings/LayerNorm/beta", H)
    a.add("char_embeddings/LayerNorm/gamma", H)
    _canine_layer(a, "initial_char_encoder/layer_0")
    c2m = "initial_char_encoder/initial_char_encoder/chars_to_molecules"
    a.add(f"{c2m}/conv/kernel", 2, H, H)
    a.add(f"{c2m}/conv/bias", H)
    a.add(f"{c2m}/LayerNorm/beta", H)
    a.add(f"{c2m}/LayerNorm/gamma", H)
    for n in range(2):  # transformer_model under "bert": no "encoder" scope
        _canine_layer(a, f"bert/layer_{n}")
    a.add("final_char_encoder/conv/kernel", 3, 2 * H, H)
    a.add("final_char_encoder/conv/bias", H)
    a.add("final_char_encoder/LayerNorm/beta", H)
    a.add("final_char_encoder/LayerNorm/gamma", H)
    _canine_layer(a, "final_char_encoder/layer_0")
    a.add("pooler/dense/kernel", H, H)
    a.add("pooler/dense/bias", H)
    a.add("cls/predictions/output_bias", H)
    a.add("char_output_weights", 16, H)
    g.adam(a, ["bert/layer_1/output/dense/kernel"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "config.json"), CANINE)
    config = T.CanineConfig.from_json_file(os.path.join(d, "config.json"))
    model = g.nan_model(T.CanineModel(config))
    run_loader(d, "load_tf_weights_in_canine", model, config)
    rng = np.random.default_rng(33)
    forward(d, model, {"input_ids": rng.integers(32, 2000, (2, 8)).astype(np.int64),
                       "token_type_ids": rng.integers(0, 2, (2, 8)).astype(np.int64)})
    finish(d, model, g.expected(model), ["--config", "config.json"], "load_tf_weights_in_canine")


# --------------------------------------------------------------------------- BigBird (google-research/bigbird)


BIGBIRD = dict(vocab_size=32, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
               max_position_embeddings=64, type_vocab_size=2, hidden_act="gelu", attention_type="block_sparse",
               block_size=2, num_random_blocks=1, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def big_bird(d):
    """BigBird's pretraining release: per-head 3-D attention kernels, the embedding norm under encoder/;
    a bert_config.json of transformers' names whose gelu is the code's tanh form."""
    _big_bird(d, 34, flat=False, heads=True)


def big_bird_2d(d):
    """The later code's Dense3dLayer: the same kernels stored 2-D; no heads (BigBirdModel)."""
    _big_bird(d, 35, flat=True, heads=False)


def _big_bird(d, seed, flat, heads):
    a = g.Arrays(seed)
    H, N, Hd, FF, V = 8, 2, 4, 12, 32
    a.add("bert/embeddings/word_embeddings", V, H)
    a.add("bert/embeddings/position_embeddings", 64, H)
    a.add("bert/embeddings/token_type_embeddings", 2, H)
    a.add("bert/encoder/LayerNorm/beta", H)
    a.add("bert/encoder/LayerNorm/gamma", H)
    for n in range(2):
        p = f"bert/encoder/layer_{n}"
        for q in ("query", "key", "value"):
            a.add(f"{p}/attention/self/{q}/kernel", *((H, N * Hd) if flat else (H, N, Hd)))
            a.add(f"{p}/attention/self/{q}/bias", *((N * Hd,) if flat else (N, Hd)))
        a.add(f"{p}/attention/output/dense/kernel", *((N * Hd, H) if flat else (N, Hd, H)))
        a.add(f"{p}/attention/output/dense/bias", H)
        a.add(f"{p}/attention/output/LayerNorm/beta", H)
        a.add(f"{p}/attention/output/LayerNorm/gamma", H)
        a.add(f"{p}/intermediate/dense/kernel", H, FF)
        a.add(f"{p}/intermediate/dense/bias", FF)
        a.add(f"{p}/output/dense/kernel", FF, H)
        a.add(f"{p}/output/dense/bias", H)
        a.add(f"{p}/output/LayerNorm/beta", H)
        a.add(f"{p}/output/LayerNorm/gamma", H)
    a.add("bert/pooler/dense/kernel", H, H)
    a.add("bert/pooler/dense/bias", H)
    if heads:
        mlm_head(a, H, V)
        a.add("cls/seq_relationship/output_weights", 2, H)
        a.add("cls/seq_relationship/output_bias", 2)
    g.adam(a, ["bert/encoder/layer_0/attention/self/query/kernel"])
    g.save_v1(os.path.join(d, "model.ckpt"), a, extra=g.STEP)
    g.write_json(os.path.join(d, "bert_config.json"), BIGBIRD)
    shutil.copy(os.path.join(OUT, "t5_v1_1", "spiece.model"), os.path.join(d, "spiece.model"))
    config = T.BigBirdConfig(**dict(BIGBIRD, hidden_act="gelu_new"))
    model = g.nan_model((T.BigBirdForPreTraining if heads else T.BigBirdModel)(config))
    run_loader(d, "load_tf_weights_in_big_bird", model, config)
    forward(d, model, {"input_ids": ids(np.random.default_rng(34), V), "token_type_ids": np.ones((2, SEQ), np.int64)})
    finish(d, model, g.expected(model), ["--config", "bert_config.json", "--vocab", "spiece.model"],
           "load_tf_weights_in_big_bird")


CASES = {f.__name__: f for f in (roformer, roformer_small, megatron_bert, roc_bert, tapas, tapas_wtq, tapas_tabfact, rembert, convbert,
                                 convbert_grouped, mobilebert, funnel, funnel_base, canine, big_bird, big_bird_2d)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", nargs="*")
    opts = ap.parse_args()
    for name, fn in CASES.items():
        if opts.only and name not in opts.only:
            continue
        d = os.path.join(opts.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        torch.manual_seed(0)
        fn(d)


if __name__ == "__main__":
    main()
