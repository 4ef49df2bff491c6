"""GPT-2: OpenAI's release (``model/h0/attn/c_attn/w`` ``[1, nx, 3*nx]``, ``model/wte``, ``hparams.json``),
as transformers 4.57's ``load_tf_weights_in_gpt2`` places it: every value squeezed (transformers'
``Conv1D`` keeps TF's ``[in, out]`` layout, nothing is transposed and ``c_attn`` stays fused),
``h0`` -> ``h.0``, ``w``/``g`` -> ``weight``, ``b`` -> ``bias``; the LM head is tied to ``wte``.
``hparams.json``: ``n_vocab`` -> ``vocab_size``, ``n_ctx`` -> ``n_positions``.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.weightmap import Arch, Rule

E = "n_embd"
_H = r"model/h(?P<i>\d+)"


def _conv(tf: str, hf: str, inn: str, out: str) -> list[Rule]:
    return [Rule(f"{tf}/w", f"{hf}.weight", "squeeze", (inn, out)), Rule(f"{tf}/b", f"{hf}.bias", "squeeze", (out,))]


def _norm(tf: str, hf: str, e: str = E) -> list[Rule]:
    return [Rule(f"{tf}/g", f"{hf}.weight", "squeeze", (e,)), Rule(f"{tf}/b", f"{hf}.bias", "squeeze", (e,))]


def rules(hf: str = "transformer.", e: str = E) -> tuple[Rule, ...]:
    """OpenAI's names -> a GPT-2 body under ``hf`` whose width is the config field ``e`` (the Decision
    Transformer's GPT-2, whose loader is a copy of this one, names it ``hidden_size``)."""
    out = f"{hf}h.{{i}}"
    return (Rule("model/wte", f"{hf}wte.weight", "squeeze", ("vocab_size", e)),
            Rule("model/wpe", f"{hf}wpe.weight", "squeeze", ("n_positions", e)),
            *_norm(rf"{_H}/ln_(?P<k>[12])", f"{out}.ln_{{k}}", e),
            *_conv(rf"{_H}/attn/c_attn", f"{out}.attn.c_attn", e, f"3*{e}"),
            *_conv(rf"{_H}/attn/c_proj", f"{out}.attn.c_proj", e, e),
            *_conv(rf"{_H}/mlp/c_fc", f"{out}.mlp.c_fc", e, "n_inner"),
            *_conv(rf"{_H}/mlp/c_proj", f"{out}.mlp.c_proj", "n_inner", e),
            *_norm("model/ln_f", f"{hf}ln_f", e))


RULES = rules()
KEYS = {"n_vocab": "vocab_size", "n_ctx": "n_positions", "n_embd": "n_embd", "n_head": "n_head", "n_layer": "n_layer",
        "n_positions": "n_positions", "vocab_size": "vocab_size"}

ARCHS = [Arch("gpt2", "gpt2", "gpt2", "GPT2LMHeadModel", RULES, (r"^model/h\d+/attn/c_attn/w$",),
              {r"^transformer\.h\.(\d+)\.": "n_layer"}, required=("n_head",), keys=KEYS, tokenizer="GPT2Tokenizer",
              aliases=("gpt-2", "openai-gpt2"))]
