"""transformers 4.57.6's own ``load_tf_weights_in_*`` loaders, unchanged, on small TF checkpoints:
run under real TensorFlow and under ``python -m ckptool.shim`` (tests/interop/test_tf_hf_loaders.py
compares the two).

    python hf_loaders_probe.py write DIR       # (TF) one checkpoint per loader, written by TF
    python hf_loaders_probe.py load DIR OUT    # each loader into a fresh model: state_dicts to OUT

``write`` names each variable the way the loader expects (derived from the PyTorch model's own
parameters by the loader family's naming: ``layer_0``, ``kernel`` transposed, ``gamma``/``beta``,
``*_embeddings``; GPT-2's ``model/h0/.../w``; T5's ``kernel``/``scale``/``embedding``; MobileNet's
map), plus an optimizer slot and ``global_step`` that loaders skip; GPT-Neo's in bfloat16, as
Mesh-TF writes them (its loader goes through ``tf.dtypes.cast``). ``load`` records, per loader,
the state_dict (bytes) or the exception raised, and the ``coverage``: how many parameters now
equal the values written.
"""

# ruff: noqa: B023  (each lambda is called where it is made)

import importlib
import json
import os
import sys

import numpy as np
import torch

SMALL = dict(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, vocab_size=24,
             max_position_embeddings=32, embedding_size=8, n_embd=8, n_layer=1, n_head=2, n_positions=32, n_ctx=32,
             d_model=8, d_ff=16, d_kv=4, num_layers=1, num_heads=2, num_decoder_layers=1, d_inner=16, mem_len=0,
             type_vocab_size=2, l_layers=1, x_layers=1, r_layers=1, block_sizes=[1, 1], block_repeats=[1, 1],
             num_hidden_groups=1, true_hidden_size=8, intra_bottleneck_size=8, num_feedforward_networks=1,
             downsampling_rate=2, upsampling_kernel_size=2, local_transformer_stride=4, depth_multiplier=0.25,
             num_labels=3, image_size=32, attention_type="original_full", window_size=4, max_length=16,
             attention_types=[[["global"], 1]], num_buckets=8, d_embed=8, cutoffs=[4], div_val=1, n_token=24,
             tgt_len=8, ext_len=0, clamp_len=-1, shape_embedding_dim=8, pronunciation_embedding_dim=8,
             shape_vocab_size=16, pronunciation_vocab_size=16, enable_shape=True, enable_pronunciation=True,
             input_embedding_size=8, output_embedding_size=8, num_qa_labels=2, num_object_labels=2,
             num_attr_labels=2, visual_feat_dim=4, visual_pos_dim=4, action_dim=2, observation_dim=2,
             block_size=8, transition_dim=4, n_embd_tt=8, retriever_proj_size=8, num_candidates=2,
             reader_layer_norm_eps=1e-3, span_hidden_size=8, max_span_width=2, reader_beam_size=2,
             num_block_records=2, searcher_beam_size=2)
BERT = dict(join="_", linear="kernel", norm=("gamma", "beta"), emb="drop", prefix="", root="")
T5 = dict(join="_", linear="kernel", norm=("scale", "beta"), emb="embedding", prefix="", root="")
GPT2 = dict(join="", linear="w", norm=("g", "b"), emb="drop", prefix="model/", root="", bias="b")

# name: (module, loader, config, model, naming, extra loader kwargs)
LOADERS = {
    "albert": ("albert", "load_tf_weights_in_albert", "AlbertConfig", "AlbertForPreTraining", BERT),
    "bert": ("bert", "load_tf_weights_in_bert", "BertConfig", "BertForPreTraining", BERT),
    "big_bird": ("big_bird", "load_tf_weights_in_big_bird", "BigBirdConfig", "BigBirdForPreTraining", BERT),
    "canine": ("canine", "load_tf_weights_in_canine", "CanineConfig", "CanineModel", BERT),
    "convbert": ("convbert", "load_tf_weights_in_convbert", "ConvBertConfig", "ConvBertModel", BERT),
    "decision_transformer": ("decision_transformer", "load_tf_weights_in_gpt2", "DecisionTransformerConfig",
                             "DecisionTransformerGPT2Model", GPT2),
    "electra": ("electra", "load_tf_weights_in_electra", "ElectraConfig", "ElectraForPreTraining", BERT),
    "funnel": ("funnel", "load_tf_weights_in_funnel", "FunnelConfig", "FunnelModel", BERT),
    "gpt2": ("gpt2", "load_tf_weights_in_gpt2", "GPT2Config", "GPT2Model", GPT2),
    "gpt_neo": ("gpt_neo", "load_tf_weights_in_gpt_neo", "GPTNeoConfig", "GPTNeoForCausalLM",
                dict(GPT2, prefix="gpt2/", root="transformer", bf16=True)),
    "imagegpt": ("imagegpt", "load_tf_weights_in_imagegpt", "ImageGPTConfig", "ImageGPTForCausalImageModeling",
                 dict(GPT2, root="transformer")),
    "lxmert": ("lxmert", "load_tf_weights_in_lxmert", "LxmertConfig", "LxmertForPreTraining", BERT),
    "megatron_bert": ("megatron_bert", "load_tf_weights_in_megatron_bert", "MegatronBertConfig",
                      "MegatronBertForPreTraining", BERT),
    "mobilebert": ("mobilebert", "load_tf_weights_in_mobilebert", "MobileBertConfig", "MobileBertForPreTraining",
                   BERT),
    "mobilenet_v1": ("mobilenet_v1", "load_tf_weights_in_mobilenet_v1", "MobileNetV1Config",
                     "MobileNetV1ForImageClassification", dict(mobilenet=True)),
    "mobilenet_v2": ("mobilenet_v2", "load_tf_weights_in_mobilenet_v2", "MobileNetV2Config",
                     "MobileNetV2ForImageClassification", dict(mobilenet=True)),
    "mt5": ("mt5", "load_tf_weights_in_mt5", "MT5Config", "MT5ForConditionalGeneration", T5),
    "rembert": ("rembert", "load_tf_weights_in_rembert", "RemBertConfig", "RemBertModel", BERT),
    "roc_bert": ("roc_bert", "load_tf_weights_in_roc_bert", "RoCBertConfig", "RoCBertForPreTraining", BERT),
    "roformer": ("roformer", "load_tf_weights_in_roformer", "RoFormerConfig", "RoFormerForMaskedLM", BERT),
    "t5": ("t5", "load_tf_weights_in_t5", "T5Config", "T5ForConditionalGeneration", T5),
    "tapas": ("tapas", "load_tf_weights_in_tapas", "TapasConfig", "TapasForMaskedLM", BERT),
    "xlnet": ("xlnet", "load_tf_weights_in_xlnet", "XLNetConfig", "XLNetLMHeadModel", BERT),
    "nezha": ("deprecated.nezha", "load_tf_weights_in_nezha", "NezhaConfig", "NezhaForPreTraining", BERT),
    "qdqbert": ("deprecated.qdqbert", "load_tf_weights_in_qdqbert", "QDQBertConfig", "QDQBertModel", BERT),
    "realm": ("deprecated.realm", "load_tf_weights_in_realm", "RealmConfig", "RealmEmbedder", BERT),
    "trajectory_transformer": ("deprecated.trajectory_transformer", "load_tf_weights_in_trajectory_transformer",
                               "TrajectoryTransformerConfig", "TrajectoryTransformerModel", BERT),
    "transfo_xl": ("deprecated.transfo_xl", "load_tf_weights_in_transfo_xl", "TransfoXLConfig",
                   "TransfoXLLMHeadModel", BERT),
    "bert_generation": ("bert_generation", "load_tf_weights_in_bert_generation", "BertGenerationConfig",
                        "BertGenerationEncoder", BERT),
}


def _build(key, seed):
    mod_name, loader_name, config_name, model_name, naming = LOADERS[key]
    mod = importlib.import_module(f"transformers.models.{mod_name}")
    modeling = importlib.import_module(f"transformers.models.{mod_name}.modeling_{mod_name.split('.')[-1]}")
    drop = {"funnel": ("attention_type",), "xlnet": ("max_position_embeddings", "n_positions", "n_ctx", "max_length"),
            "transfo_xl": ("max_position_embeddings", "n_positions", "n_ctx", "max_length")}.get(key, ())
    config = getattr(mod, config_name)(**{k: v for k, v in SMALL.items() if k not in drop})
    torch.manual_seed(seed)
    model = getattr(mod, model_name)(config)
    return getattr(modeling, loader_name), config, model, naming


def _tf_names(model, naming):
    """(tf name, array) for each parameter, named as the loader family expects."""
    import torch.nn as nn

    if naming.get("mobilenet"):
        modeling = sys.modules[type(model).__module__]
        out = []
        for name, p in modeling._build_tf_to_pytorch_map(model, model.config, {}).items():
            a = p.detach().numpy()
            if "depthwise_weights" in name:
                a = np.transpose(a, (2, 3, 0, 1))
            elif "weights" in name:
                a = a.transpose()[None, None] if a.ndim == 2 else np.transpose(a, (2, 3, 1, 0))
            out.append((name, a))
        return out
    root = model.get_submodule(naming["root"]) if naming["root"] else model
    modules = dict(root.named_modules())
    seen, out = set(), []
    for key, p in root.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        *path, leaf = key.split(".")
        owner = modules[".".join(path)]
        parts = []
        for part in path:
            if part.isdigit() and parts:
                parts[-1] += naming["join"] + part
            else:
                parts.append(part)
        a = p.detach().numpy()
        if isinstance(owner, nn.Embedding) and naming["emb"] == "drop":
            pass
        elif isinstance(owner, nn.Embedding):
            parts.append(naming["emb"])
        elif isinstance(owner, nn.LayerNorm) or "norm" in type(owner).__name__.lower():
            parts.append(naming["norm"][0] if leaf == "weight" else naming["norm"][1])
        elif leaf == "weight" and isinstance(owner, nn.Linear):
            parts.append(naming["linear"])
            a = a.T
        elif leaf == "bias":
            parts.append(naming.get("bias", "bias"))
        else:
            parts.append(naming["linear"] if naming["linear"] == "w" and leaf == "weight" else leaf)
        out.append((naming["prefix"] + "/".join(parts), np.ascontiguousarray(a)))
    return out


def write(directory):
    import ml_dtypes
    import tensorflow as tf

    written = {}
    for key in LOADERS:
        try:
            _, _, model, naming = _build(key, 0)
        except Exception as exc:  # a model this transformers cannot build here: recorded, not written
            written[key] = f"{type(exc).__name__}: {exc}"
            continue
        named = _tf_names(model, naming)
        if naming.get("bf16"):
            named = [(n, a.astype(ml_dtypes.bfloat16)) for n, a in named]
        if naming.get("prefix") != "model/":  # (OpenAI's GPT-2 checkpoints hold the model alone)
            named += [(named[0][0] + "/adam_m", named[0][1]), ("global_step", np.array(1000, np.int64))]
        prefix = os.path.join(directory, key, "model.ckpt")
        os.makedirs(os.path.dirname(prefix))
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=[n for n, _ in named], shape_and_slices=[""] * len(named),
                          tensors=[tf.constant(a) for _, a in named])
        written[key] = len(named)
    with open(os.path.join(directory, "written.json"), "w") as f:
        json.dump(written, f, indent=1)


def load(directory, out):
    results, arrays = {}, {}
    for key in LOADERS:
        prefix = os.path.join(directory, key, "model.ckpt")
        if not os.path.exists(prefix + ".index"):
            continue
        loader, config, model, naming = _build(key, 1)
        source = _build(key, 0)[2].state_dict()
        fresh = {k: v.clone() for k, v in model.state_dict().items()}
        kwargs = {"config": config} if "config" in loader.__code__.co_varnames[:loader.__code__.co_argcount] else {}
        try:
            loaded = loader(model, tf_checkpoint_path=prefix, **kwargs) if key in ("big_bird", "qdqbert") else \
                loader(model, *kwargs.values(), prefix)
            state = (loaded if loaded is not None else model).state_dict()
        except Exception as exc:  # the loader's own failure, compared with TF's
            results[key] = {"raised": type(exc).__name__, "str": str(exc).replace(directory, "<D>")}
            continue
        results[key] = {"keys": list(state), "coverage": sum(
            1 for k, v in state.items() if k in source and v.shape == source[k].shape and torch.equal(v, source[k])
            and not torch.equal(v, fresh[k]))}
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
