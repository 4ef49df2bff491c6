"""T5 v1.0, v1.1 and mT5: the mesh TensorFlow checkpoints of google-research/text-to-text-transfer-
transformer (``encoder/block_000/layer_000/SelfAttention/q``, ``shared/embedding``, Adafactor's
``*_slot_*`` left out), as transformers 4.57's ``load_tf_weights_in_t5`` places them: every matrix
transposed (``q``/``k``/``v``/``o``, ``wi``/``wi_0``/``wi_1``/``wo``, the relative attention bias,
v1.1's separate ``decoder/logits``), ``scale`` -> ``weight``. Values keep their dtype (bfloat16
stays bfloat16; the loader's float32 copy holds the same numbers).

The config: an HF ``config.json``, or the release's ``operative_config.gin`` (``d_model``,
``d_ff``, ``d_kv``, ``num_heads``, ``num_layers``, ``dropout_rate``, ``DenseReluDense.activation``).
From the tensors: v1.1's gated feed-forward (``wi_0``/``wi_1``: ``gated-gelu``) and its untied
``lm_head``; a 250k vocabulary is mT5 (``MT5ForConditionalGeneration``; ``--arch mt5`` says so too).
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value

D, FF, INNER = "d_model", "d_ff", "num_heads*d_kv"
_BLOCK = r"(?P<s>encoder|decoder)/block_(?P<b>\d+)"
_OUT = "{s}.block.{b}"


def _attention(tf: str, hf: str) -> list[Rule]:
    return [Rule(rf"{tf}/(?P<p>[qkv])", f"{hf}.{{p}}.weight", "T", (INNER, D)),
            Rule(rf"{tf}/o", f"{hf}.o.weight", "T", (D, INNER))]


def _ff(tf: str, hf: str) -> list[Rule]:
    return [Rule(rf"{tf}/DenseReluDense/(?P<w>wi|wi_0|wi_1)/kernel", f"{hf}.DenseReluDense.{{w}}.weight", "T", (FF, D),
                 optional=True),  # wi (v1.0) or wi_0 and wi_1 (v1.1): _finish checks which
            Rule(rf"{tf}/DenseReluDense/wo/kernel", f"{hf}.DenseReluDense.wo.weight", "T", (D, FF)),
            Rule(rf"{tf}/layer_norm/scale", f"{hf}.layer_norm.weight", "", (D,))]


RULES = (Rule("shared/embedding", "shared.weight", "", ("vocab_size", D)),
         *_attention(rf"{_BLOCK}/layer_000/SelfAttention", f"{_OUT}.layer.0.SelfAttention"),
         # one relative attention bias per stack, in its first block (transformers has it there only)
         Rule(r"(?P<s>encoder|decoder)/block_000/layer_000/SelfAttention/relative_attention_bias",
              "{s}.block.0.layer.0.SelfAttention.relative_attention_bias.weight", "T",
              ("relative_attention_num_buckets", "num_heads")),
         Rule(rf"{_BLOCK}/layer_000/layer_norm/scale", f"{_OUT}.layer.0.layer_norm.weight", "", (D,)),
         *_attention(r"decoder/block_(?P<b>\d+)/layer_001/EncDecAttention",
                     "decoder.block.{b}.layer.1.EncDecAttention"),
         Rule(r"decoder/block_(?P<b>\d+)/layer_001/layer_norm/scale", "decoder.block.{b}.layer.1.layer_norm.weight",
              "", (D,)),
         *_ff(r"encoder/block_(?P<b>\d+)/layer_001", "encoder.block.{b}.layer.1"),
         *_ff(r"decoder/block_(?P<b>\d+)/layer_002", "decoder.block.{b}.layer.2"),
         Rule(r"(?P<s>encoder|decoder)/final_layer_norm/scale", "{s}.final_layer_norm.weight", "", (D,)),
         Rule("decoder/logits/kernel", "lm_head.weight", "T", ("vocab_size", D), optional=True))  # v1.0 ties it

#: operative_config.gin's macros and bindings -> T5Config
KEYS = {"d_model": "d_model", "d_ff": "d_ff", "d_kv": "d_kv", "num_heads": "num_heads", "num_layers": "num_layers",
        "dropout_rate": "dropout_rate", "encoder/make_layer_stack.num_layers": "num_layers",
        "decoder/make_layer_stack.num_layers": "num_decoder_layers",
        "DenseReluDense.activation": "feed_forward_proj", "dense_product.activation": "feed_forward_proj"}
MT5_VOCAB = 250000  # mT5's vocabulary is 250,112 pieces; T5's 32,128


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    gated = plan.has(r"\.wi_0\.weight$")
    act = config.get("feed_forward_proj")
    if isinstance(act, list):  # gin: ['gelu', 'linear'] is a gated GELU, 'relu' a plain one
        act = f"gated-{act[0]}" if len(act) > 1 else str(act[0])
        config["feed_forward_proj"] = act
    if act == "gelu" and "model_type" not in config:  # gin's gelu is mesh TF's tanh approximation
        act = config["feed_forward_proj"] = "gelu_new"  # (transformers' "gated-gelu" already is)
    if act is None:
        config["feed_forward_proj"] = "gated-gelu" if gated else "relu"
    elif str(act).startswith("gated-") != gated:
        raise CkptError(f"{where or 'the config'}: feed_forward_proj is {act!r}, but the checkpoint's feed-forward "
                        f"layers are {'gated (wi_0, wi_1)' if gated else 'not gated (wi)'}")
    check_value(config, "tie_word_embeddings", not plan.has(r"^lm_head\."),
                "the checkpoint's decoder/logits/kernel" if plan.has(r"^lm_head\.") else "a checkpoint without "
                "decoder/logits (v1.0 ties them)", where)
    vocab = config.get("vocab_size")
    if "model_type" not in config and isinstance(vocab, int) and vocab >= MT5_VOCAB:
        config["model_type"] = "mt5"


_DETECT = (r"^encoder/block_\d+/layer_\d+/SelfAttention/",)
_COUNT = {r"^encoder\.block\.(\d+)\.": "num_layers", r"^decoder\.block\.(\d+)\.": "num_decoder_layers"}
ARCHS = [
    Arch("t5", "t5", "t5", "T5ForConditionalGeneration", RULES, _DETECT, _COUNT, required=("num_heads",),
         keys=KEYS, finish=_finish, tokenizer="T5Tokenizer", aliases=("t5-v1.1", "t5v1.1", "t5-v1.0")),
    Arch("mt5", "mt5", "mt5", "MT5ForConditionalGeneration", RULES, _DETECT, _COUNT, required=("num_heads",),
         keys=KEYS, finish=_finish, tokenizer="T5Tokenizer"),
]
