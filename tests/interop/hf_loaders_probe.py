"""transformers 4.57.6's own ``load_tf_weights_in_*`` loaders, unchanged, on small TF checkpoints
named as each model's real TF release names its variables (hf_release_names.py): run under real
TensorFlow and under ``python -m ckptool.shim`` (tests/interop/test_tf_hf_loaders.py compares).

    python hf_loaders_probe.py write DIR       # (TF) one checkpoint per loader, written by TF
    python hf_loaders_probe.py load DIR OUT    # each loader into a fresh model: state_dicts to OUT

Every floating-point weight of the model whose values are written is first set to random values
(in bfloat16's grid for GPT-Neo, whose release is bfloat16), so a weight the loader fills differs
from the fresh model it is loaded into. ``load`` records per loader the state_dict or the
exception raised, and ``missing``: the floating-point entries that do not now hold the values
written (the test holds each loader to the list of what its release does not hold).
"""

import importlib
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_release_names as rn  # noqa: E402

BERT_CFG = dict(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, vocab_size=24,
                max_position_embeddings=32, type_vocab_size=2)
GPT_CFG = dict(vocab_size=24, n_positions=32, n_embd=8, n_layer=1, n_head=2)


def _map(loader_module, builder, transpose, slots=()):
    def names(model):
        build = getattr(importlib.import_module(f"transformers.models.{loader_module}"), builder)
        args = (model, model.config, {})[:build.__code__.co_argcount]
        return rn.from_map(build(*args), model, transpose, slots)
    return names


def _mobilenet_v1(model):
    named = _map("mobilenet_v1.modeling_mobilenet_v1", "_build_tf_to_pytorch_map", _slim)(model)
    extra = [(f"{n}/{s}", np.full_like(a, 0.5)) for n, a in named[:3] for s in ("RMSProp", "RMSProp_1")]
    extra += [(f"{n}/ExponentialMovingAverage", np.full_like(a, 0.25)) for n, a in named[:3]]
    return named + extra + [("global_step", np.array(1000, np.int64))]


def _mobilenet_v2(model):
    """MobileNet V2 releases hold each trainable weight and its moving average: the loader takes the average."""
    out = []
    for n, a in _map("mobilenet_v2.modeling_mobilenet_v2", "_build_tf_to_pytorch_map", _slim)(model):
        if "moving_" in n:
            out.append((n, a))
        else:
            out += [(n, np.full_like(a, 0.5)), (n + "/ExponentialMovingAverage", a)]
    return out + [("global_step", np.array(1000, np.int64))]


def _slim(name, a):
    """TF-slim's layouts: conv [h, w, in, out], depthwise [h, w, in, multiplier], logits [1, 1, in, out]."""
    if "depthwise_weights" in name:
        return a.transpose(2, 3, 0, 1)
    if name.endswith("weights"):
        return a.T[None, None] if a.ndim == 2 else a.transpose(2, 3, 1, 0)
    return a


def _xlnet_t(name, a):
    return a.T if "kernel" in name and ("ff" in name or "summary" in name or "logit" in name) else a


def _transfo_t(name, a):
    return a.T if "kernel" in name or "proj" in name else a


# key: (module, loader, config class, config kwargs, model class, release names, call)
# call: "c" loader(model, config, path); "p" loader(model, tf_checkpoint_path=path); "hub" BertGeneration's;
# or a dict of extra keyword arguments
LOADERS = {
    "albert": ("albert", "load_tf_weights_in_albert", "AlbertConfig", dict(BERT_CFG, embedding_size=4),
               "AlbertForPreTraining", rn.albert, "c"),
    "bert": ("bert", "load_tf_weights_in_bert", "BertConfig", BERT_CFG, "BertForPreTraining",
             lambda m: rn.with_adam(rn.bert_style(m, rn.BERT)), "c"),
    "bert_generation": ("bert_generation", "load_tf_weights_in_bert_generation", "BertGenerationConfig", BERT_CFG,
                        "BertGenerationEncoder", lambda m: rn.bert_style(m, [(r"^", "module/bert/")]), "hub"),
    "bert_tf2": ("bert", None, "BertConfig", BERT_CFG, "BertModel", rn.bert_tf2, "tf2"),  # a script's, not a loader
    "big_bird": ("big_bird", "load_tf_weights_in_big_bird", "BigBirdConfig",
                 dict(BERT_CFG, attention_type="original_full"), "BigBirdForPreTraining", rn.big_bird, "p"),
    "canine": ("canine", "load_tf_weights_in_canine", "CanineConfig",
               dict(BERT_CFG, downsampling_rate=2, upsampling_kernel_size=2, local_transformer_stride=4,
                    num_hash_functions=2, num_hash_buckets=16), "CanineModel", rn.canine, "c"),
    "convbert": ("convbert", "load_tf_weights_in_convbert", "ConvBertConfig", dict(BERT_CFG, embedding_size=4),
                 "ConvBertModel", rn.convbert, "c"),
    "decision_transformer": ("decision_transformer", "load_tf_weights_in_gpt2", "DecisionTransformerConfig",
                             dict(GPT_CFG, hidden_size=8, state_dim=3, act_dim=2), "DecisionTransformerGPT2Model",
                             rn.gpt2, "c"),
    "electra": ("electra", "load_tf_weights_in_electra", "ElectraConfig", dict(BERT_CFG, embedding_size=4),
                "ElectraForPreTraining", rn.electra, "c"),
    "electra_generator": ("electra", "load_tf_weights_in_electra", "ElectraConfig",
                          dict(BERT_CFG, embedding_size=4, hidden_size=6, num_attention_heads=2, intermediate_size=12),
                          "ElectraForMaskedLM", rn.electra, dict(discriminator_or_generator="generator")),
    "funnel": ("funnel", "load_tf_weights_in_funnel", "FunnelConfig",
               dict(vocab_size=24, block_sizes=[1, 1], d_model=8, n_head=2, d_head=4, d_inner=16, num_decoder_layers=1),
               "FunnelModel", rn.funnel, "c"),
    "gpt2": ("gpt2", "load_tf_weights_in_gpt2", "GPT2Config", GPT_CFG, "GPT2Model", rn.gpt2, "c"),
    "gpt_neo": ("gpt_neo", "load_tf_weights_in_gpt_neo", "GPTNeoConfig",
                dict(vocab_size=50257, max_position_embeddings=32, hidden_size=8, num_layers=1, num_heads=2,
                     attention_types=[[["global"], 1]]), "GPTNeoForCausalLM", rn.gpt_neo, "c"),
    "imagegpt": ("imagegpt", "load_tf_weights_in_imagegpt", "ImageGPTConfig", GPT_CFG,
                 "ImageGPTForCausalImageModeling", rn.imagegpt, "c"),
    "lxmert": ("lxmert", "load_tf_weights_in_lxmert", "LxmertConfig",
               dict(BERT_CFG, l_layers=1, x_layers=1, r_layers=1, num_qa_labels=2, num_object_labels=2,
                    num_attr_labels=2, visual_feat_dim=4, visual_pos_dim=4), "LxmertForPreTraining",
               lambda m: rn.with_adam(rn.bert_style(m, rn.BERT + [(r"/(logit_fc|x_layers|r_layers)_(\d+)/", r"/\1/\2/")])), "c"),
    "megatron_bert": ("megatron_bert", "load_tf_weights_in_megatron_bert", "MegatronBertConfig", BERT_CFG,
                      "MegatronBertForPreTraining", lambda m: rn.with_adam(rn.bert_style(m, rn.BERT)), "c"),
    "mobilebert": ("mobilebert", "load_tf_weights_in_mobilebert", "MobileBertConfig",
                   dict(BERT_CFG, embedding_size=4, true_hidden_size=8, intra_bottleneck_size=8,
                        num_feedforward_networks=2), "MobileBertForPreTraining", rn.mobilebert, "c"),
    "mobilenet_v1": ("mobilenet_v1", "load_tf_weights_in_mobilenet_v1", "MobileNetV1Config",
                     dict(depth_multiplier=0.25, num_labels=3, image_size=32), "MobileNetV1ForImageClassification",
                     _mobilenet_v1, "c"),
    "mobilenet_v2": ("mobilenet_v2", "load_tf_weights_in_mobilenet_v2", "MobileNetV2Config",
                     dict(depth_multiplier=0.25, num_labels=3, image_size=32), "MobileNetV2ForImageClassification",
                     _mobilenet_v2, "c"),
    "mt5": ("mt5", "load_tf_weights_in_mt5", "MT5Config",
            dict(vocab_size=24, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2, relative_attention_num_buckets=8),
            "MT5ForConditionalGeneration", rn.t5, "c"),
    "nezha": ("deprecated.nezha", "load_tf_weights_in_nezha", "NezhaConfig", BERT_CFG, "NezhaForPreTraining",
              lambda m: rn.with_adam(rn.bert_style(m, rn.BERT + [(r"^nezha/", "bert/")])), "c"),
    "nezha_scoped": ("deprecated.nezha", "load_tf_weights_in_nezha", "NezhaConfig", BERT_CFG, "NezhaForPreTraining",
                     lambda m: rn.with_adam(rn.bert_style(m, rn.BERT)), "c"),
    "qdqbert": ("deprecated.qdqbert", "load_tf_weights_in_qdqbert", "QDQBertConfig", BERT_CFG, "QDQBertModel",
                lambda m: rn.with_adam(rn.bert_style(m, [(r"^", "bert/")] + rn.BERT)), "p"),
    "realm": ("deprecated.realm", "load_tf_weights_in_realm", "RealmConfig",
              dict(BERT_CFG, retriever_proj_size=8), "RealmEmbedder", rn.realm, "c"),
    "rembert": ("rembert", "load_tf_weights_in_rembert", "RemBertConfig",
                dict(BERT_CFG, input_embedding_size=4, output_embedding_size=4), "RemBertModel",
                lambda m: rn.with_adam(rn.bert_style(m, [(r"^", "bert/")] + rn.BERT) + [
                    ("cls/predictions/output_bias", np.ones(24, np.float32)),
                    ("bert/embeddings/output_embedding", np.ones((24, 4), np.float32))]), "c"),
    "roc_bert": ("roc_bert", "load_tf_weights_in_roc_bert", "RoCBertConfig",
                 dict(BERT_CFG, shape_embedding_dim=8, pronunciation_embedding_dim=8, shape_vocab_size=16,
                      pronunciation_vocab_size=16), "RoCBertForPreTraining",
                 lambda m: rn.with_adam(rn.bert_style(m, rn.BERT)), "c"),
    "roformer": ("roformer", "load_tf_weights_in_roformer", "RoFormerConfig", dict(BERT_CFG, embedding_size=8),
                 "RoFormerForMaskedLM", lambda m: rn.with_adam(rn.bert_style(m, [(r"^roformer/", "bert/")])), "c"),
    "t5": ("t5", "load_tf_weights_in_t5", "T5Config",
           dict(vocab_size=24, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_heads=2, relative_attention_num_buckets=8),
           "T5ForConditionalGeneration", rn.t5, "c"),
    "tapas": ("tapas", "load_tf_weights_in_tapas", "TapasConfig", BERT_CFG, "TapasForMaskedLM", rn.tapas, "c"),
    "trajectory_transformer": ("deprecated.trajectory_transformer", "load_tf_weights_in_trajectory_transformer",
                               "TrajectoryTransformerConfig",
                               dict(vocab_size=24, n_embd=8, n_layer=1, n_head=2, block_size=8, transition_dim=4,
                                    observation_dim=2, action_dim=1), "TrajectoryTransformerModel",
                               lambda m: rn.with_adam(rn.bert_style(m)), "c"),
    "transfo_xl": ("deprecated.transfo_xl", "load_tf_weights_in_transfo_xl", "TransfoXLConfig",
                   dict(vocab_size=24, cutoffs=[4, 8], div_val=2, d_embed=8, d_model=8, n_head=2, d_head=4,
                        d_inner=16, n_layer=2, mem_len=0, tgt_len=8), "TransfoXLLMHeadModel",
                   _map("deprecated.transfo_xl.modeling_transfo_xl", "build_tf_to_pytorch_map", _transfo_t,
                        ("Adam", "Adam_1")), "c"),
    "xlnet": ("xlnet", "load_tf_weights_in_xlnet", "XLNetConfig",
              dict(vocab_size=24, d_model=8, n_layer=2, n_head=2, d_inner=16), "XLNetLMHeadModel",
              _map("xlnet.modeling_xlnet", "build_tf_xlnet_to_pytorch_map", _xlnet_t, ("Adam", "Adam_1")), "c"),
}


def _build(key, seed):
    mod_name, loader_name, config_name, kwargs, model_name, _, _ = LOADERS[key]
    mod = importlib.import_module(f"transformers.models.{mod_name}")
    modeling = importlib.import_module(f"transformers.models.{mod_name}.modeling_{mod_name.split('.')[-1]}")
    config = getattr(mod, config_name)(**kwargs)
    torch.manual_seed(seed)
    model = getattr(mod, model_name)(config)
    if seed == 0:  # the weights to write: every float entry random, GPT-Neo's on bfloat16's grid
        with torch.no_grad():
            for v in model.state_dict(keep_vars=True).values():
                if v.dtype.is_floating_point:
                    v.copy_(torch.randn(v.shape))
                    if key == "gpt_neo":
                        v.copy_(v.to(torch.bfloat16).float())
    return loader_name and getattr(modeling, loader_name), config, model


def write(directory):
    import tensorflow as tf

    written = {}
    for key, spec in LOADERS.items():
        try:
            _, _, model = _build(key, 0)
        except Exception as exc:  # a model this environment cannot build (qdqbert without pytorch-quantization)
            written[key] = f"{type(exc).__name__}: {exc}"
            continue
        named = spec[5](model)
        prefix = os.path.join(directory, key, "model.ckpt")
        os.makedirs(os.path.dirname(prefix))
        if spec[6] == "tf2":  # object-based: tf.train.Checkpoint over a tree of tf.Modules named as the release's
            root = tf.Module()
            for name, a in named:
                *path, leaf = name.split("/")
                node = root
                for part in path:
                    if not hasattr(node, part):
                        setattr(node, part, tf.Module())
                    node = getattr(node, part)
                setattr(node, leaf, tf.Variable(a))
            tf.train.Checkpoint(model=root).write(prefix)
            written[key] = len(named)
            continue
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=[n for n, _ in named], shape_and_slices=[""] * len(named),
                          tensors=[tf.constant(a) for _, a in named])
        written[key] = len(named)
    with open(os.path.join(directory, "written.json"), "w") as f:
        json.dump(written, f, indent=1)


def _call(key, loader, model, config, prefix):
    call = LOADERS[key][6]
    if call == "p":
        return loader(model, tf_checkpoint_path=prefix)
    if call == "hub":  # a TF-Hub module's path, read through tensorflow_hub (which neither run has)
        return loader(model, prefix, model_class="bert", is_encoder=True)
    return loader(model, config, prefix, **(call if isinstance(call, dict) else {}))


def load(directory, out):
    results, arrays = {}, {}
    for key in LOADERS:
        prefix = os.path.join(directory, key, "model.ckpt")
        if not os.path.exists(prefix + ".index") or LOADERS[key][6] == "tf2":
            continue
        loader, config, model = _build(key, 1)
        source = _build(key, 0)[2].state_dict()
        try:
            loaded = _call(key, loader, model, config, prefix)
            state = (loaded if loaded is not None else model).state_dict()
        except Exception as exc:  # the loader's own failure, compared with TF's
            results[key] = {"raised": type(exc).__name__, "str": str(exc).replace(directory, "<D>")}
            continue
        results[key] = {"keys": list(state), "missing": sorted(
            k for k, v in source.items() if v.dtype.is_floating_point and not (
                k in state and state[k].shape == v.shape and torch.equal(state[k], v)))}
        for k, v in state.items():
            arrays[f"{key}|{k}"] = v.detach().cpu().numpy()
    np.savez(out + ".npz", **arrays)
    with open(out + ".json", "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(os.path.abspath(sys.argv[2]))
    else:
        load(os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3]))
