"""ImageGPT: openai/image-gpt's checkpoints (``model/wte``, ``model/sos``, ``model/wpe``, ``model/wtet``,
``model/hN/attn/{q,k,v}_proj`` and ``c_proj`` per head ``[n_head, head_size, n_embd]``,
``model/hN/mlp/c_fc/w``, ``model/hN/ln_1/g``, ``model/ln_f/g``), as transformers 4.57's
``load_tf_weights_in_imagegpt`` places them: values squeezed; ``wte``'s rows then ``sos`` as the last
row of ``transformer.wte`` (the start-of-image token); ``q_proj``/``k_proj``/``v_proj`` each reshaped
to ``[n_embd, n_embd]``, transposed and laid side by side as ``attn.c_attn`` (transformers'
``Conv1D``, ``[in, out]``); ``c_proj`` reshaped; ``wtet`` -> ``lm_head`` (not tied:
``ImageGPTForCausalImageModeling``; without it ``ImageGPTModel``). image-gpt's layers have no biases:
the model's ``c_attn``/``c_proj``/``c_fc`` biases, which the loader leaves as the fresh model has them,
are written as zeros (what the original computed), so none is filled at random.

The config from the tensors (``vocab_size`` = the 512 colour clusters + ``sos``, ``n_positions``,
``n_embd``, ``n_head`` from the per-head shapes, ``n_layer``, ``n_inner``); image-gpt's ``gelu2`` is
``x * sigmoid(1.702 x)`` (transformers' ``quick_gelu``) and its norm an RMS norm with epsilon 1e-5
(``ImageGPTLayerNorm``), transformers' defaults, set explicitly; an HF ``config.json`` is accepted.
"""

from __future__ import annotations

from typing import Any

from ckptool.ops.transform.hf.common import Join, joiner, zero_biases
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value

E = "n_embd"
_H = r"model/h(?P<i>\d+)"
_QKV = "model/h{i}/attn/q_proj+k_proj+v_proj"  # the three per-head projections, joined (common.joiner)
JOINS = (Join("model/wte+sos", (("model/wte", "squeeze"), ("model/sos", "squeeze reshape:1,-1")), 0),
         Join(_QKV, tuple((f"model/h{{i}}/attn/{p}_proj", "merge:2 T") for p in "qkv"), 1))


def _rules(hf: str) -> list[Rule]:
    out = f"{hf}h.{{i}}"
    return [Rule("model/wte\\+sos", f"{hf}wte.weight", "", ("vocab_size", E)),
            Rule("model/wpe", f"{hf}wpe.weight", "squeeze", ("n_positions", E)),
            Rule(rf"{_H}/ln_(?P<k>[12])/g", f"{out}.ln_{{k}}.weight", "squeeze", (E,)),
            Rule(rf"{_H}/attn/q_proj\+k_proj\+v_proj", f"{out}.attn.c_attn.weight", "", (E, f"3*{E}")),
            Rule(rf"{_H}/attn/c_proj", f"{out}.attn.c_proj.weight", "merge:2", (E, E)),
            Rule(rf"{_H}/mlp/c_fc/w", f"{out}.mlp.c_fc.weight", "squeeze", (E, "n_inner")),
            Rule(rf"{_H}/mlp/c_proj/w", f"{out}.mlp.c_proj.weight", "squeeze", ("n_inner", E)),
            Rule("model/ln_f/g", f"{hf}ln_f.weight", "squeeze", (E,))]


_HEAD = [Rule("model/wtet", "lm_head.weight", "squeeze", ("", E))]


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    c_proj = next((p for p in plan.placed if p.hf.endswith(".attn.c_proj.weight")), None)
    if c_proj is not None and len(c_proj.spec.shape) == 3:  # [n_head, head_size, n_embd]
        check_value(config, "n_head", c_proj.spec.shape[0], f"tensor {c_proj.name!r} {list(c_proj.spec.shape)}",
                    where)
    head = plan.shape_of(r"^lm_head\.weight$")
    vocab = config.get("vocab_size")
    if head is not None and isinstance(vocab, int) and head[0] != vocab - 1:
        check_value(config, "vocab_size", head[0] + 1, "model/wtet (the clusters, without sos)", where)
    if "model_type" not in config:
        config.setdefault("activation_function", "quick_gelu")
        config.setdefault("layer_norm_epsilon", 1e-5)
    config.setdefault("tie_word_embeddings", False)


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "imagegpt", "imagegpt", cls, tuple(rules), (r"^model/h\d+/attn/q_proj$", *detect),
                {r"(?:^|\.)h\.(\d+)\.": "n_layer"}, required=("n_head",), finish=_finish,
                constants=zero_biases(r"\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight$"),
                prepare=joiner(JOINS), aliases=("image-gpt", "igpt"))


ARCHS = [_arch("imagegpt", "ImageGPTForCausalImageModeling", [*_rules("transformer."), *_HEAD], r"^model/wtet$"),
         _arch("imagegpt-features", "ImageGPTModel", _rules(""))]
