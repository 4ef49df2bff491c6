#!/usr/bin/env python
"""Write the ``convert --to hf`` fixtures in tests/data/hf/: small TF checkpoints under each release's
real variable names, written by TensorFlow, and the weights transformers 4.57.6's own TF loaders
put in the model from them (the oracle), run once here under real TF.

    VENV=/work/venvs/hf-gen   # tensorflow-cpu==2.21.0, transformers==4.57.6, torch==2.13.0, sentencepiece
    $VENV/bin/python tests/tf_fixtures/generate_hf.py [--out tests/data/hf] [--only CASE ...]

For each CASE one directory ``<out>/CASE/`` gets:

``model.ckpt*`` (or ``ckpt-1*``)
    the checkpoint, TF1 ``Saver`` name-based (T5 and GPT-Neo: two data shards, as mesh TensorFlow
    writes them; bfloat16 where the case says) or, for the TF2 Model Garden encoder,
    ``tf.train.Checkpoint`` object-based; with the optimizer state and bookkeeping the release has.
the release's config
    ``bert_config.json``, ``albert_config.json``, ``operative_config.gin``, ``hparams.json``, a
    GPT-Neo run's JSON, or an HF ``config.json``; and a vocabulary where the case has one.
``expected.safetensors``
    every weight the loader set (parameters and buffers filled with NaN before, so what it did not
    set shows), under transformers' names, tied aliases left out as ``save_pretrained`` does.
``case.json``
    ``args`` (what follows ``ckptool convert SRC OUT --to hf``), ``src``, ``architecture``,
    ``oracle`` (which loader, on which model class) and ``by_hand``: weights the old loader could not
    place (BERT's fine-tuned heads), set here from the TF values by the obvious rule and listed.

The TF2 Model Garden encoder's oracle is transformers' ``convert_bert_original_tf2_checkpoint_to_pytorch``
(``load_tf2_weights_in_bert``), which the 4.46.3 wheel still ships: fetched with pip into a temporary
directory and imported from there (nothing of it is kept). It reads the Model Garden 2.3 layout
(``model/layer_with_weights-N/_attention_output_dense``); the later layout (``encoder/...``,
``_attention_layer/_output_dense``) holds the same weights, so its case is written under both names
and the oracle runs on the 2.3 one. Fixed seeds: reruns give the same values.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "hf")


class Arrays(dict):
    """name -> float32 array, filled from one seeded generator in insertion order."""

    def __init__(self, seed):
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def add(self, name, *shape):
        self[name] = self.rng.standard_normal(shape).astype(np.float32) * 0.5
        return self[name]


# --------------------------------------------------------------------------- writing TF checkpoints


def save_v1(prefix, arrays, *, shards=1, bf16=(), extra=()):
    """A TF1 Saver checkpoint of ``arrays`` (names as given); ``bf16`` names stored as bfloat16;
    ``extra``: (name, value, dtype) bookkeeping variables; ``shards`` > 1 spreads the variables over
    that many CPU devices, which ``Saver(sharded=True)`` writes as that many data files."""
    g = tf.Graph()
    with g.as_default():
        for i, (name, arr) in enumerate(arrays.items()):
            with tf.device(f"/cpu:{i % shards}"):
                init = tf.constant(arr)
                if name in bf16:
                    init = tf.cast(init, tf.bfloat16)
                tf.compat.v1.get_variable(name, initializer=init)
        for name, value, dtype in extra:
            tf.compat.v1.get_variable(name, initializer=tf.constant(value, dtype=dtype))
        saver = tf.compat.v1.train.Saver(sharded=shards > 1)
        config = tf.compat.v1.ConfigProto(device_count={"CPU": shards})
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=False)


def save_object(prefix, tree):
    """An object-based checkpoint: ``tree`` is nested dicts of names -> arrays, each dict a tf.Module."""
    def build(node):
        m = tf.Module()
        for k, v in node.items():
            setattr(m, k, build(v) if isinstance(v, dict) else tf.Variable(v))
        return m
    root = tf.train.Checkpoint(**{k: build(v) for k, v in tree.items()})
    return root.write(prefix)


# --------------------------------------------------------------------------- the oracle


def nan_model(model):
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                t.fill_(float("nan"))
    return model


def expected(model, prefix=""):
    """What the loader set: state_dict entries without NaN, tied aliases left out."""
    sd = model.state_dict()
    tied = getattr(model, "_tied_weights_keys", None) or []
    kept, ptrs = {}, {}
    for k, v in sd.items():
        if not v.is_floating_point() or torch.isnan(v).any():
            continue
        if any(k == t or k.endswith("." + t) for t in tied) and any(
                v.data_ptr() == sd[o].data_ptr() for o in sd if o != k):
            continue
        kept[prefix + k] = v.detach().clone().contiguous()
        ptrs[prefix + k] = v.data_ptr()
    return kept


def finish(d, model, tensors, src, args, architecture, oracle, by_hand=()):
    save_file(tensors, os.path.join(d, "expected.safetensors"))
    case = {"src": src, "args": args, "architecture": architecture, "oracle": oracle,
            "by_hand": sorted(by_hand), "transformers": T.__version__, "tensorflow": tf.__version__}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(case, f, indent=2)
        f.write("\n")
    print(f"{d}: {len(tensors)} expected tensors ({architecture})")


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


# --------------------------------------------------------------------------- BERT


BERT = dict(vocab_size=24, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=12,
            max_position_embeddings=16, type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, initializer_range=0.02)
VOCAB = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "is", "hello", "world", "cat",
         "dog", "##s", "##ing", "run", "fast", ",", ".", "!", "to", "of", "and", "in"]


def bert_body(a, scope, cfg, embedding=None):
    """google-research/bert's modeling.py names (ELECTRA's under its own scope)."""
    H, FF, E = cfg["hidden_size"], cfg["intermediate_size"], embedding or cfg["hidden_size"]
    emb = f"{scope}/embeddings" if embedding is None or scope != "generator" else "electra/embeddings"
    if embedding is None or scope == "electra":
        a.add(f"{emb}/word_embeddings", cfg["vocab_size"], E)
        a.add(f"{emb}/token_type_embeddings", cfg["type_vocab_size"], E)
        a.add(f"{emb}/position_embeddings", cfg["max_position_embeddings"], E)
        a.add(f"{emb}/LayerNorm/beta", E)
        a.add(f"{emb}/LayerNorm/gamma", E)
    if embedding is not None and embedding != H:
        a.add(f"{scope}/embeddings_project/kernel", E, H)
        a.add(f"{scope}/embeddings_project/bias", H)
    for n in range(cfg["num_hidden_layers"]):
        p = f"{scope}/encoder/layer_{n}"
        for q in ("query", "key", "value"):
            a.add(f"{p}/attention/self/{q}/kernel", H, H)
            a.add(f"{p}/attention/self/{q}/bias", H)
        a.add(f"{p}/attention/output/dense/kernel", H, H)
        a.add(f"{p}/attention/output/dense/bias", H)
        a.add(f"{p}/attention/output/LayerNorm/beta", H)
        a.add(f"{p}/attention/output/LayerNorm/gamma", H)
        a.add(f"{p}/intermediate/dense/kernel", H, FF)
        a.add(f"{p}/intermediate/dense/bias", FF)
        a.add(f"{p}/output/dense/kernel", FF, H)
        a.add(f"{p}/output/dense/bias", H)
        a.add(f"{p}/output/LayerNorm/beta", H)
        a.add(f"{p}/output/LayerNorm/gamma", H)
    if embedding is None:
        a.add(f"{scope}/pooler/dense/kernel", H, H)
        a.add(f"{scope}/pooler/dense/bias", H)


def adam(a, names):
    """AdamWeightDecayOptimizer's slots (BERT, ALBERT's LAMB too) for ``names``."""
    for n in names:
        a[n + "/adam_m"] = np.zeros_like(a[n])
        a[n + "/adam_v"] = np.ones_like(a[n])


STEP = [("global_step", 1000, tf.int64)]


def _bert_files(d, heads, seed):
    a = Arrays(seed)
    bert_body(a, "bert", BERT)
    heads(a)
    adam(a, ["bert/encoder/layer_0/attention/self/query/kernel", "bert/pooler/dense/bias"])
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    write_json(os.path.join(d, "bert_config.json"), BERT)
    with open(os.path.join(d, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    return a


def _listing_without(names):
    """tf.train.list_variables without ``names``: the fine-tuned heads the old loader could not place."""
    real = tf.train.list_variables

    def listing(path):
        return [(n, s) for n, s in real(path) if n not in names]
    return listing


def _bert_head(d, cls, head, names, seed, unused=()):
    a = _bert_files(d, head, seed)
    config = T.BertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    config.num_labels = a[names[0]].shape[0]
    model = nan_model(getattr(T, cls)(config))
    real = tf.train.list_variables
    tf.train.list_variables = _listing_without(set(names) | set(unused))
    try:
        T.load_tf_weights_in_bert(model, config, os.path.join(d, "model.ckpt"))
    finally:
        tf.train.list_variables = real
    out = expected(model)
    module = "classifier" if cls == "BertForSequenceClassification" else "qa_outputs"
    out[f"{module}.weight"] = torch.from_numpy(a[names[0]])  # output_weights is [num_labels, hidden]: nn.Linear's
    out[f"{module}.bias"] = torch.from_numpy(a[names[1]])
    finish(d, model, out, "model.ckpt", ["--config", "bert_config.json", "--vocab", "vocab.txt"], cls,
           f"load_tf_weights_in_bert({cls}) for the body", [f"{module}.weight", f"{module}.bias"])


def bert_pretraining(d):
    def heads(a):
        a.add("cls/predictions/transform/dense/kernel", 8, 8)
        a.add("cls/predictions/transform/dense/bias", 8)
        a.add("cls/predictions/transform/LayerNorm/beta", 8)
        a.add("cls/predictions/transform/LayerNorm/gamma", 8)
        a.add("cls/predictions/output_bias", BERT["vocab_size"])
        a.add("cls/seq_relationship/output_weights", 2, 8)
        a.add("cls/seq_relationship/output_bias", 2)
    _bert_files(d, heads, 1)
    config = T.BertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = nan_model(T.BertForPreTraining(config))
    T.load_tf_weights_in_bert(model, config, os.path.join(d, "model.ckpt"))
    finish(d, model, expected(model), "model.ckpt", ["--config", "bert_config.json", "--vocab", "vocab.txt"],
           "BertForPreTraining", "load_tf_weights_in_bert(BertForPreTraining)")


def bert_classifier(d):
    def head(a):  # run_classifier.py: top-level, three labels
        a.add("output_weights", 3, 8)
        a.add("output_bias", 3)
    _bert_head(d, "BertForSequenceClassification", head, ["output_weights", "output_bias"], 2)


def bert_squad(d):
    def head(a):  # run_squad.py: start and end logits
        a.add("cls/squad/output_weights", 2, 8)
        a.add("cls/squad/output_bias", 2)
    # BertForQuestionAnswering has no pooler: run_squad's bert/pooler/dense stays out (the loader fails on it)
    _bert_head(d, "BertForQuestionAnswering", head, ["cls/squad/output_weights", "cls/squad/output_bias"], 3,
               unused=["bert/pooler/dense/kernel", "bert/pooler/dense/bias"])


# --------------------------------------------------------------------------- TF2 Model Garden BERT


def _garden_tree(rng, cfg, late):
    """A Model Garden BertEncoder's object tree: ``layer_with_weights-N`` (Functional), EinsumDense kernels
    per head; ``late``: the attention output inside the attention layer (after 2.3)."""
    H, FF, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"]
    dh = H // heads

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.5

    def ln():
        return {"gamma": r(H), "beta": r(H)}
    tree = {"layer_with_weights-0": {"embeddings": r(cfg["vocab_size"], H)},
            "layer_with_weights-1": {"embeddings": r(cfg["max_position_embeddings"], H)},
            "layer_with_weights-2": {"embeddings": r(cfg["type_vocab_size"], H)},
            "layer_with_weights-3": ln()}
    for n in range(cfg["num_hidden_layers"]):
        attn = {f"_{q}_dense": {"kernel": r(H, heads, dh), "bias": r(heads, dh)} for q in ("query", "key", "value")}
        out = {"kernel": r(heads, dh, H), "bias": r(H)}
        layer = {"_attention_layer": attn, "_attention_layer_norm": ln(),
                 "_intermediate_dense": {"kernel": r(H, FF), "bias": r(FF)},
                 "_output_dense": {"kernel": r(FF, H), "bias": r(H)}, "_output_layer_norm": ln()}
        if late:
            attn["_output_dense"] = out
        else:
            layer["_attention_output_dense"] = out
        tree[f"layer_with_weights-{n + 4}"] = layer
    tree[f"layer_with_weights-{cfg['num_hidden_layers'] + 4}"] = {"kernel": r(H, H), "bias": r(H)}
    return tree


def _tf2_oracle():
    """transformers 4.46.3's load_tf2_weights_in_bert, from its wheel (fetched with pip, not kept)."""
    import importlib.util

    tmp = tempfile.mkdtemp()
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "transformers==4.46.3", "-d", tmp],
                   check=True)
    wheel = next(os.path.join(tmp, n) for n in os.listdir(tmp) if n.endswith(".whl"))
    member = "transformers/models/bert/convert_bert_original_tf2_checkpoint_to_pytorch.py"
    path = os.path.join(tmp, "tf2.py")
    with zipfile.ZipFile(wheel) as z, open(path, "wb") as f:
        f.write(z.read(member))
    spec = importlib.util.spec_from_file_location("hf_tf2_bert", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load_tf2_weights_in_bert


def _garden(d, late):
    rng = np.random.default_rng(4)
    tree = _garden_tree(rng, BERT, late=False)
    optimizer = {"iter": np.array(10, dtype=np.int64)}
    tmp = tempfile.mkdtemp()
    oracle_prefix = save_object(os.path.join(tmp, "ckpt-1"), {"model": tree, "optimizer": optimizer})
    if late:  # the same weights under the later layout
        for key in [k for k in tree if k.startswith("layer_with_weights-") and "_attention_output_dense" in tree[k]]:
            tree[key]["_attention_layer"]["_output_dense"] = tree[key].pop("_attention_output_dense")
        prefix = save_object(os.path.join(d, "ckpt-1"), {"encoder": tree, "optimizer": optimizer})
    else:
        prefix = save_object(os.path.join(d, "ckpt-1"), {"model": tree, "optimizer": optimizer})
    write_json(os.path.join(d, "bert_config.json"), BERT)
    config = T.BertConfig.from_json_file(os.path.join(d, "bert_config.json"))
    model = nan_model(T.BertModel(config))
    _tf2_oracle()(model, oracle_prefix, config)
    finish(d, model, expected(model), os.path.basename(prefix), ["--config", "bert_config.json"], "BertModel",
           "transformers 4.46.3 load_tf2_weights_in_bert(BertModel)" + (" on the 2.3 layout" if late else ""))


def bert_tf2(d):
    _garden(d, late=False)


def bert_tf2_late(d):
    _garden(d, late=True)


# --------------------------------------------------------------------------- ALBERT


ALBERT = dict(vocab_size=20, embedding_size=6, hidden_size=8, num_hidden_layers=3, num_hidden_groups=1,
              inner_group_num=1, num_attention_heads=2, intermediate_size=12, max_position_embeddings=16,
              type_vocab_size=2, hidden_act="gelu", hidden_dropout_prob=0, attention_probs_dropout_prob=0,
              initializer_range=0.02, net_structure_type=0, gap_size=0, num_memory_blocks=0, down_scale_factor=1)


def albert(d):
    a = Arrays(5)
    H, E, FF, V = 8, 6, 12, 20
    a.add("bert/embeddings/word_embeddings", V, E)
    a.add("bert/embeddings/token_type_embeddings", 2, E)
    a.add("bert/embeddings/position_embeddings", 16, E)
    a.add("bert/embeddings/LayerNorm/beta", E)
    a.add("bert/embeddings/LayerNorm/gamma", E)
    a.add("bert/encoder/embedding_hidden_mapping_in/kernel", E, H)
    a.add("bert/encoder/embedding_hidden_mapping_in/bias", H)
    g = "bert/encoder/transformer/group_0/inner_group_0"
    for q in ("query", "key", "value"):
        a.add(f"{g}/attention_1/self/{q}/kernel", H, H)
        a.add(f"{g}/attention_1/self/{q}/bias", H)
    a.add(f"{g}/attention_1/output/dense/kernel", H, H)
    a.add(f"{g}/attention_1/output/dense/bias", H)
    a.add(f"{g}/LayerNorm/beta", H)
    a.add(f"{g}/LayerNorm/gamma", H)
    a.add(f"{g}/ffn_1/intermediate/dense/kernel", H, FF)
    a.add(f"{g}/ffn_1/intermediate/dense/bias", FF)
    a.add(f"{g}/ffn_1/intermediate/output/dense/kernel", FF, H)
    a.add(f"{g}/ffn_1/intermediate/output/dense/bias", H)
    a.add(f"{g}/LayerNorm_1/beta", H)
    a.add(f"{g}/LayerNorm_1/gamma", H)
    a.add("bert/pooler/dense/kernel", H, H)
    a.add("bert/pooler/dense/bias", H)
    a.add("cls/predictions/transform/dense/kernel", H, E)
    a.add("cls/predictions/transform/dense/bias", E)
    a.add("cls/predictions/transform/LayerNorm/beta", E)
    a.add("cls/predictions/transform/LayerNorm/gamma", E)
    a.add("cls/predictions/output_bias", V)
    a.add("cls/seq_relationship/output_weights", 2, H)
    a.add("cls/seq_relationship/output_bias", 2)
    adam(a, [f"{g}/ffn_1/intermediate/dense/kernel"])
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    write_json(os.path.join(d, "albert_config.json"), ALBERT)
    config = T.AlbertConfig.from_json_file(os.path.join(d, "albert_config.json"))
    model = nan_model(T.AlbertForPreTraining(config))
    T.load_tf_weights_in_albert(model, config, os.path.join(d, "model.ckpt"))
    finish(d, model, expected(model), "model.ckpt", ["--config", "albert_config.json"], "AlbertForPreTraining",
           "load_tf_weights_in_albert(AlbertForPreTraining)")


# --------------------------------------------------------------------------- ELECTRA


ELECTRA_D = dict(model_type="electra", vocab_size=20, embedding_size=6, hidden_size=8, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=12, max_position_embeddings=16, type_vocab_size=2)
ELECTRA_G = dict(ELECTRA_D, hidden_size=4, num_attention_heads=1, intermediate_size=8)


def _electra_files(d):
    a = Arrays(6)
    bert_body(a, "electra", ELECTRA_D, embedding=6)
    bert_body(a, "generator", ELECTRA_G, embedding=6)
    a.add("generator_predictions/dense/kernel", 4, 6)
    a.add("generator_predictions/dense/bias", 6)
    a.add("generator_predictions/LayerNorm/beta", 6)
    a.add("generator_predictions/LayerNorm/gamma", 6)
    a.add("generator_predictions/output_bias", 20)
    a.add("discriminator_predictions/dense/kernel", 8, 8)
    a.add("discriminator_predictions/dense/bias", 8)
    a.add("discriminator_predictions/dense_1/kernel", 8, 1)
    a.add("discriminator_predictions/dense_1/bias", 1)
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    write_json(os.path.join(d, "config.json"), ELECTRA_D)
    write_json(os.path.join(d, "generator_config.json"), ELECTRA_G)


def electra(d):
    _electra_files(d)
    config = T.ElectraConfig.from_json_file(os.path.join(d, "config.json"))
    model = nan_model(T.ElectraForPreTraining(config))
    T.load_tf_weights_in_electra(model, config, os.path.join(d, "model.ckpt"), "discriminator")
    finish(d, model, expected(model), "model.ckpt", ["--config", "config.json"], "ElectraForPreTraining",
           "load_tf_weights_in_electra(ElectraForPreTraining, 'discriminator')")


def electra_generator(d):
    _electra_files(d)
    config = T.ElectraConfig.from_json_file(os.path.join(d, "generator_config.json"))
    model = nan_model(T.ElectraForMaskedLM(config))
    T.load_tf_weights_in_electra(model, config, os.path.join(d, "model.ckpt"), "generator")
    finish(d, model, expected(model), "model.ckpt", ["--arch", "electra-generator", "--config",
                                                     "generator_config.json"],
           "ElectraForMaskedLM", "load_tf_weights_in_electra(ElectraForMaskedLM, 'generator')")


# --------------------------------------------------------------------------- T5 / mT5 (mesh TensorFlow)


T5 = dict(vocab_size=32, d_model=8, d_kv=4, num_heads=2, d_ff=12, num_layers=2, relative_attention_num_buckets=8)
GIN = """# Macros:
# ==============================================================================
d_ff = 12
d_kv = 4
d_model = 8
dropout_rate = 0.1
inputs_length = 512
MIXTURE_NAME = 'c4_v220_unsupervised'
num_heads = 2
num_layers = 2

# Parameters for DenseReluDense:
# ==============================================================================
DenseReluDense.activation = {activation}
DenseReluDense.dropout_rate = %dropout_rate
DenseReluDense.hidden_size = %d_ff

# Parameters for make_layer_stack:
# ==============================================================================
make_layer_stack.layers = \\
    [@mesh_tensorflow.transformer.transformer_layers.SelfAttention,
     @mesh_tensorflow.transformer.transformer_layers.DenseReluDense]
make_layer_stack.num_layers = %num_layers
"""


def _t5_arrays(seed, gated, logits):
    a = Arrays(seed)
    D, inner, FF, V, B = 8, 8, 12, 32, 8
    a.add("shared/embedding", V, D)
    for stack in ("encoder", "decoder"):
        for b in range(2):
            p = f"{stack}/block_{b:03d}"
            attn = [("layer_000", "SelfAttention")] + ([("layer_001", "EncDecAttention")] if stack == "decoder" else [])
            for layer, kind in attn:
                for q in "qkv":
                    a.add(f"{p}/{layer}/{kind}/{q}", D, inner)
                a.add(f"{p}/{layer}/{kind}/o", inner, D)
                if b == 0 and kind == "SelfAttention":
                    a.add(f"{p}/{layer}/{kind}/relative_attention_bias", 2, B)
                a.add(f"{p}/{layer}/layer_norm/scale", D)
            ff = f"{p}/{'layer_002' if stack == 'decoder' else 'layer_001'}"
            for wi in (("wi_0", "wi_1") if gated else ("wi",)):
                a.add(f"{ff}/DenseReluDense/{wi}/kernel", D, FF)
            a.add(f"{ff}/DenseReluDense/wo/kernel", FF, D)
            a.add(f"{ff}/layer_norm/scale", D)
        a.add(f"{stack}/final_layer_norm/scale", D)
    if logits:
        a.add("decoder/logits/kernel", D, V)
    # Adafactor's factored slots, as mesh TensorFlow names them
    for n in ("shared/embedding", "encoder/block_000/layer_000/SelfAttention/q"):
        a[n + "_slot_vc"] = np.ones(a[n].shape[1:], np.float32)
        a[n + "_slot_vr"] = np.ones(a[n].shape[:1], np.float32)
    a["encoder/final_layer_norm/scale_slot_v"] = np.ones(8, np.float32)
    return a


def _t5(d, seed, gated, bf16, cls, loader, config_file, vocab=None):
    a = _t5_arrays(seed, gated, logits=gated)
    weights = {n for n in a if "_slot_" not in n}
    save_v1(os.path.join(d, "model.ckpt-1000000"), a, shards=2, bf16=weights if bf16 else (), extra=STEP)
    config = getattr(T, cls.replace("ForConditionalGeneration", "Config"))(
        **T5, feed_forward_proj="gated-gelu" if gated else "relu", tie_word_embeddings=not gated)
    if config_file == "config.json":
        write_json(os.path.join(d, "config.json"), config.to_dict())
    else:
        with open(os.path.join(d, config_file), "w") as f:
            f.write(GIN.format(activation="['gelu', 'linear']" if gated else "'relu'"))
    model = nan_model(getattr(T, cls)(config))
    loader(model, config, os.path.join(d, "model.ckpt-1000000"))
    if vocab:
        spiece(os.path.join(d, vocab))
    finish(d, model, expected(model), "model.ckpt-1000000",
           ["--config", config_file] + (["--vocab", vocab] if vocab else []), cls,
           f"{loader.__name__}({cls})" + (", bfloat16 variables" if bf16 else ""))


def t5_v1_0(d):
    _t5(d, 7, False, False, "T5ForConditionalGeneration", T.load_tf_weights_in_t5, "operative_config.gin")


def spiece(path):
    """A tiny SentencePiece model (T5's vocabulary kind), trained with sentencepiece on a fixed text."""
    import sentencepiece

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "text"), "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\n" * 50 + "hello world, a tiny corpus\n" * 50)
        sentencepiece.SentencePieceTrainer.train(
            input=os.path.join(tmp, "text"), model_prefix=os.path.join(tmp, "sp"), vocab_size=32,
            model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=1.0,
            normalization_rule_name="identity", minloglevel=2)
        shutil.copy(os.path.join(tmp, "sp.model"), path)


def t5_v1_1(d):
    _t5(d, 8, True, True, "T5ForConditionalGeneration", T.load_tf_weights_in_t5, "operative_config.gin",
        vocab="spiece.model")


def mt5(d):
    from transformers.models.mt5.modeling_mt5 import load_tf_weights_in_mt5

    _t5(d, 9, True, True, "MT5ForConditionalGeneration", load_tf_weights_in_mt5, "config.json")


# --------------------------------------------------------------------------- GPT-2 (OpenAI's release)


def _bytes_to_unicode():
    """GPT-2's byte -> printable character table (its encoder.json keys use it)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def gpt2(d):
    hp = {"n_vocab": 259, "n_ctx": 16, "n_embd": 8, "n_head": 2, "n_layer": 2}
    a = Arrays(10)
    E = 8
    a.add("model/wpe", 16, E)
    a.add("model/wte", 259, E)
    for i in range(2):
        h = f"model/h{i}"
        for ln in ("ln_1", "ln_2"):
            a.add(f"{h}/{ln}/g", E)
            a.add(f"{h}/{ln}/b", E)
        a.add(f"{h}/attn/c_attn/w", 1, E, 3 * E)
        a.add(f"{h}/attn/c_attn/b", 3 * E)
        a.add(f"{h}/attn/c_proj/w", 1, E, E)
        a.add(f"{h}/attn/c_proj/b", E)
        a.add(f"{h}/mlp/c_fc/w", 1, E, 4 * E)
        a.add(f"{h}/mlp/c_fc/b", 4 * E)
        a.add(f"{h}/mlp/c_proj/w", 1, 4 * E, E)
        a.add(f"{h}/mlp/c_proj/b", E)
    a.add("model/ln_f/g", E)
    a.add("model/ln_f/b", E)
    save_v1(os.path.join(d, "model.ckpt"), a)
    write_json(os.path.join(d, "hparams.json"), hp)
    table = _bytes_to_unicode()
    encoder = {table[b]: i for i, b in enumerate(sorted(table))}
    encoder.update({"th": 256, "the": 257, "<|endoftext|>": 258})
    write_json(os.path.join(d, "encoder.json"), encoder)
    with open(os.path.join(d, "vocab.bpe"), "w") as f:
        f.write("#version: 0.2\nt h\nth e\n")
    config = T.GPT2Config(vocab_size=259, n_positions=16, n_embd=8, n_head=2, n_layer=2)
    model = nan_model(T.GPT2Model(config))
    T.load_tf_weights_in_gpt2(model, config, os.path.join(d, "model.ckpt"))
    # the loader fills GPT2Model; the folder holds GPT2LMHeadModel, whose body is "transformer."
    finish(d, model, expected(model, "transformer."), "model.ckpt",
           ["--config", "hparams.json", "--vocab", "encoder.json"], "GPT2LMHeadModel",
           "load_tf_weights_in_gpt2(GPT2Model), keys under transformer.")


# --------------------------------------------------------------------------- GPT-Neo (mesh TensorFlow)


def gpt_neo(d):
    run = {"n_head": 2, "n_vocab": 30, "embed_dropout": 0, "lr": 0.0002, "lr_decay": "cosine", "attn_dropout": 0,
           "res_dropout": 0, "n_embd": 8, "n_ctx": 16, "n_layer": 2, "scale_by_depth": True,
           "attention_types": [[["global", "local"], 1]], "activation_function": "gelu", "precision": "bfloat16",
           "model_path": "gs://neo-models/tiny", "opt_name": "adam"}
    a = Arrays(11)
    E = 8
    a.add("gpt2/wte", 32, E)  # a vocabulary padded past n_vocab
    a.add("gpt2/wpe", 16, E)
    for i in range(2):
        h = f"gpt2/h{i}"
        for norm in ("norm_1", "norm_2"):
            a.add(f"{h}/{norm}/g", E)
            a.add(f"{h}/{norm}/b", E)
        for q in "qkvo":
            a.add(f"{h}/attn/{q}", E, E)
        a.add(f"{h}/attn/compute_output_bias/o_b", E)
        a.add(f"{h}/mlp/conv1d_main/c_fc/kernel", E, 4 * E)
        a.add(f"{h}/mlp/conv1d_main/c_fc/bias", 4 * E)
        a.add(f"{h}/mlp/conv1d_main/c_proj/kernel", 4 * E, E)
        a.add(f"{h}/mlp/conv1d_main/c_proj/bias", E)
    a.add("gpt2/ln_f/g", E)
    a.add("gpt2/ln_f/b", E)
    weights = set(a)
    adam(a, ["gpt2/wte", "gpt2/h0/attn/q"])
    save_v1(os.path.join(d, "model.ckpt-362000"), a, shards=2, bf16=weights, extra=STEP)
    write_json(os.path.join(d, "config.json"), run)
    config = T.GPTNeoConfig(vocab_size=30, hidden_size=8, num_layers=2, num_heads=2,
                            attention_types=run["attention_types"], max_position_embeddings=16, resid_dropout=0,
                            embed_dropout=0, attention_dropout=0)
    model = nan_model(T.GPTNeoForCausalLM(config))
    T.load_tf_weights_in_gpt_neo(model, config, os.path.join(d, "model.ckpt-362000"))
    finish(d, model, expected(model), "model.ckpt-362000", ["--config", "config.json"], "GPTNeoForCausalLM",
           "load_tf_weights_in_gpt_neo(GPTNeoForCausalLM), bfloat16 variables")


# --------------------------------------------------------------------------- MobileNetV1 (TF-slim)


def mobilenet_v1(d):
    dm, min_depth, labels = 0.0625, 8, 11
    a = Arrays(12)

    def bn(scope, c):
        a.add(f"{scope}/BatchNorm/beta", c)
        a.add(f"{scope}/BatchNorm/gamma", c)
        a.add(f"{scope}/BatchNorm/moving_mean", c)
        a[f"{scope}/BatchNorm/moving_variance"] = np.abs(a.rng.standard_normal(c)).astype(np.float32) + 0.5

    depth = 32
    out = max(int(depth * dm), min_depth)
    a.add("MobilenetV1/Conv2d_0/weights", 3, 3, 3, out)
    bn("MobilenetV1/Conv2d_0", out)
    strides = [1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1]
    for i in range(13):
        cin = out
        if strides[i] == 2 or i == 0:
            depth *= 2
            out = max(int(depth * dm), min_depth)
        a.add(f"MobilenetV1/Conv2d_{i + 1}_depthwise/depthwise_weights", 3, 3, cin, 1)
        bn(f"MobilenetV1/Conv2d_{i + 1}_depthwise", cin)
        a.add(f"MobilenetV1/Conv2d_{i + 1}_pointwise/weights", 1, 1, cin, out)
        bn(f"MobilenetV1/Conv2d_{i + 1}_pointwise", out)
    a.add("MobilenetV1/Logits/Conv2d_1c_1x1/weights", 1, 1, out, labels)
    a.add("MobilenetV1/Logits/Conv2d_1c_1x1/biases", labels)
    for n in list(a):  # the slim training script's shadows and RMSProp slots
        a[n + "/ExponentialMovingAverage"] = a[n] * 0.9
        if not n.endswith(("moving_mean", "moving_variance")):
            a[n + "/RMSProp"] = np.ones_like(a[n])
            a[n + "/RMSProp_1"] = np.zeros_like(a[n])
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    config = T.MobileNetV1Config(depth_multiplier=dm, num_labels=labels, layer_norm_eps=0.001)
    model = nan_model(T.MobileNetV1ForImageClassification(config))
    T.load_tf_weights_in_mobilenet_v1(model, config, os.path.join(d, "model.ckpt"))
    finish(d, model, expected(model), "model.ckpt", [], "MobileNetV1ForImageClassification",
           "load_tf_weights_in_mobilenet_v1(MobileNetV1ForImageClassification)")


CASES = {f.__name__: f for f in (bert_pretraining, bert_classifier, bert_squad, bert_tf2, bert_tf2_late, albert,
                                 electra, electra_generator, t5_v1_0, t5_v1_1, mt5, gpt2, gpt_neo, mobilenet_v1)}


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
        fn(d)


if __name__ == "__main__":
    main()
