"""XLNet: zihangdai/xlnet's checkpoints (``model/transformer/layer_N/rel_attn/q/kernel``,
``model/transformer/word_embedding/lookup_table``, the stacked ``r_w_bias``/``r_r_bias``/``r_s_bias``/
``seg_embed``, ``model/lm_loss/bias``; ``run_classifier``'s ``model/sequnece_summary/summary`` (sic)
and ``model/{classification,regression}_TASK/logit``), as transformers 4.57's
``load_tf_weights_in_xlnet`` places them: the attention kernels ``q``/``k``/``v``/``o``/``r`` kept as
stored (``[d_model, n_head, d_head]``, transformers' layout), the feed-forward, summary and logit
kernels transposed, the relative biases and segment embeddings (``untie_r``: one row per layer)
split into each layer's ``rel_attn``; the LM head's weight is tied to the word embeddings
(``XLNetLMHeadModel``). The loader places a fine-tuned head only as ``regression_TASK`` with the
config's ``finetuning_task`` set; run_classifier's ``classification_TASK`` (its usual head) goes to
``logits_proj`` the same way, as the model code reads it (``XLNetForSequenceClassification``,
num_labels from the kernel).

The config: an HF ``config.json`` or the release's ``xlnet_config.json`` (``n_token``, ``d_model``,
``n_layer``, ``n_head``, ``d_head``, ``d_inner``, ``ff_activation``, ``untie_r``). XLNet's own
``gelu`` is the tanh approximation (modeling.py's ``gelu``): ``ff_activation`` ``gelu`` becomes
transformers' ``gelu_new``; layer norm epsilon 1e-12 as its ``tf.contrib`` layer norm. ``--vocab``
takes its ``spiece.model`` (``XLNetTokenizer``).
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, dense, norm

D, FF, HEADS = "d_model", "d_inner", ("d_model", "n_head", "d_head")
_T = "model/transformer"


def _body(hf: str) -> list[Rule]:
    lay, out = rf"{_T}/layer_(?P<n>\d+)", f"{hf}layer.{{n}}"
    return [Rule(f"{_T}/word_embedding/lookup_table", f"{hf}word_embedding.weight", "", ("vocab_size", D)),
            Rule(f"{_T}/mask_emb/mask_emb", f"{hf}mask_emb", "", ("", "", D)),
            Rule(rf"{lay}/rel_attn/(?P<p>[qkvor])/kernel", f"{out}.rel_attn.{{p}}", "", HEADS),
            *norm(f"{lay}/rel_attn/LayerNorm", f"{out}.rel_attn.layer_norm", D),
            *dense(f"{lay}/ff/layer_1", f"{out}.ff.layer_1", FF, D),
            *dense(f"{lay}/ff/layer_2", f"{out}.ff.layer_2", D, FF),
            *norm(f"{lay}/ff/LayerNorm", f"{out}.ff.layer_norm", D),
            Rule(f"{_T}/(?P<b>r_w_bias|r_r_bias|r_s_bias)", f"{hf}layer.{{k}}.rel_attn.{{b}}", "take:0,k",
                 ("n_head", "d_head"), fan="k:0"),
            Rule(f"{_T}/seg_embed", f"{hf}layer.{{k}}.rel_attn.seg_embed", "take:0,k", ("", "n_head", "d_head"),
                 fan="k:0")]


_LM = [Rule("model/lm_loss/bias", "lm_loss.bias", "", ("vocab_size",))]
_SUMMARY = [*dense("model/sequnece_summary/summary", "sequence_summary.summary", D, D),
            *dense(r"model/(classification|regression)_[^/]+/logit", "logits_proj", "num_labels", D)]
KEYS = {"n_token": "vocab_size", "d_model": D, "n_layer": "n_layer", "n_head": "n_head", "d_head": "d_head",
        "d_inner": FF, "ff_activation": "ff_activation", "untie_r": "untie_r"}
#: what xlnet's modeling.py computes for each activation name, as transformers names it
ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu"}


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    act = config.get("ff_activation", "gelu")
    if "model_type" not in config:  # the release's name: what its code computed
        if act not in ACTIVATIONS:
            raise CkptError(f"{where or 'the config'}: ff_activation {act!r} is not one xlnet's code has "
                            f"({', '.join(ACTIVATIONS)})")
        config["ff_activation"] = ACTIVATIONS[act]
    d, h, dh = config.get(D), config.get("n_head"), config.get("d_head")
    if isinstance(d, int) and isinstance(h, int) and isinstance(dh, int) and d != h * dh:
        raise CkptError(f"{where or 'the tensors'}: d_model {d} is not n_head {h} x d_head {dh}, which "
                        "transformers' XLNet requires")
    config.setdefault("untie_r", True)
    config.setdefault("layer_norm_eps", 1e-12)


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "xlnet", "xlnet", cls, tuple(rules), (rf"^{_T}/layer_\d+/rel_attn/q/kernel$", *detect),
                {r"(?:^|\.)layer\.(\d+)\.": "n_layer"}, keys=KEYS, finish=_finish, tokenizer="XLNetTokenizer")


_NO_LM = Rule("model/lm_loss/bias", None, why="the fine-tuned model has no LM head")
ARCHS = [_arch("xlnet-classifier", "XLNetForSequenceClassification", [*_body("transformer."), *_SUMMARY, _NO_LM],
               r"^model/(classification|regression)_[^/]+/logit/kernel$"),
         _arch("xlnet-lm", "XLNetLMHeadModel", [*_body("transformer."), *_LM], r"^model/lm_loss/bias$"),
         _arch("xlnet", "XLNetModel", _body(""))]
