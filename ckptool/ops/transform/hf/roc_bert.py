"""RoCBERT: the model has no TF release; a TF checkpoint of it holds Google BERT's names for the
model's own modules under its ``roc_bert`` scope (transformers 4.57's ``load_tf_weights_in_roc_bert``,
a copy of BERT's, renames nothing): ``roc_bert/embeddings/...``, ``roc_bert/encoder/layer_N/...``,
``roc_bert/pooler/dense``, the MLM head ``cls/predictions``; kernels transposed.

Beside BERT's tables RoCBERT has two more, ``pronunciation_embed`` and ``shape_embed``, and the
``map_inputs_layer`` that mixes the three. 4.57's loader finds a table only by an ``_embeddings``
suffix, so it cannot load these two (given them it fails on their shape; without them it leaves
them random); as the model holds them, ``roc_bert/embeddings/pronunciation_embed`` and
``.../shape_embed`` (``/embeddings`` after, as Keras names a table, accepted) are taken as stored.
Heads: ``RoCBertForPreTraining`` (pooler and MLM head), ``RoCBertForMaskedLM`` (MLM head, no
pooler), ``RoCBertModel``.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.bert import PRETRAINING, embedding_rules, encoder_rules
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense

H = "hidden_size"
_MLM = PRETRAINING[:5]


def _body(hf: str, pooler: bool = True) -> list[Rule]:
    emb = f"{hf}embeddings"
    rules = [*embedding_rules("roc_bert", hf),
             Rule("roc_bert/embeddings/pronunciation_embed(?:/embeddings)?", f"{emb}.pronunciation_embed.weight", "",
                  ("pronunciation_vocab_size", "pronunciation_embed_dim")),
             Rule("roc_bert/embeddings/shape_embed(?:/embeddings)?", f"{emb}.shape_embed.weight", "",
                  ("shape_vocab_size", "shape_embed_dim")),
             *dense("roc_bert/embeddings/map_inputs_layer", f"{emb}.map_inputs_layer", H, "", optional=True),
             *encoder_rules("roc_bert", hf)]
    if pooler:
        return rules + dense("roc_bert/pooler/dense", f"{hf}pooler.dense", H, H)
    return rules + [Rule("roc_bert/pooler/dense/(kernel|bias)", None, why="RoCBertForMaskedLM has no pooler")]


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """``concat_input`` from whether the checkpoint has ``map_inputs_layer``; its input width is the
    hidden size plus each enabled table's width."""
    shape = plan.shape_of(r"embeddings\.map_inputs_layer\.weight$")
    check_value(config, "concat_input", shape is not None, "the checkpoint's map_inputs_layer (or its absence)",
                where)
    if shape is None:
        return
    width = config.get(H, 0)
    for flag, dim in (("enable_pronunciation", "pronunciation_embed_dim"), ("enable_shape", "shape_embed_dim")):
        if config.get(flag, True):
            width += config.get(dim, 0)
    if width != shape[1]:
        raise CkptError(f"{where or 'the config'}: the checkpoint's map_inputs_layer takes {shape[1]} inputs, but "
                        f"hidden_size and the enabled tables' widths sum to {width}")


_BODY = r"^roc_bert/encoder/layer_\d+/"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str, absent: tuple[str, ...] = ()) -> Arch:
    # no release config: an HF config.json, or a bert_config.json in transformers' names
    return Arch(name, "roc_bert", "roc_bert", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads",), passthrough=True, finish=_finish, absent=absent)


ARCHS = [
    _arch("roc-bert-mlm", "RoCBertForMaskedLM", [*_body("roc_bert.", pooler=False), *_MLM], r"^cls/predictions/",
          absent=(r"^roc_bert/pooler/",)),
    _arch("roc-bert-pretraining", "RoCBertForPreTraining", [*_body("roc_bert."), *_MLM], r"^cls/predictions/"),
    _arch("roc-bert", "RoCBertModel", [*_body(""), Rule("cls/.*", None, why="the MLM head (--arch roc-bert-mlm)")]),
]
