#!/usr/bin/env python
"""More ``convert --to hf`` fixtures in tests/data/hf/ (as generate_hf.py writes them; its helpers are
used): EfficientNet (tf_keras ``keras.applications``), MobileNetV2 (TF-slim), ...

    /root/v/tf/bin/python tests/tf_fixtures/generate_hf_more2.py [--out tests/data/hf] [--only CASE ...]

Besides generate_hf.py's files, a case may hold ``outputs.npz``: ``inputs`` and the outputs of the
4.57 model (``hf457_*``) and of the original TF model (``tf_*``) on them, for the hf tier's forward
check. EfficientNet's oracle is transformers' ``convert_efficientnet_to_pytorch.py`` (its
``rename_keys`` and ``replace_params``, run unchanged on the tf_keras model's variables, from the
transformers 4.46.3 wheel fetched with pip into a temporary directory; the script's own top level
imports Keras 3's ``tensorflow.keras``, whose variable names are not the Keras 2 ones it maps, and
a label file from the Hub: only its two mapping functions are taken). Fixed seeds.
"""

import argparse
import ast
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402
import transformers as T  # noqa: E402
from generate_hf import OUT, expected, finish, nan_model, write_json  # noqa: E402

_SCRIPTS = {}


def script(path):
    """The 4.46.3 wheel's ``transformers/PATH`` source (the wheel fetched once, with pip)."""
    if "dir" not in _SCRIPTS:
        d = tempfile.mkdtemp()
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "transformers==4.46.3", "-d", d],
                       check=True)
        _SCRIPTS["dir"] = d
    (wheel,) = glob.glob(os.path.join(_SCRIPTS["dir"], "transformers-4.46.3-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        return z.read("transformers/" + path).decode()


def functions(source, *names):
    """The named top-level functions of a module's source, defined without running its imports."""
    tree = ast.parse(source)
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    ns = {"np": np, "torch": torch}
    exec(compile(ast.Module(body=keep, type_ignores=[]), "<script>", "exec"), ns)
    return [ns[n] for n in names]


def randomize(variables, seed):
    """Every variable set from one seeded generator (variances positive), in order."""
    rng = np.random.default_rng(seed)
    for v in variables:
        name = v.name
        if "normalization" in name:
            continue  # the input's mean 0 and variance 1: the model sees pixel / 255
        x = rng.standard_normal(v.shape).astype(np.float32) * 0.3
        if "moving_variance" in name:
            x = np.abs(x) + 0.5
        v.assign(x)


# --------------------------------------------------------------------------- EfficientNet (tf_keras)

# B0's stages (kernel sizes, strides, repeats, expansion) with fewer channels: Keras's EfficientNet()
# with a width coefficient of 0.05 (stem 8, top 64 channels); a tiny B0 would give two stages the
# same channels, where Keras adds a residual to a stage's first block that transformers' model lacks
EFF_BLOCKS = [dict(kernel_size=k, repeats=r, filters_in=i, filters_out=o, expand_ratio=e, id_skip=True, strides=s,
                   se_ratio=0.25)
              for k, r, i, o, e, s in zip([3, 3, 5, 3, 5, 5, 3], [1, 2, 1, 1, 1, 2, 1],
                                          [32, 320, 160, 320, 160, 480, 320], [320, 160, 320, 160, 480, 320, 480],
                                          [1, 6, 6, 6, 6, 6, 6], [1, 2, 2, 2, 1, 2, 1])]
EFF_SIZE = 36  # odd sizes after the stem: three stride-2 blocks padded on both sides (depthwise_padding)


def keras_efficientnet(width, depth, size, blocks="default", top=True, classes=5):
    from tf_keras.src.applications import efficientnet as E

    return E.EfficientNet(width, depth, size, model_name="efficientnet", weights=None, include_top=top,
                          input_shape=(size, size, 3), classes=classes, classifier_activation=None,
                          blocks_args=blocks if blocks != "default" else E.DEFAULT_BLOCKS_ARGS)


def keras_dw_padding(model):
    """The blocks (numbered as the script numbers them) whose depthwise padding Keras made symmetric."""
    blocks = sorted({lay.name.split("_")[0] for lay in model.layers if lay.name.startswith("block")})
    return [i for i, b in enumerate(blocks) for lay in model.layers
            if lay.name == f"{b}_dwconv_pad" and lay.padding[0][0] == lay.padding[0][1]]


def efficientnet_oracle(model, config, pixels):
    """The script's mapping of ``model``'s variables into a NaN-filled EfficientNet of ``config``, and
    both models' outputs on ``pixels`` (NCHW, what the image processor gives; Keras gets them x255)."""
    rename_keys, replace_params = functions(script("models/efficientnet/convert_efficientnet_to_pytorch.py"),
                                            "rename_keys", "replace_params")
    tf_params = {v.name: v.numpy() for v in model.trainable_variables}
    tf_params.update({v.name: v.numpy() for v in model.non_trainable_variables})
    named = (config.architectures or [None])[0]
    cls = getattr(T, named) if named else T.EfficientNetForImageClassification if config.num_labels else \
        T.EfficientNetModel
    hf = nan_model(cls(config)).eval()
    params = hf.state_dict()
    key_mapping = rename_keys(list(tf_params))
    if cls is T.EfficientNetModel:  # the script writes the classification model's names
        key_mapping = {k: v.removeprefix("efficientnet.") for k, v in key_mapping.items()
                       if not k.startswith("predictions/")}
    with torch.no_grad():
        replace_params(params, tf_params, key_mapping)
    hf.load_state_dict(params)
    with torch.no_grad():
        out = hf(torch.from_numpy(pixels))
    theirs = model(np.transpose(pixels, (0, 2, 3, 1)) * 255.0, training=False).numpy()
    mine = out.logits if cls is not T.EfficientNetModel else np.transpose(out.last_hidden_state.numpy(), (0, 2, 3, 1))
    return hf, {"inputs": pixels, "hf457_out": np.asarray(mine), "tf_out": theirs}


def efficientnet_config(width, depth, size, blocks, classes, dw_padding):
    kw = dict(width_coefficient=width, depth_coefficient=depth, image_size=size, dropout_rate=0.2,
              depthwise_padding=dw_padding, hidden_dim=max(8, int(1280 * width + 4) // 8 * 8), num_labels=classes)
    if blocks != "default":
        kw.update(kernel_sizes=[b["kernel_size"] for b in blocks], in_channels=[b["filters_in"] for b in blocks],
                  out_channels=[b["filters_out"] for b in blocks], strides=[b["strides"] for b in blocks],
                  num_block_repeats=[b["repeats"] for b in blocks], expand_ratios=[b["expand_ratio"] for b in blocks])
    return T.EfficientNetConfig(**kw)


def _efficientnet(d, top, seed, named):
    classes = 5 if top else 0
    model = keras_efficientnet(0.05, 1.0, EFF_SIZE, EFF_BLOCKS, top=top, classes=classes or 5)
    randomize(model.weights, seed)
    if named:  # the Keras variable names (layer/variable), as a TF1 Saver of model.weights writes them
        save_named(os.path.join(d, "model.ckpt"), model.weights)
        src = "model.ckpt"
    else:
        model.save_weights(os.path.join(d, "ckpt"))
        src = "ckpt"
    config = efficientnet_config(0.05, 1.0, EFF_SIZE, EFF_BLOCKS, classes, [3, 4, 6])
    pixels = np.random.default_rng(seed + 1).random((2, 3, EFF_SIZE, EFF_SIZE), dtype=np.float32)
    hf, outs = efficientnet_oracle(model, config, pixels)
    np.savez(os.path.join(d, "outputs.npz"), **outs)
    print("keras vs 4.57 max diff", float(np.abs(outs["tf_out"] - outs["hf457_out"]).max()))
    write_json(os.path.join(d, "config.json"), {"width_coefficient": 0.05, "depth_coefficient": 1.0,
                                                "default_size": EFF_SIZE, "dropout_rate": 0.2,
                                                **{k: [b[v] for b in EFF_BLOCKS] for k, v in _BLOCK_KEYS.items()}})
    cls = type(hf).__name__
    finish(d, hf, expected(hf), src, ["--config", "config.json"], cls,
           f"convert_efficientnet_to_pytorch.py's rename_keys + replace_params ({cls})")


_BLOCK_KEYS = {"kernel_sizes": "kernel_size", "in_channels": "filters_in", "out_channels": "filters_out",
               "strides": "strides", "num_block_repeats": "repeats", "expand_ratios": "expand_ratio"}


def save_named(prefix, variables):
    """A TF1 Saver checkpoint of ``variables`` under their Keras names (``stem_conv/kernel``)."""
    values = [(v.name.split(":")[0], v.numpy()) for v in variables]
    g = tf.Graph()
    with g.as_default():
        for name, value in values:
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=False)


def efficientnet(d):
    _efficientnet(d, True, 20, named=False)


def efficientnet_features(d):
    _efficientnet(d, False, 21, named=True)


# --------------------------------------------------------------------------- MobileNetV2 (TF-slim)


def slim_mobilenet_v2(a, config, labels, ema=True):
    """TF-slim's MobilenetV2 names and shapes for ``config`` (transformers' channel rounding, which is
    slim's), with the training script's EMA shadows (each differing from its raw value) and RMSProp slots."""
    from transformers.models.mobilenet_v2.modeling_mobilenet_v2 import apply_depth_multiplier, make_divisible

    def conv(scope, h, cin, cout, depthwise=False):
        a.add(f"{scope}/{'depthwise_weights' if depthwise else 'weights'}", h, h, cin, 1 if depthwise else cout)
        a.add(f"{scope}/BatchNorm/beta", cout)
        a.add(f"{scope}/BatchNorm/gamma", cout)
        a.add(f"{scope}/BatchNorm/moving_mean", cout)
        a[f"{scope}/BatchNorm/moving_variance"] = np.abs(a.rng.standard_normal(cout)).astype(np.float32) + 0.5

    ch = [apply_depth_multiplier(config, c) for c in [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160,
                                                       160, 160, 320]]
    first = apply_depth_multiplier(config, 32)
    conv("MobilenetV2/Conv", 3, 3, first)
    conv("MobilenetV2/expanded_conv/depthwise", 3, first, first, True)
    conv("MobilenetV2/expanded_conv/project", 1, first, ch[0])
    for i in range(16):
        exp = make_divisible(int(round(ch[i] * config.expand_ratio)), config.depth_divisible_by, config.min_depth)
        conv(f"MobilenetV2/expanded_conv_{i + 1}/expand", 1, ch[i], exp)
        conv(f"MobilenetV2/expanded_conv_{i + 1}/depthwise", 3, exp, exp, True)
        conv(f"MobilenetV2/expanded_conv_{i + 1}/project", 1, exp, ch[i + 1])
    last = 1280 if config.finegrained_output and config.depth_multiplier < 1 else apply_depth_multiplier(config, 1280)
    conv("MobilenetV2/Conv_1", 1, ch[16], last)
    if labels:
        a.add("MobilenetV2/Logits/Conv2d_1c_1x1/weights", 1, 1, last, labels)
        a.add("MobilenetV2/Logits/Conv2d_1c_1x1/biases", labels)
    for n in list(a) if ema else ():
        a[n + "/ExponentialMovingAverage"] = a[n] * 0.9 + 0.01
        if "expanded_conv_1/" in n and not n.endswith(("moving_mean", "moving_variance")):  # a few slots
            a[n + "/RMSProp"] = np.ones_like(a[n])
            a[n + "/RMSProp_1"] = np.zeros_like(a[n])


def mobilenet_v2_case(d, dm, fine, labels, seed, size=32, ema=True):
    """A slim checkpoint, the 4.57 loader's model, and its outputs on a seeded input (no TF-slim here
    to run the original: the 4.57 model's outputs are the reference)."""
    from generate_hf import STEP, Arrays, save_v1

    config = T.MobileNetV2Config(depth_multiplier=dm, finegrained_output=fine, num_labels=labels or 2,
                                 image_size=size)
    a = Arrays(seed)
    slim_mobilenet_v2(a, config, labels, ema)
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    cls = T.MobileNetV2ForImageClassification if labels else T.MobileNetV2Model
    model = nan_model(cls(config)).eval()
    T.load_tf_weights_in_mobilenet_v2(model, config, os.path.join(d, "model.ckpt"))
    pixels = np.random.default_rng(seed + 1).standard_normal((2, 3, size, size)).astype(np.float32)
    with torch.no_grad():
        out = model(torch.from_numpy(pixels))
    y = out.logits if labels else out.last_hidden_state.permute(0, 2, 3, 1)
    np.savez(os.path.join(d, "outputs.npz"), inputs=pixels, hf457_out=y.numpy())
    finish(d, model, expected(model), "model.ckpt", [], cls.__name__,
           f"load_tf_weights_in_mobilenet_v2({cls.__name__})" + (", EMA shadows taken" if ema else ""))
    return model


def mobilenet_v2(d):
    mobilenet_v2_case(d, 0.1, False, 5, 40)


def mobilenet_v2_features(d):
    mobilenet_v2_case(d, 0.1, False, 0, 41, ema=False)


# --------------------------------------------------------------------------- XLNet (zihangdai/xlnet)

XLNET = dict(n_token=40, d_model=8, n_layer=2, n_head=2, d_head=4, d_inner=12, ff_activation="gelu", untie_r=True)


def xlnet_spiece(path, vocab_size):
    """A tiny SentencePiece model with XLNet's special pieces (sentencepiece pip-installed into a temporary
    directory where the venv has none)."""
    try:
        import sentencepiece
    except ImportError:
        target = tempfile.mkdtemp()
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", target, "sentencepiece"], check=True)
        sys.path.insert(0, target)
        import sentencepiece

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "text"), "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\n" * 50 + "Hello World, a tiny corpus\n" * 50)
        sentencepiece.SentencePieceTrainer.train(
            input=os.path.join(tmp, "text"), model_prefix=os.path.join(tmp, "sp"), vocab_size=vocab_size,
            model_type="unigram", unk_id=0, bos_id=1, eos_id=2, pad_id=5, character_coverage=1.0,
            control_symbols=["<cls>", "<sep>", "<mask>", "<eod>", "<eop>"], normalization_rule_name="identity",
            minloglevel=2)
        shutil.copy(os.path.join(tmp, "sp.model"), path)


def slim_xlnet(a, cfg, head=None, task="sts-b"):
    """xlnet's modeling.py names (``head``: None, "lm", "classification" or "regression"), Adam's slots."""
    D, L, H, Dh, FF, V = (cfg[k] for k in ("d_model", "n_layer", "n_head", "d_head", "d_inner", "n_token"))
    t = "model/transformer"
    a.add(f"{t}/word_embedding/lookup_table", V, D)
    a.add(f"{t}/mask_emb/mask_emb", 1, 1, D)
    for b in ("r_w_bias", "r_r_bias"):
        a.add(f"{t}/{b}", L, H, Dh)
    for i in range(L):
        p = f"{t}/layer_{i}"
        for q in "qkvro":
            a.add(f"{p}/rel_attn/{q}/kernel", D, H, Dh)
        a.add(f"{p}/rel_attn/LayerNorm/beta", D)
        a.add(f"{p}/rel_attn/LayerNorm/gamma", D)
        a.add(f"{p}/ff/layer_1/kernel", D, FF)
        a.add(f"{p}/ff/layer_1/bias", FF)
        a.add(f"{p}/ff/layer_2/kernel", FF, D)
        a.add(f"{p}/ff/layer_2/bias", D)
        a.add(f"{p}/ff/LayerNorm/beta", D)
        a.add(f"{p}/ff/LayerNorm/gamma", D)
    a.add(f"{t}/r_s_bias", L, H, Dh)
    a.add(f"{t}/seg_embed", L, 2, H, Dh)
    if head == "lm":
        a.add("model/lm_loss/bias", V)
    elif head:
        a.add("model/sequnece_summary/summary/kernel", D, D)
        a.add("model/sequnece_summary/summary/bias", D)
        n = 1 if head == "regression" else 3
        a.add(f"model/{head}_{task}/logit/kernel", D, n)
        a.add(f"model/{head}_{task}/logit/bias", n)
    for n in [f"{t}/word_embedding/lookup_table", f"{t}/layer_0/rel_attn/q/kernel"]:
        a[n + "/Adam"] = np.zeros_like(a[n])
        a[n + "/Adam_1"] = np.ones_like(a[n])


def xlnet_case(d, cfg, head, seed, task="sts-b", vocab=True):
    """An xlnet checkpoint, xlnet_config.json (and spiece.model), the 4.57 loader's model and its logits."""
    from generate_hf import STEP, Arrays, save_v1

    a = Arrays(seed)
    slim_xlnet(a, cfg, head, task)
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)
    write_json(os.path.join(d, "xlnet_config.json"), cfg)
    if vocab:
        xlnet_spiece(os.path.join(d, "spiece.model"), cfg["n_token"])
    n = {"regression": 1, "classification": 3}.get(head, 2)
    config = T.XLNetConfig(vocab_size=cfg["n_token"], d_model=cfg["d_model"], n_layer=cfg["n_layer"],
                           n_head=cfg["n_head"], d_inner=cfg["d_inner"], untie_r=True,
                           ff_activation={"gelu": "gelu_new", "relu": "relu"}[cfg["ff_activation"]],  # tanh GELU
                           num_labels=n, finetuning_task=task if head == "regression" else None)
    cls = {"lm": T.XLNetLMHeadModel, None: T.XLNetModel}.get(head, T.XLNetForSequenceClassification)
    model = nan_model(cls(config)).eval()
    T.load_tf_weights_in_xlnet(model, config, os.path.join(d, "model.ckpt"))
    by_hand = []
    if head == "classification":  # the loader places regression_TASK only: the same rule, by hand
        with torch.no_grad():
            model.logits_proj.weight.copy_(torch.from_numpy(a[f"model/{head}_{task}/logit/kernel"].T))
            model.logits_proj.bias.copy_(torch.from_numpy(a[f"model/{head}_{task}/logit/bias"]))
        by_hand = ["logits_proj.weight", "logits_proj.bias"]
    rng = np.random.default_rng(seed + 1)
    ids = rng.integers(0, cfg["n_token"], (2, 7))
    types = (np.arange(7)[None, :] >= 4).astype(np.int64).repeat(2, 0)
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(types))
    y = out.logits if head else out.last_hidden_state
    np.savez(os.path.join(d, "outputs.npz"), in_input_ids=ids, in_token_type_ids=types, hf457_out=y.numpy())
    args = ["--config", "xlnet_config.json"] + (["--vocab", "spiece.model"] if vocab else [])
    finish(d, model, expected(model), "model.ckpt", args, cls.__name__,
           f"load_tf_weights_in_xlnet({cls.__name__})" + (f", finetuning_task {task!r}" if head == "regression"
                                                          else ""), by_hand)
    return model


def xlnet(d):
    xlnet_case(d, XLNET, "lm", 60)


def xlnet_regression(d):
    xlnet_case(d, dict(XLNET, n_layer=3, ff_activation="relu"), "regression", 61, vocab=False)


# --------------------------------------------------------------------------- ImageGPT (openai/image-gpt)


def imagegpt_case(d, clusters, n_ctx, n, heads, layers, seed, head=True):
    """image-gpt's names and shapes (tests/interop/hf_release_names.py: per-head q/k/v/c_proj, no
    biases, g-only norms, wte without the sos row, sos, wtet; conv1d's w [1, nx, nf]); the 4.57
    loader's model (its biases as the fresh model has them: zero) and its logits."""
    from generate_hf import STEP, Arrays, save_v1

    a = Arrays(seed)
    a.add("model/wte", clusters, n)
    a.add("model/sos", n)
    a.add("model/wpe", n_ctx, n)
    for i in range(layers):
        h = f"model/h{i}"
        a.add(f"{h}/ln_1/g", n)
        for p in ("q_proj", "k_proj", "v_proj", "c_proj"):
            a.add(f"{h}/attn/{p}", heads, n // heads, n)
        a.add(f"{h}/ln_2/g", n)
        a.add(f"{h}/mlp/c_fc/w", 1, n, 4 * n)
        a.add(f"{h}/mlp/c_proj/w", 1, 4 * n, n)
    a.add("model/ln_f/g", n)
    if head:
        a.add("model/wtet", clusters, n)
    save_v1(os.path.join(d, "model.ckpt"), a, extra=STEP)  # no Adam slots: the 4.57 loader fails on them
    config = T.ImageGPTConfig(vocab_size=clusters + 1, n_positions=n_ctx, n_embd=n, n_layer=layers, n_head=heads)
    cls = T.ImageGPTForCausalImageModeling if head else T.ImageGPTModel
    model = nan_model(cls(config)).eval()
    with torch.no_grad():
        for k, v in model.named_parameters():
            if k.endswith(".bias"):
                v.zero_()  # the fresh model's, which the loader leaves
    if head:
        T.load_tf_weights_in_imagegpt(model, config, os.path.join(d, "model.ckpt"))
    else:  # the loader walks every name from the ForCausal model's top (wtet -> lm_head): the body of one
        full = nan_model(T.ImageGPTForCausalImageModeling(config))
        T.load_tf_weights_in_imagegpt(full, config, os.path.join(d, "model.ckpt"))
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if not k.endswith(".bias"):
                    v.copy_(full.transformer.state_dict()[k])
    ids = np.random.default_rng(seed + 1).integers(0, clusters + 1, (2, n_ctx - 2))
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids))
    y = out.logits if head else out.last_hidden_state
    np.savez(os.path.join(d, "outputs.npz"), in_input_ids=ids, hf457_out=y.numpy())
    finish(d, model, expected(model), "model.ckpt", [], cls.__name__,
           f"load_tf_weights_in_imagegpt({'ImageGPTForCausalImageModeling' if head else 'its body'}); the biases "
           "image-gpt has not are the fresh model's zeros")
    return model


def imagegpt(d):
    imagegpt_case(d, 16, 16, 8, 2, 2, 80)


# --------------------------------------------------------------------------- Decision Transformer


def decision_transformer_case(d, n, heads, layers, vocab, n_ctx, seed):
    """An OpenAI GPT-2 checkpoint (what the Decision Transformer's loader, a copy of GPT-2's, reads) and
    that loader's DecisionTransformerGPT2Model, its activation OpenAI's tanh GELU."""
    from generate_hf import Arrays, save_v1
    from transformers.models.decision_transformer import modeling_decision_transformer as M

    a = Arrays(seed)
    a.add("model/wpe", n_ctx, n)
    a.add("model/wte", vocab, n)
    for i in range(layers):
        h = f"model/h{i}"
        for ln in ("ln_1", "ln_2"):
            a.add(f"{h}/{ln}/g", n)
            a.add(f"{h}/{ln}/b", n)
        a.add(f"{h}/attn/c_attn/w", 1, n, 3 * n)
        a.add(f"{h}/attn/c_attn/b", 3 * n)
        a.add(f"{h}/attn/c_proj/w", 1, n, n)
        a.add(f"{h}/attn/c_proj/b", n)
        a.add(f"{h}/mlp/c_fc/w", 1, n, 4 * n)
        a.add(f"{h}/mlp/c_fc/b", 4 * n)
        a.add(f"{h}/mlp/c_proj/w", 1, 4 * n, n)
        a.add(f"{h}/mlp/c_proj/b", n)
    a.add("model/ln_f/g", n)
    a.add("model/ln_f/b", n)
    save_v1(os.path.join(d, "model.ckpt"), a)  # as OpenAI's release: no global_step (the loader fails on it)
    write_json(os.path.join(d, "hparams.json"), {"n_vocab": vocab, "n_ctx": n_ctx, "n_embd": n, "n_head": heads,
                                                 "n_layer": layers})
    config = T.DecisionTransformerConfig(vocab_size=vocab, n_positions=n_ctx, hidden_size=n, n_head=heads,
                                         n_layer=layers, activation_function="gelu_new")
    model = nan_model(T.DecisionTransformerGPT2Model(config)).eval()
    M.DecisionTransformerGPT2PreTrainedModel.load_tf_weights(model, config, os.path.join(d, "model.ckpt"))
    emb = np.random.default_rng(seed + 1).standard_normal((2, n_ctx - 3, n)).astype(np.float32)
    with torch.no_grad():  # the Decision Transformer feeds its GPT-2 embeddings (input_ids fails in 4.57)
        y = model(inputs_embeds=torch.from_numpy(emb)).last_hidden_state
    np.savez(os.path.join(d, "outputs.npz"), in_inputs_embeds=emb, hf457_out=y.numpy())
    finish(d, model, expected(model), "model.ckpt", ["--arch", "decision-transformer", "--config", "hparams.json"],
           "DecisionTransformerGPT2Model", "DecisionTransformerGPT2PreTrainedModel.load_tf_weights "
           "(load_tf_weights_in_gpt2's copy)")
    return model


def decision_transformer(d):
    decision_transformer_case(d, 8, 2, 2, 12, 16, 100)


# --------------------------------------------------------------------------- LXMERT


LXMERT = dict(vocab_size=20, hidden_size=8, num_attention_heads=2, intermediate_size=12, max_position_embeddings=16,
              type_vocab_size=2, l_layers=2, x_layers=1, r_layers=2, num_qa_labels=3, num_object_labels=4,
              num_attr_labels=2, visual_feat_dim=6, visual_pos_dim=4)


def lxmert_case(d, cfg, seed, cls_name="LxmertForPreTraining"):
    """Google BERT's naming rules on LXMERT's modules (tests/interop/hf_release_names.py, as the interop
    probe writes LXMERT's release: ``x_layers/N``, ``r_layers/N``, ``logit_fc/N``), the 4.57 loader's
    model and its outputs."""
    sys.path.insert(0, os.path.join(HERE, "..", "interop"))
    import hf_release_names as rn
    from generate_hf import save_v1
    from transformers.models.lxmert.modeling_lxmert import load_tf_weights_in_lxmert

    torch.manual_seed(seed)
    config = T.LxmertConfig(**cfg)
    source = getattr(T, cls_name)(config)
    names = rn.with_adam(rn.bert_style(source, rn.BERT + [(r"/(logit_fc|x_layers|r_layers)_(\d+)/", r"/\1/\2/")]))
    save_v1(os.path.join(d, "model.ckpt"), dict(names))  # with_adam: Adam slots and global_step
    write_json(os.path.join(d, "config.json"), cfg)  # transformers' names, no model_type: as bert_config.json
    model = nan_model(getattr(T, cls_name)(config)).eval()
    load_tf_weights_in_lxmert(model, config, os.path.join(d, "model.ckpt"))
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, cfg["vocab_size"], (2, 7))
    feats = rng.standard_normal((2, 5, cfg["visual_feat_dim"])).astype(np.float32)
    pos = rng.random((2, 5, cfg["visual_pos_dim"])).astype(np.float32)
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), visual_feats=torch.from_numpy(feats),
                    visual_pos=torch.from_numpy(pos))
    field = {"LxmertForPreTraining": "prediction_logits", "LxmertForQuestionAnswering": "question_answering_score",
             "LxmertModel": "language_output"}[cls_name]
    np.savez(os.path.join(d, "outputs.npz"), in_input_ids=ids, in_visual_feats=feats, in_visual_pos=pos,
             hf457_out=getattr(out, field).numpy(), field=np.array(field))
    finish(d, model, expected(model), "model.ckpt", ["--config", "config.json"], cls_name,
           f"load_tf_weights_in_lxmert({cls_name})")
    return model


def lxmert(d):
    lxmert_case(d, LXMERT, 120)


CASES = {f.__name__: f for f in (efficientnet, efficientnet_features, mobilenet_v2, mobilenet_v2_features, xlnet,
                                 xlnet_regression, imagegpt, decision_transformer, lxmert)}


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
