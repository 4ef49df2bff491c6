"""The variables a real TF release of each model holds, by the release's own names, for the tiny
PyTorch models of hf_loaders_probe.py: ``release(key, model)`` gives ``[(tf_name, array)]``, the
arrays laid out as the release lays them out (kernels ``[in, out]``, BigBird's and Funnel's
attention kernels 3-D, T5's relative bias ``[heads, buckets]``, GPT-2's ``[1, in, out]``, ...),
plus what a training run leaves beside the weights (``global_step``, the optimizer's slots by that
optimizer's naming), so that each loader's skip rules run too.

Where the names come from (the loader is then run under TF to show it fills every weight):

- Google BERT, ALBERT, ELECTRA, MobileBERT, BigBird, TAPAS, RemBERT, CANINE, REALM, ConvBERT:
  their TF1 ``modeling.py`` scopes (``bert/encoder/layer_0/attention/self/query/kernel``,
  ALBERT's ``transformer/group_0/inner_group_0/attention_1/...``, MobileBERT's ``FakeLayerNorm``
  and ``bottleneck``, CANINE's ``char_embeddings/embeddings/HashBucketCodepointEmbedder_0`` and
  nested ``initial_char_encoder`` scope, BigBird's ``[hidden, heads, head_size]`` kernels, REALM's
  ``module/module/module/bert/`` hub nesting, ConvBERT's ``electra/`` scope);
- RoFormer (bert4keras) and NEZHA (a Google BERT fork) write Google BERT's names;
- GPT-2 / ImageGPT / GPT-Neo: OpenAI's ``model/h0/attn/c_attn/w``, image-gpt's ``q_proj`` etc.
  (no biases, RMS norm ``g`` only, ``sos``, ``wtet``), Mesh-TF's ``gpt2/h0/attn/q`` in bfloat16;
- T5/mT5 (Mesh-TF): ``encoder/block_000/layer_000/SelfAttention/q``, Adafactor ``_slot_v[rc]``;
- XLNet, Transformer-XL, MobileNet V1/V2, whose loaders hold a map of the release's names: that map;
- models with no TF release (Megatron-BERT, LXMERT, RoCBERT, Trajectory Transformer, QDQBERT,
  Decision Transformer), whose loaders are copies of BERT's or GPT-2's: Google BERT's naming rules
  applied to the model's own modules (GPT-2's for the Decision Transformer), which is all such a
  loader can map.
"""

import re

import numpy as np

ADAM = ("adam_m", "adam_v")  # AdamWeightDecayOptimizer's slots: VAR/adam_m, VAR/adam_v


def _modules(model):
    return dict(model.named_modules())


def _unique(model):
    """(state_dict key, tensor) once per storage: tied weights are written once, as a release does."""
    seen = set()
    for key, value in model.state_dict(keep_vars=True).items():
        if value.dtype.is_floating_point and value.data_ptr() not in seen:
            seen.add(value.data_ptr())
            yield key, value.detach().numpy()


def _kind(module):
    import torch.nn as nn

    name = type(module).__name__.lower()
    if isinstance(module, nn.Embedding):
        return "emb"
    if "norm" in name:
        return "norm"
    if isinstance(module, nn.Linear):
        return "linear"
    return "other"


def bert_style(model, renames=(), special=None, drop=()):
    """Google BERT's naming rules on the model's own modules: ``layer.0`` -> ``layer_0``,
    Linear weight -> ``kernel`` (transposed), LayerNorm -> ``gamma``/``beta``, an Embedding named
    ``*_embeddings`` -> the table itself; ``cls.predictions.bias`` -> ``output_bias``, the NSP head ->
    ``output_weights``/``output_bias``; then ``renames`` (regex, replacement) on the TF name.
    ``special`` maps a state_dict key to (tf name, array) outright; ``drop`` lists keys (regex) the
    release does not hold. An Embedding not named ``*_embeddings`` cannot be named for these
    loaders (they find a table by that suffix): it is left out."""
    special = special or {}
    mods = _modules(model)
    out = []
    for key, a in _unique(model):
        if any(re.search(p, key) for p in drop):
            continue
        if key in special:
            if special[key] is not None:
                out.append((special[key][0], special[key][1](a)))
            continue
        *path, leaf = key.split(".")
        kind = _kind(mods[".".join(path)])
        parts = []
        for part in path:
            if part.isdigit() and parts:
                parts[-1] += "_" + part
            else:
                parts.append(part)
        if kind == "emb":
            if not parts[-1].endswith("_embeddings"):
                continue
        elif kind == "norm":
            parts.append("gamma" if leaf == "weight" else "beta")
        elif kind == "linear" and leaf == "weight":
            parts.append("kernel")
            a = a.T
        else:
            parts.append(leaf)
        name = "/".join(parts)
        name = re.sub(r"^cls/predictions/bias$", "cls/predictions/output_bias", name)
        if name.startswith("cls/seq_relationship/"):
            name, a = (("cls/seq_relationship/output_weights", a.T) if name.endswith("kernel")
                       else ("cls/seq_relationship/output_bias", a))
        for pat, rep in renames:
            name = re.sub(pat, rep, name)
        out.append((name, np.ascontiguousarray(a)))
    return out


def with_adam(named, steps=1000):
    """A BERT-style training checkpoint: the first two weights' Adam slots and global_step."""
    extra = [(f"{n}/{s}", np.full_like(a, 0.5)) for n, a in named[:2] for s in ADAM]
    return named + extra + [("global_step", np.array(steps, np.int64))]


BERT = [(r"^bert/pooler/(kernel|bias)$", r"bert/pooler/dense/\1")]  # where the model's pooler is a bare Linear

ALBERT = [
    (r"^albert/", "bert/"),
    (r"bert/encoder/albert_layer_groups_(\d+)/albert_layers_(\d+)/",
     r"bert/encoder/transformer/group_\1/inner_group_\2/"),
    (r"inner_group_(\d+)/attention/(query|key|value)/", r"inner_group_\1/attention_1/self/\2/"),
    (r"inner_group_(\d+)/attention/dense/", r"inner_group_\1/attention_1/output/dense/"),
    (r"inner_group_(\d+)/attention/LayerNorm/", r"inner_group_\1/LayerNorm/"),
    (r"inner_group_(\d+)/full_layer_layer_norm/", r"inner_group_\1/LayerNorm_1/"),
    (r"inner_group_(\d+)/ffn/", r"inner_group_\1/ffn_1/intermediate/dense/"),
    (r"inner_group_(\d+)/ffn_output/", r"inner_group_\1/ffn_1/intermediate/output/dense/"),
    (r"^bert/pooler/", "bert/pooler/dense/"),
    (r"^predictions/bias$", "cls/predictions/output_bias"),
    (r"^predictions/(dense|LayerNorm)/", r"cls/predictions/transform/\1/"),
]


def albert(model):
    sop = {"sop_classifier.classifier.weight": ("cls/seq_relationship/output_weights", lambda a: a),
           "sop_classifier.classifier.bias": ("cls/seq_relationship/output_bias", lambda a: a)}
    return with_adam(bert_style(model, ALBERT, sop))


def electra(model):
    """ELECTRA's pre-training checkpoint: discriminator and generator side by side, the embeddings
    (electra/embeddings) shared. The model given is the one whose weights are checked; the other
    half of the checkpoint is written too, with other values, for the loader to skip."""
    rng = np.random.default_rng(7)
    if type(model).__name__ == "ElectraForMaskedLM":  # the generator
        named = bert_style(model, [(r"^electra/(embeddings_project|encoder)/", r"generator/\1/"),
                                   (r"^generator_lm_head/bias$", "generator_predictions/output_bias")])
        h = model.config.embedding_size
        other = [("electra/encoder/layer_0/attention/self/query/kernel", (h, h)),
                 ("discriminator_predictions/dense/kernel", (h, h)), ("discriminator_predictions/dense_1/kernel", (h, 1))]
    else:
        named = bert_style(model, [(r"/dense_prediction/", "/dense_1/")])
        h, g = model.config.embedding_size, 2
        other = [("generator/embeddings_project/kernel", (h, g)), ("generator/encoder/layer_0/output/LayerNorm/gamma", (g,)),
                 ("generator_predictions/dense/kernel", (g, h)), ("generator_predictions/LayerNorm/gamma", (h,)),
                 ("generator_predictions/output_bias", (model.config.vocab_size,))]
    named += [(n, rng.standard_normal(s).astype(np.float32)) for n, s in other]
    return named + [("global_step", np.array(1000, np.int64))]


def mobilebert(model):
    renames = [(r"^mobilebert/", "bert/"), (r"LayerNorm/", "FakeLayerNorm/"), (r"/ffn_(\d+)/", r"/ffn_layer_\1/"),
               (r"^cls/predictions/transform/FakeLayerNorm/", "cls/predictions/transform/LayerNorm/"),
               (r"^bert/embeddings/FakeLayerNorm/", "bert/embeddings/FakeLayerNorm/")]
    special = {"cls.predictions.dense.weight": ("cls/predictions/extra_output_weights", lambda a: a.T)}
    return with_adam(bert_style(model, renames, special))


def big_bird(model):
    """BigBird's attention kernels are 3-D: query/key/value [hidden, heads, size], output [heads, size,
    hidden], their biases [heads, size]; the embedding LayerNorm lives under encoder/."""
    c = model.config
    nh, hd, hs = c.num_attention_heads, c.hidden_size // c.num_attention_heads, c.hidden_size
    out = []
    for name, a in bert_style(model, BERT + [(r"^bert/embeddings/LayerNorm/", "bert/encoder/LayerNorm/")]):
        if re.search(r"attention/self/(query|key|value)/kernel$", name):
            a = a.reshape(hs, nh, hd)
        elif re.search(r"attention/self/(query|key|value)/bias$", name):
            a = a.reshape(nh, hd)
        elif name.endswith("attention/output/dense/kernel"):
            a = a.reshape(nh, hd, hs)
        out.append((name, np.ascontiguousarray(a)))
    return with_adam(out)


def canine(model):
    renames = [(r"^char_embeddings/(HashBucketCodepointEmbedder_\d+)$", r"char_embeddings/embeddings/\1"),
               (r"^char_embeddings/token_type_embeddings$", "char_embeddings/segment_embeddings"),
               (r"^chars_to_molecules/", "initial_char_encoder/initial_char_encoder/chars_to_molecules/"),
               (r"^encoder/", "bert/"), (r"^projection/", "final_char_encoder/"), (r"/conv/weight$", "/conv/kernel")]
    named = []
    for name, a in bert_style(model, renames):
        if name.endswith("conv/kernel"):
            a = np.ascontiguousarray(a.transpose(2, 1, 0))  # Conv1D [width, in, out]
        named.append((name, a))
    for key, a in _unique(model):  # the hashed tables: Embeddings without the _embeddings suffix
        if key.startswith("char_embeddings.HashBucketCodepointEmbedder_"):
            named.append((f"char_embeddings/embeddings/{key.split('.')[1]}", a))
    cls = np.full((model.config.hidden_size,), 0.25, np.float32)
    return with_adam(named + [("cls/predictions/output_bias", cls)])


def convbert(model):
    """ConvBERT's release (built on ELECTRA's code): electra/ scope, separable conv for the key."""
    out = []
    for name, a in bert_style(model, [(r"^", "electra/"), (r"key_conv_attn_layer/", "conv_attn_key/"),
                                      (r"conv_kernel_layer/", "conv_attn_kernel/"),
                                      (r"conv_out_layer/", "conv_attn_point/")]):
        if name.endswith("conv_attn_key/depthwise/weight"):
            name, a = name.replace("depthwise/weight", "depthwise_kernel"), a.transpose(2, 0, 1)
        elif name.endswith("conv_attn_key/pointwise/weight"):
            name, a = name.replace("pointwise/weight", "pointwise_kernel"), a.transpose(2, 1, 0)
        elif name.endswith("conv_attn_key/bias"):
            a = a[:, 0]
        out.append((name, np.ascontiguousarray(a)))
    return out + [("global_step", np.array(1000, np.int64))]


def realm(model):
    """REALM's pre-trained embedder: a TF-Hub module nested three deep (BERT and its MLM head), the
    projection beside it two deep."""
    renames = [(r"^realm/", "module/module/module/bert/"), (r"^cls/predictions/", "module/module/module/cls/predictions/"),
               (r"^cls/(dense|LayerNorm)/", r"module/module/\1/")]
    return bert_style(model, renames) + [("global_step", np.array(1000, np.int64))]


def tapas(model):
    """TAPAS's MLM release: bert/ with seven token-type tables, the NSP head (which TapasForMaskedLM skips)."""
    named = bert_style(model, [(r"^tapas/", "bert/")])
    named += [(f"bert/embeddings/{k.split('.')[2]}", a) for k, a in _unique(model)
              if k.startswith("tapas.embeddings.token_type_embeddings_")]  # the seven tables, suffixed _0.._6
    h = model.config.hidden_size
    named += [("bert/pooler/dense/kernel", np.eye(h, dtype=np.float32)), ("bert/pooler/dense/bias", np.ones(h, np.float32)),
              ("cls/seq_relationship/output_weights", np.ones((2, h), np.float32)),
              ("cls/seq_relationship/output_bias", np.ones(2, np.float32))]
    return with_adam(named)


def t5(model):
    """Mesh-TF T5: block_000/layer_000, q/k/v/o without /kernel, DenseReluDense/wi/kernel, layer_norm/scale,
    shared/embedding, decoder/logits/kernel when untied, Adafactor's factored slots."""
    mods = _modules(model)
    out = []
    for key, a in _unique(model):
        *path, leaf = key.split(".")
        kind = _kind(mods[".".join(path)])
        parts = []
        for part in path:
            if part.isdigit():
                parts[-1] += f"_{int(part):03d}"
            else:
                parts.append(part)
        if parts == ["lm_head"]:
            out.append(("decoder/logits/kernel", a.T))
            continue
        if kind == "emb":  # the shared table as it is; relative_attention_bias [heads, buckets]
            out.append(("shared/embedding", a) if parts == ["shared"] else ("/".join(parts), a.T))
            continue
        if kind == "norm":
            parts.append("scale")
        elif parts[-1] in ("q", "k", "v", "o"):
            a = a.T
        else:
            parts.append("kernel")
            a = a.T
        out.append(("/".join(parts), np.ascontiguousarray(a)))
    slots = [(f"{n}_slot_v{rc}", np.full(a.shape[:1], 0.5, np.float32)) for n, a in out[:2] for rc in "rc"]
    return out + slots + [("global_step", np.array(1000, np.int64))]


def gpt2(model, prefix="model/"):
    """OpenAI's GPT-2 checkpoint: model/wte, model/h0/attn/c_attn/w [1, in, out], ln_1/g, ln_1/b."""
    mods = _modules(model)
    out = []
    for key, a in _unique(model):
        *path, leaf = key.split(".")
        kind = _kind(mods[".".join(path)])
        parts = []
        for part in path:
            if part.isdigit():
                parts[-1] += part
            else:
                parts.append(part)
        if kind == "emb":
            out.append((prefix + "/".join(parts), a))
            continue
        parts.append({"weight": "g" if kind == "norm" else "w", "bias": "b"}[leaf])
        out.append((prefix + "/".join(parts), a[None] if a.ndim == 2 else a))
    return out


def imagegpt(model):
    """image-gpt's checkpoint: per-head q/k/v/c_proj [heads, head_size, n_embd], no biases, RMS norms
    with g only, wte without the sos row, sos, wtet."""
    c = model.config
    n, nh = c.n_embd, c.n_head
    sd = {k: a for k, a in _unique(model)}
    out = [("model/wte", sd["transformer.wte.weight"][:-1]), ("model/sos", sd["transformer.wte.weight"][-1]),
           ("model/wpe", sd["transformer.wpe.weight"]), ("model/wtet", sd["lm_head.weight"]),
           ("model/ln_f/g", sd["transformer.ln_f.weight"])]
    for i in range(c.n_layer):
        p, h = f"transformer.h.{i}.", f"model/h{i}/"
        w = sd[p + "attn.c_attn.weight"]
        for j, q in enumerate("qkv"):
            out.append((h + f"attn/{q}_proj", np.ascontiguousarray(w[:, j * n:(j + 1) * n].T).reshape(nh, n // nh, n)))
        out += [(h + "attn/c_proj", sd[p + "attn.c_proj.weight"].reshape(nh, n // nh, n)),
                (h + "ln_1/g", sd[p + "ln_1.weight"]), (h + "ln_2/g", sd[p + "ln_2.weight"]),
                (h + "mlp/c_fc/w", sd[p + "mlp.c_fc.weight"]), (h + "mlp/c_proj/w", sd[p + "mlp.c_proj.weight"])]
    return out


def gpt_neo(model):
    """Mesh-TF GPT-Neo in bfloat16: gpt2/h0/attn/q ([in, out]), attn/compute_output_bias/o_b,
    norm_1/g, mlp/conv1d_main/c_fc/kernel; wte padded past the vocabulary."""
    import ml_dtypes

    sd = {k: a for k, a in _unique(model)}
    out = [("gpt2/wte", np.concatenate([sd["transformer.wte.weight"], np.ones((8, model.config.hidden_size), np.float32)])),
           ("gpt2/wpe", sd["transformer.wpe.weight"]),
           ("gpt2/ln_f/g", sd["transformer.ln_f.weight"]), ("gpt2/ln_f/b", sd["transformer.ln_f.bias"])]
    for i in range(model.config.num_layers):
        p, h = f"transformer.h.{i}.", f"gpt2/h{i}/"
        for q in "qkv":
            out.append((h + f"attn/{q}", sd[p + f"attn.attention.{q}_proj.weight"].T))
        out += [(h + "attn/o", sd[p + "attn.attention.out_proj.weight"].T),
                (h + "attn/compute_output_bias/o_b", sd[p + "attn.attention.out_proj.bias"])]
        for j in (1, 2):
            out += [(h + f"norm_{j}/g", sd[p + f"ln_{j}.weight"]), (h + f"norm_{j}/b", sd[p + f"ln_{j}.bias"])]
        for m in ("c_fc", "c_proj"):
            out += [(h + f"mlp/conv1d_main/{m}/kernel", sd[p + f"mlp.{m}.weight"].T),
                    (h + f"mlp/conv1d_main/{m}/bias", sd[p + f"mlp.{m}.bias"])]
    out = [(n, np.ascontiguousarray(a).astype(ml_dtypes.bfloat16)) for n, a in out]
    return out + [("gpt2/h0/attn/q/adam_m", out[4][1]), ("global_step", np.array(1000, np.int64))]


def funnel(model):
    """Funnel-Transformer's TF release: model/input/word_embedding/lookup_table, per-layer
    rel_attn/{q,k,v} kernels [d_model, heads, size], rel_attn/o/kernel [heads, size, d_model],
    encoder layers numbered across blocks, decoder layers after them."""
    c = model.config
    nh, dh, dm = c.n_head, c.d_head, c.d_model
    sd = {k: a for k, a in _unique(model)}
    out = [("model/input/word_embedding/lookup_table", sd["embeddings.word_embeddings.weight"]),
           ("model/input/layer_norm/gamma", sd["embeddings.layer_norm.weight"]),
           ("model/input/layer_norm/beta", sd["embeddings.layer_norm.bias"])]
    layers = [f"encoder.blocks.{b}.{i}." for b, n in enumerate(c.block_sizes) for i in range(n)]
    layers = [("encoder", p) for p in layers] + [("decoder", f"decoder.layers.{i}.") for i in range(c.num_decoder_layers)]
    for idx, (part, p) in enumerate(layers):
        t, a = f"model/{part}/layer_{idx}/", p + "attention."
        for q, mod in (("q", "q_head"), ("k", "k_head"), ("v", "v_head")):
            out.append((t + f"rel_attn/{q}/kernel", np.ascontiguousarray(sd[a + mod + ".weight"].T).reshape(dm, nh, dh)))
            if a + mod + ".bias" in sd:
                out.append((t + f"rel_attn/{q}/bias", sd[a + mod + ".bias"].reshape(nh, dh)))
        out += [(t + "rel_attn/o/kernel", np.ascontiguousarray(sd[a + "post_proj.weight"].T).reshape(nh, dh, dm)),
                (t + "rel_attn/o/bias", sd[a + "post_proj.bias"]), (t + "rel_attn/r/kernel", sd[a + "r_kernel"])]
        out += [(t + f"rel_attn/{b}", sd[a + b]) for b in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")]
        out += [(t + "rel_attn/layer_norm/gamma", sd[a + "layer_norm.weight"]),
                (t + "rel_attn/layer_norm/beta", sd[a + "layer_norm.bias"])]
        f = p + "ffn."
        for j in (1, 2):
            out += [(t + f"ff/layer_{j}/kernel", sd[f + f"linear_{j}.weight"].T), (t + f"ff/layer_{j}/bias", sd[f + f"linear_{j}.bias"])]
        out += [(t + "ff/layer_norm/gamma", sd[f + "layer_norm.weight"]), (t + "ff/layer_norm/beta", sd[f + "layer_norm.bias"])]
    gen = ("generator/encoder/layer_0/ff/layer_1/kernel", np.ones((4, 4), np.float32))  # ELECTRA-style pre-training
    return [(n, np.ascontiguousarray(a)) for n, a in out] + [gen, ("global_step", np.array(1000, np.int64))]


def from_map(tf_to_pt, model, transpose, slots=()):
    """For the loaders that hold the release's names in a map (XLNet, Transformer-XL, MobileNet): the
    map's names, each array laid out as the release holds it (per-layer lists stacked)."""
    by_ptr = {v.data_ptr(): v.detach().numpy() for v in model.state_dict(keep_vars=True).values()}
    out = []
    for name, pointer in tf_to_pt.items():
        if isinstance(pointer, list):
            a = np.stack([by_ptr[p.data_ptr()] for p in pointer])
        else:
            a = by_ptr[pointer.data_ptr()]
        out.append((name, np.ascontiguousarray(transpose(name, a))))
    return out + [(f"{n}/{s}", np.full_like(a, 0.5)) for n, a in out[:2] for s in slots]


def bert_tf2(model):
    """The TF2 Model Garden BERT encoder's object-based checkpoint, as tf.train.Checkpoint(model=encoder)
    writes it: layer_with_weights-0..3 the embeddings and their LayerNorm, then one per transformer
    block (EinsumDense kernels [hidden, heads, size], output [heads, size, hidden]), then the pooler.
    Paths below ``model/``, without ``/.ATTRIBUTES/VARIABLE_VALUE`` (the probe's tf.train.Checkpoint adds both)."""
    c = model.config
    nh, hs = c.num_attention_heads, c.hidden_size
    sd = {k: a for k, a in _unique(model)}
    out = [(f"layer_with_weights-{i}/embeddings", sd[f"embeddings.{t}_embeddings.weight"])
           for i, t in enumerate(("word", "position", "token_type"))]
    out += [("layer_with_weights-3/gamma", sd["embeddings.LayerNorm.weight"]),
            ("layer_with_weights-3/beta", sd["embeddings.LayerNorm.bias"])]
    for i in range(c.num_hidden_layers):
        t, p = f"layer_with_weights-{4 + i}/", f"encoder.layer.{i}."
        for q in ("query", "key", "value"):
            out += [(t + f"_attention_layer/_{q}_dense/kernel", sd[p + f"attention.self.{q}.weight"].T.reshape(hs, nh, -1)),
                    (t + f"_attention_layer/_{q}_dense/bias", sd[p + f"attention.self.{q}.bias"].reshape(nh, -1))]
        out += [(t + "_attention_output_dense/kernel", sd[p + "attention.output.dense.weight"].T.reshape(nh, -1, hs)),
                (t + "_attention_output_dense/bias", sd[p + "attention.output.dense.bias"]),
                (t + "_attention_layer_norm/gamma", sd[p + "attention.output.LayerNorm.weight"]),
                (t + "_attention_layer_norm/beta", sd[p + "attention.output.LayerNorm.bias"]),
                (t + "_intermediate_dense/kernel", sd[p + "intermediate.dense.weight"].T),
                (t + "_intermediate_dense/bias", sd[p + "intermediate.dense.bias"]),
                (t + "_output_dense/kernel", sd[p + "output.dense.weight"].T),
                (t + "_output_dense/bias", sd[p + "output.dense.bias"]),
                (t + "_output_layer_norm/gamma", sd[p + "output.LayerNorm.weight"]),
                (t + "_output_layer_norm/beta", sd[p + "output.LayerNorm.bias"])]
    t = f"layer_with_weights-{4 + c.num_hidden_layers}/"
    out += [(t + "kernel", sd["pooler.dense.weight"].T), (t + "bias", sd["pooler.dense.bias"])]
    return [(n, np.ascontiguousarray(a)) for n, a in out]
