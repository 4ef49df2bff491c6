"""GPT-Neo: EleutherAI's mesh TensorFlow checkpoints (``gpt2/h0/attn/q``, ``gpt2/h0/mlp/conv1d_main/c_fc/kernel``,
``gpt2/wte``), as transformers 4.57's ``load_tf_weights_in_gpt_neo`` places them: values squeezed,
``q``/``k``/``v``/``o`` -> ``attn.attention.{q,k,v,out}_proj`` and the MLP kernels transposed,
``norm_1``/``norm_2`` -> ``ln_1``/``ln_2``, a vocabulary padded past ``vocab_size`` cut back to it;
the LM head is tied to ``wte``. Values keep their dtype (the loader's float32 copy holds the same
numbers). The config: an HF ``config.json`` or the run's own JSON (``n_embd``, ``n_layer``,
``n_head``, ``n_ctx``, ``n_vocab``, ``attention_types``, the dropouts, ``activation_fn``), as the
original code reads it: its activation is ``activation_fn`` (default ``gelu``, mesh TensorFlow's tanh
approximation: transformers' ``gelu_new``; the JSON's ``activation_function`` is read by nothing), its
layer norm's epsilon 1e-5.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule

H = "hidden_size"
_H = r"gpt2/h(?P<i>\d+)"
_OUT = "transformer.h.{i}"
_MLP = f"{_H}/mlp/conv1d_main"


def _pair(tf: str, hf: str) -> list[Rule]:
    return [Rule(f"{tf}/g", f"{hf}.weight", "squeeze", (H,)), Rule(f"{tf}/b", f"{hf}.bias", "squeeze", (H,))]


RULES = (Rule("gpt2/wte", "transformer.wte.weight", "squeeze rows:vocab_size", ("vocab_size", H)),
         Rule("gpt2/wpe", "transformer.wpe.weight", "squeeze", ("max_position_embeddings", H)),
         *_pair(rf"{_H}/norm_(?P<k>[12])", f"{_OUT}.ln_{{k}}"),
         Rule(rf"{_H}/attn/(?P<p>[qkv])", f"{_OUT}.attn.attention.{{p}}_proj.weight", "squeeze T", (H, H)),
         Rule(rf"{_H}/attn/o", f"{_OUT}.attn.attention.out_proj.weight", "squeeze T", (H, H)),
         Rule(rf"{_H}/attn/compute_output_bias/o_b", f"{_OUT}.attn.attention.out_proj.bias", "squeeze", (H,)),
         Rule(rf"{_MLP}/c_fc/kernel", f"{_OUT}.mlp.c_fc.weight", "squeeze T", ("intermediate_size", H)),
         Rule(rf"{_MLP}/c_fc/bias", f"{_OUT}.mlp.c_fc.bias", "squeeze", ("intermediate_size",)),
         Rule(rf"{_MLP}/c_proj/kernel", f"{_OUT}.mlp.c_proj.weight", "squeeze T", (H, "intermediate_size")),
         Rule(rf"{_MLP}/c_proj/bias", f"{_OUT}.mlp.c_proj.bias", "squeeze", (H,)),
         *_pair("gpt2/ln_f", "transformer.ln_f"))
KEYS = {"n_embd": H, "n_layer": "num_layers", "n_head": "num_heads", "n_ctx": "max_position_embeddings",
        "n_positions": "max_position_embeddings", "n_vocab": "vocab_size", "attention_types": "attention_types",
        "res_dropout": "resid_dropout", "embed_dropout": "embed_dropout", "attn_dropout": "attention_dropout",
        "activation_fn": "activation_function", "local_attention_radius": "window_size"}
#: models/activations.py's activation_fn (the run JSON's "activation_function" is read by nothing): its
#: "gelu" is mesh TensorFlow's, the tanh approximation (transformers' "gelu_new"); "silu" is mtf.swish
ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "silu": "silu"}


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """transformers expands ``attention_types`` (``[[["global", "local"], 12]]``) to one type per layer:
    they must add up to ``num_layers``, or from_pretrained fails."""
    types = config.get("attention_types")
    if types is None:
        return  # required: the tensors cannot tell global from local layers
    try:
        n = sum(len(kinds) * int(times) for kinds, times in types)
    except (TypeError, ValueError):
        raise CkptError(f"{where or 'the config'}: attention_types is {types!r}, not [[[kinds...], times], ...]") \
            from None
    if n != config.get("num_layers"):
        raise CkptError(f"{where or 'the config'}: attention_types covers {n} layers, but num_layers is "
                        f"{config.get('num_layers')}")


ARCHS = [Arch("gpt-neo", "gpt-neo", "gpt_neo", "GPTNeoForCausalLM", RULES, (r"^gpt2/h\d+/attn/q$",),
              {r"^transformer\.h\.(\d+)\.": "num_layers"}, required=("num_heads", "attention_types"), keys=KEYS,
              finish=_finish, values={"activation_function": ACTIVATIONS},
              defaults={"activation_function": "gelu_new"},
              tokenizer="GPT2Tokenizer", aliases=("gptneo",))]
