"""ConvBERT: yitu-opensource/ConvBert's checkpoints, written by its ELECTRA-based TF code: the
discriminator under ``electra/`` (each layer's span-based convolution beside self-attention:
``attention/self/conv_attn_key`` a separable 1-D convolution, ``conv_attn_kernel`` and
``conv_attn_point`` dense layers; with ``num_groups`` > 1 the feed-forward's grouped
``intermediate/g_dense`` and ``output/g_dense``), the generator under ``generator/`` and the
pretraining heads beside it, as ELECTRA's.

As transformers 4.57's ``load_tf_weights_in_convbert`` places them (``ConvBertModel``, the one class
it fills): dense kernels transposed, grouped kernels ``[groups, in, out]`` kept as stored, the
depthwise kernel ``[width, in, 1]`` to ``[in, 1, width]``, the pointwise ``[1, in, out]`` to
``[out, in, 1]``, the convolution's bias given a trailing axis. That loader maps the
discriminator's body only: the generator and both prediction heads are left out, saying so.
ConvBERT has no release config file (its sizes are the pretraining script's flags): give an HF
``config.json``, or a JSON of transformers' names (its ``linear_groups`` is ``num_groups``); its
``modeling.py`` computes ``gelu`` with ``tf.math.erf``: transformers' ``gelu``, kept.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.bert import embedding_rules
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense, norm

H, E, FF = "hidden_size", "embedding_size", "intermediate_size"
_LAY = r"electra/encoder/layer_(?P<n>\d+)"
_OUT = "encoder.layer.{n}"
_SELF = f"{_LAY}/attention/self"


def _layer() -> list[Rule]:
    out = f"{_OUT}.attention.self"
    rules = [Rule(rf"{_SELF}/(?P<p>query|key|value)/kernel", f"{out}.{{p}}.weight", "T", ("", H)),
             Rule(rf"{_SELF}/(?P<p>query|key|value)/bias", f"{out}.{{p}}.bias"),
             Rule(f"{_SELF}/conv_attn_key/depthwise_kernel", f"{out}.key_conv_attn_layer.depthwise.weight",
                  "perm:1,2,0", (H, "", "conv_kernel_size")),
             Rule(f"{_SELF}/conv_attn_key/pointwise_kernel", f"{out}.key_conv_attn_layer.pointwise.weight",
                  "perm:2,1,0", ("", H, "")),
             Rule(f"{_SELF}/conv_attn_key/bias", f"{out}.key_conv_attn_layer.bias", "reshape:-1,1"),
             *dense(f"{_SELF}/conv_attn_kernel", f"{out}.conv_kernel_layer", "", ""),
             *dense(f"{_SELF}/conv_attn_point", f"{out}.conv_out_layer", "", H),
             *dense(f"{_LAY}/attention/output/dense", f"{_OUT}.attention.output.dense", H, H),
             *norm(f"{_LAY}/attention/output/LayerNorm", f"{_OUT}.attention.output.LayerNorm", H)]
    for tf, hf, size in (("intermediate", "intermediate", FF), ("output", "output", H)):
        rules += dense(f"{_LAY}/{tf}/dense", f"{_OUT}.{hf}.dense", size, FF if tf == "output" else H)
        rules += [Rule(f"{_LAY}/{tf}/g_dense/kernel", f"{_OUT}.{hf}.dense.weight", "", ("num_groups", "", "")),
                  Rule(f"{_LAY}/{tf}/g_dense/bias", f"{_OUT}.{hf}.dense.bias", "", (size,))]
    return rules + norm(f"{_LAY}/output/LayerNorm", f"{_OUT}.output.LayerNorm", H)


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """``num_groups`` (1 without grouped layers); ``head_ratio`` from the convolution heads
    (``conv_kernel_layer``'s outputs / ``conv_kernel_size``), the query's width checked against them
    (heads' x ((hidden // heads') // 2), as the model computes its attention width)."""
    ffn = plan.shape_of(r"\.intermediate\.dense\.weight$")
    if ffn is not None and len(ffn) == 2:  # a grouped layer's [groups, in, out] tells num_groups itself
        check_value(config, "num_groups", 1, "the checkpoint's ungrouped feed-forward", where)
    conv, query = plan.shape_of(r"\.conv_kernel_layer\.weight$"), plan.shape_of(r"\.query\.weight$")
    heads, hidden, width = config.get("num_attention_heads"), config.get(H), config.get("conv_kernel_size")
    if conv is None or query is None or not (isinstance(heads, int) and isinstance(hidden, int)
                                             and isinstance(width, int) and min(heads, hidden, width) > 0):
        return
    said = f"{where or 'the config'}: "
    if conv[0] % width or not 0 < conv[0] // width <= heads or heads % (conv[0] // width):
        raise CkptError(f"{said}conv_kernel_layer has {conv[0]} outputs: not convolution heads of width {width} "
                        f"sharing {heads} attention heads")
    inner = conv[0] // width
    ratio = config.get("head_ratio")
    if isinstance(ratio, int) and ratio > 0 and max(heads // ratio, 1) != inner:
        raise CkptError(f"{said}head_ratio is {ratio} ({max(heads // ratio, 1)} heads of {heads}), but the "
                        f"checkpoint's conv_kernel_layer has {inner} of width {width}")
    config.setdefault("head_ratio", heads // inner)
    if query[0] != inner * ((hidden // inner) // 2):
        raise CkptError(f"{said}{inner} heads of a {hidden}-wide layer attend {inner * ((hidden // inner) // 2)} wide, "
                        f"but the checkpoint's query is {query[0]} wide")


_LEFT = "not ConvBertModel's: 4.57's loader maps the discriminator's body only"

RULES = [*embedding_rules("electra", "", E),
         *dense("electra/embeddings_project", "embeddings_project", H, E, optional=True),  # E != H only
         *_layer(),
         Rule("(generator|generator_predictions|discriminator_predictions)/.*", None, why=_LEFT)]

ARCHS = [
    Arch("convbert", "convbert", "convbert", "ConvBertModel", tuple(RULES),
         (r"^electra/encoder/layer_\d+/attention/self/conv_attn_key/",),
         {r"^encoder\.layer\.(\d+)\.": "num_hidden_layers"}, required=("num_attention_heads",), passthrough=True,
         keys={"linear_groups": "num_groups"}, finish=_finish, tokenizer="ConvBertTokenizer"),
]
