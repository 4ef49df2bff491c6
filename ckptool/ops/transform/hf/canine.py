"""CANINE: google-research/language's ``canine`` checkpoints: the hashed character embeddings
(``char_embeddings/embeddings/HashBucketCodepointEmbedder_K``, ``char_position_embeddings``,
``segment_embeddings``), the one-layer local ``initial_char_encoder/layer_0``, the downsampling
convolution (``initial_char_encoder/initial_char_encoder/chars_to_molecules/conv``), the deep stack
``bert/layer_N`` (``bert/encoder/layer_N`` taken too), the upsampling ``final_char_encoder/conv``
and its one-layer ``final_char_encoder/layer_0``, the ``pooler``; the pretraining heads beside them.

As transformers 4.57's ``load_tf_weights_in_canine`` places them (``CanineModel``): ``bert`` ->
``encoder``, the embedders' middle ``embeddings`` dropped, ``segment_embeddings`` ->
``token_type_embeddings``, ``chars_to_molecules`` to the top,
``final_char_encoder/{conv,LayerNorm}`` -> ``projection``; kernels transposed (the convolutions'
``[width, in, out]`` fully reversed to ``[out, in, width]``). ``cls``, ``autoregressive_decoder``
and ``char_output_weights`` are left out, as that loader does. The config: CanineModelConfig's JSON
(``max_positions`` -> ``max_position_embeddings``; its ``gelu`` is BERT's code's tanh form,
``gelu_new``) or an HF ``config.json``.
"""

from __future__ import annotations

from typing import Any

from ckptool.ops.transform.hf.albert import ACTIVATIONS  # Google BERT modeling.py's get_activation
from ckptool.ops.transform.hf.bert import layer_rules
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense, norm

H = "hidden_size"
_HEADS = "a pretraining head: 4.57's loader leaves it out"


def _conv(tf: str, hf: str, inn: str, width: str) -> list[Rule]:
    return [Rule(f"{tf}/conv/kernel", f"{hf}.conv.weight", "T", (H, inn, width)),
            Rule(f"{tf}/conv/bias", f"{hf}.conv.bias", "", (H,)), *norm(f"{tf}/LayerNorm", f"{hf}.LayerNorm", H)]


RULES = [Rule(r"char_embeddings/embeddings/HashBucketCodepointEmbedder_(?P<k>\d+)",
              "char_embeddings.HashBucketCodepointEmbedder_{k}.weight", "", ("num_hash_buckets", "")),
         # transformers' model sizes this table by num_hash_buckets (the releases': 16384 both)
         Rule("char_embeddings/char_position_embeddings", "char_embeddings.char_position_embeddings.weight", "",
              ("num_hash_buckets", H)),
         Rule("char_embeddings/segment_embeddings", "char_embeddings.token_type_embeddings.weight", "",
              ("type_vocab_size", H)),
         *norm("char_embeddings/LayerNorm", "char_embeddings.LayerNorm", H),
         *layer_rules(r"initial_char_encoder/layer_(?P<n>0)", "initial_char_encoder.layer.{n}"),
         *_conv(r"\w+/initial_char_encoder/(?:[\w/]+/)?chars_to_molecules", "chars_to_molecules", H,
                "downsampling_rate"),
         # the deep stack: transformer_model under "bert" (no "encoder" scope); 4.57's loader takes both
         *layer_rules(r"bert/(?:encoder/)?layer_(?P<n>\d+)", "encoder.layer.{n}"),
         *_conv("final_char_encoder", "projection", "2*hidden_size", "upsampling_kernel_size"),
         *layer_rules(r"final_char_encoder/layer_(?P<n>0)", "final_char_encoder.layer.{n}"),
         *dense("pooler/dense", "pooler.dense", H, H),
         Rule("(.*/)?(cls|autoregressive_decoder|char_output_weights)(/.*)?", None, why=_HEADS)]


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """``num_hash_functions``: the embedders."""
    n = sum(1 for p in plan.placed if ".HashBucketCodepointEmbedder_" in p.hf)
    check_value(config, "num_hash_functions", n, f"the checkpoint's {n} HashBucketCodepointEmbedder_K", where)


ARCHS = [
    Arch("canine", "canine", "canine", "CanineModel", tuple(RULES),
         (r"^char_embeddings/embeddings/HashBucketCodepointEmbedder_\d+$",),
         {r"^encoder\.layer\.(\d+)\.": "num_hidden_layers"}, required=("num_attention_heads",), passthrough=True,
         keys={"max_positions": "max_position_embeddings"}, values={"hidden_act": ACTIVATIONS},
         defaults={"hidden_act": "gelu_new"},
         finish=_finish),  # characters: no vocabulary, no tokenizer files
]
