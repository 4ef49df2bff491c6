"""Funnel-Transformer: laiguokun/Funnel-Transformer's TF checkpoints: ``model/input/word_embedding/
lookup_table``, ``model/input/layer_norm``, the encoder's layers numbered across its blocks
(``model/encoder/layer_N/rel_attn/{q,k,v}/kernel`` ``[d_model, heads, d_head]``, ``o/kernel``
``[heads, d_head, d_model]``, ``r/kernel``, ``r_w_bias``/``r_r_bias``/``r_s_bias``, ``seg_embed``,
``layer_norm``; ``ff/layer_1``, ``ff/layer_2``, ``ff/layer_norm``), the decoder's numbered after
them (``model/decoder/layer_{L+j}``), and for ELECTRA-style pretraining a ``generator/`` model.

As transformers 4.57's ``load_tf_weights_in_funnel`` places them: encoder layer N into block b,
place i by ``block_sizes``; decoder layer L+j into ``decoder.layers.j``; per-head kernels flattened
to 2-D then transposed (``o`` the same way), biases flattened, ``r/kernel``, the relative biases and
``seg_embed`` as stored; ``generator/`` left out. (4.57's loader reshapes a 3-D kernel to the
weight's shape before transposing: right only where ``d_model == n_head * d_head``, as in every
release; this table is right for any.) ``FunnelModel`` with the decoder, ``FunnelBaseModel``
without (``--arch funnel-base``, or no decoder layer in the checkpoint).

The release's ``net_config.json`` is translated: ``block_size`` ``"6_6_6"`` (``"AxB"``: A layers
repeated B times) -> ``block_sizes``/``block_repeats``, ``decoder_size`` -> ``num_decoder_layers``,
``n_head``, ``d_head``, ``d_model``, ``d_inner``, dropouts, ``rel_attn_type`` -> ``attention_type``,
``ff_activation`` ``gelu`` -> ``gelu_new`` (the code's tanh form) and the layer norm's 1e-8.
"""

from __future__ import annotations

import re
from typing import Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, norm

D = "d_model"
_LAY = r"model/(?P<part>encoder|decoder)/layer_(?P<n>\d+)"
_OUT = "{part}.layer.{n}"  # renamed to blocks.B.I / layers.J by _blocks, once block_sizes is known
_ATT = f"{_LAY}/rel_attn"


def _body(hf: str) -> list[Rule]:
    out = f"{hf}{_OUT}"
    att = f"{out}.attention"
    return [Rule("model/input/word_embedding/lookup_table", f"{hf}embeddings.word_embeddings.weight", "",
                 ("vocab_size", D)),
            *norm("model/input/layer_norm", f"{hf}embeddings.layer_norm", D),
            Rule(f"{_ATT}/q/kernel", f"{att}.q_head.weight", "merge:1 T", ("n_head*d_head", D)),
            Rule(rf"{_ATT}/(?P<p>k|v)/kernel", f"{att}.{{p}}_head.weight", "merge:1 T", ("n_head*d_head", D)),
            Rule(rf"{_ATT}/(?P<p>k|v)/bias", f"{att}.{{p}}_head.bias", "flat", ("n_head*d_head",)),
            Rule(f"{_ATT}/o/kernel", f"{att}.post_proj.weight", "merge:2 T", (D, "n_head*d_head")),
            Rule(f"{_ATT}/o/bias", f"{att}.post_proj.bias", "", (D,)),
            Rule(f"{_ATT}/r/kernel", f"{att}.r_kernel", "", (D, "n_head", "d_head")),
            Rule(rf"{_ATT}/(?P<p>r_w_bias|r_r_bias|r_s_bias)", f"{att}.{{p}}", "", ("n_head", "d_head")),
            Rule(f"{_ATT}/seg_embed", f"{att}.seg_embed", "", ("", "n_head", "d_head")),
            *norm(f"{_ATT}/layer_norm", f"{att}.layer_norm", D),
            Rule(f"{_LAY}/ff/layer_1/kernel", f"{out}.ffn.linear_1.weight", "T", ("d_inner", D)),
            Rule(f"{_LAY}/ff/layer_1/bias", f"{out}.ffn.linear_1.bias", "", ("d_inner",)),
            Rule(f"{_LAY}/ff/layer_2/kernel", f"{out}.ffn.linear_2.weight", "T", (D, "d_inner")),
            Rule(f"{_LAY}/ff/layer_2/bias", f"{out}.ffn.linear_2.bias", "", (D,)),
            *norm(f"{_LAY}/ff/layer_norm", f"{out}.ffn.layer_norm", D),
            Rule("generator/.*", None, why="the ELECTRA-style generator (4.57's loader leaves it out)")]


def _depths(value: Any, key: str, where: str) -> tuple[list[int], list[int]]:
    """``"6_6_6"`` / ``"3x2_3x2"`` (the release's) or a list (transformers'): sizes and repeats."""
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return value, [1] * len(value)
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not re.fullmatch(r"\d+(x\d+)?(_\d+(x\d+)?)*", value):
        raise CkptError(f"{where or 'the config'}: {key} {value!r} is not Funnel's \"6_6_6\" (or \"3x2_3x2\")")
    parts = [(p.split("x") + ["1"])[:2] for p in value.split("_")]
    return [int(a) for a, _ in parts], [int(b) for _, b in parts]


def _translate(config: dict[str, Any], where: str) -> None:
    """The release's net_config.json keys, as transformers names them (an HF config.json: as it is)."""
    if "model_type" in config:
        return
    if "block_size" in config:
        config["block_sizes"], config["block_repeats"] = _depths(config.pop("block_size"), "block_size", where)
    if "decoder_size" in config:
        sizes, repeats = _depths(config.pop("decoder_size"), "decoder_size", where)
        if len(sizes) != 1 or repeats != [1]:
            raise CkptError(f"{where or 'the config'}: decoder_size {sizes}x{repeats}: transformers' Funnel decoder "
                            "is one stack of unrepeated layers")
        config["num_decoder_layers"] = sizes[0]
    embed = config.pop("d_embed", None)
    if embed is not None and embed != config.get(D, embed):
        raise UnsupportedError(f"{where or 'the config'}: d_embed {embed} is not d_model {config.get(D)}: "
                               "transformers' Funnel has no input projection")
    kind = config.get("attention_type")
    config["attention_type"] = {"rel_shift": "relative_shift"}.get(kind, kind) if kind else "relative_shift"
    config.setdefault("layer_norm_eps", 1e-8)  # ops.layer_norm_op: variance_epsilon 1e-8


def _blocks(plan: Plan, config: dict[str, Any], where: str) -> None:
    """Encoder layer N -> ``encoder.blocks.B.I``, decoder layer L+J -> ``decoder.layers.J``."""
    _translate(config, where)
    sizes = config.get("block_sizes")
    if not (isinstance(sizes, list) and sizes and all(isinstance(s, int) and s > 0 for s in sizes)):
        return  # the required check names it
    where_of = [(b, i) for b, n in enumerate(sizes) for i in range(n)]
    rx = re.compile(r"(^|\.)(encoder|decoder)\.layer\.(\d+)\.")
    found: dict[str, set[int]] = {"encoder": set(), "decoder": set()}
    for p in plan.placed:
        m = rx.search(p.hf)
        if m is None:
            continue
        n = int(m[3])
        found[m[2]].add(n)
        if m[2] == "encoder" and n < len(where_of):
            new = f"encoder.blocks.{where_of[n][0]}.{where_of[n][1]}."
        elif m[2] == "decoder" and n >= len(where_of):
            new = f"decoder.layers.{n - len(where_of)}."
        else:
            raise CkptError(f"tensor {p.name!r}: {m[2]} layer {n} does not fit block_sizes {sizes} "
                            f"({len(where_of)} encoder layers, the decoder's numbered after them)")
        p.hf = p.hf[:m.start()] + m[1] + new + p.hf[m.end():]
    if found["encoder"] != set(range(len(where_of))):
        raise CkptError(f"the checkpoint's encoder layers are {sorted(found['encoder'])}, but block_sizes {sizes} "
                        f"needs {len(where_of)}")
    if plan.arch.architecture == "FunnelModel":
        check_value(config, "num_decoder_layers", len(found["decoder"]), "the checkpoint's decoder layers", where)


#: ops.get_activation: its gelu is the tanh approximation (transformers' gelu_new)
_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh"}
_DECODER = "FunnelBaseModel has no decoder (FunnelModel, --arch funnel, takes it)"


def _arch(name: str, cls: str, rules: list[Rule], absent: tuple[str, ...] = ()) -> Arch:
    keys = {"vocab_size": "vocab_size", "block_size": "block_size", "decoder_size": "decoder_size",
            "d_embed": "d_embed", D: D, "n_head": "n_head", "d_head": "d_head", "d_inner": "d_inner",
            "ff_activation": "hidden_act",
            "dropout": "hidden_dropout", "dropatt": "attention_dropout", "dropact": "activation_dropout",
            "init_range": "initializer_range", "init_std": "initializer_std", "rel_attn_type": "attention_type",
            "separate_cls": "separate_cls", "pooling_type": "pooling_type", "pool_q_only": "pool_q_only",
            "truncate_seq": "truncate_seq"}
    return Arch(name, "funnel", "funnel", cls, tuple(rules), (r"^model/encoder/layer_\d+/rel_attn/",),
                required=("block_sizes",), keys=keys, finish=_blocks,
                values={"hidden_act": _ACTIVATIONS}, tokenizer="FunnelTokenizer", absent=absent)


ARCHS = [
    _arch("funnel-base", "FunnelBaseModel", [Rule("model/decoder/.*", None, why=_DECODER), *_body("")],
          absent=(r"^model/decoder/layer_\d+/",)),
    _arch("funnel", "FunnelModel", _body("")),
]
