"""GPT-2: OpenAI's release (``model/h0/attn/c_attn/w`` ``[1, nx, 3*nx]``, ``model/wte``, ``hparams.json``),
as transformers 4.57's ``load_tf_weights_in_gpt2`` places it: every value squeezed (transformers'
``Conv1D`` keeps TF's ``[in, out]`` layout, nothing is transposed and ``c_attn`` stays fused),
``h0`` -> ``h.0``, ``w``/``g`` -> ``weight``, ``b`` -> ``bias``; the LM head is tied to ``wte``.
``hparams.json``: ``n_vocab`` -> ``vocab_size``, ``n_ctx`` -> ``n_positions``.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.engine import Arch, Rule

E = "n_embd"
_H = r"model/h(?P<i>\d+)"
_OUT = "transformer.h.{i}"


def _conv(tf: str, hf: str, inn: str, out: str) -> list[Rule]:
    return [Rule(f"{tf}/w", f"{hf}.weight", "squeeze", (inn, out)), Rule(f"{tf}/b", f"{hf}.bias", "squeeze", (out,))]


def _norm(tf: str, hf: str) -> list[Rule]:
    return [Rule(f"{tf}/g", f"{hf}.weight", "squeeze", (E,)), Rule(f"{tf}/b", f"{hf}.bias", "squeeze", (E,))]


RULES = (Rule("model/wte", "transformer.wte.weight", "squeeze", ("vocab_size", E)),
         Rule("model/wpe", "transformer.wpe.weight", "squeeze", ("n_positions", E)),
         *_norm(rf"{_H}/ln_(?P<k>[12])", f"{_OUT}.ln_{{k}}"),
         *_conv(rf"{_H}/attn/c_attn", f"{_OUT}.attn.c_attn", E, f"3*{E}"),
         *_conv(rf"{_H}/attn/c_proj", f"{_OUT}.attn.c_proj", E, E),
         *_conv(rf"{_H}/mlp/c_fc", f"{_OUT}.mlp.c_fc", E, "n_inner"),
         *_conv(rf"{_H}/mlp/c_proj", f"{_OUT}.mlp.c_proj", "n_inner", E),
         *_norm("model/ln_f", "transformer.ln_f"))
KEYS = {"n_vocab": "vocab_size", "n_ctx": "n_positions", "n_embd": "n_embd", "n_head": "n_head", "n_layer": "n_layer",
        "n_positions": "n_positions", "vocab_size": "vocab_size"}

ARCHS = [Arch("gpt2", "gpt2", "gpt2", "GPT2LMHeadModel", RULES, (r"^model/h\d+/attn/c_attn/w$",),
              {r"^transformer\.h\.(\d+)\.": "n_layer"}, required=("n_head",), keys=KEYS, tokenizer="GPT2Tokenizer",
              aliases=("gpt-2", "openai-gpt2"))]
