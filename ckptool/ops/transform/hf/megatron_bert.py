"""Megatron-BERT: NVIDIA's model has no TF release; a TF checkpoint of it holds Google BERT's names
for the model's own modules, which is all transformers 4.57's ``load_tf_weights_in_megatron_bert``
(a copy of BERT's) can map: ``bert/embeddings/{word,position,token_type}_embeddings`` (no embedding
norm), the pre-norm layers ``bert/encoder/layer_N/attention/ln``, ``.../ln`` (before the MLP), the
final ``bert/encoder/ln``, the pooler, ``cls/predictions`` and ``cls/seq_relationship``. Kernels
transposed, ``gamma``/``beta`` -> ``weight``/``bias``, ``output_weights`` kept as stored.

Heads: ``MegatronBertForPreTraining`` with both heads, ``MegatronBertForMaskedLM`` with the MLM
head only (it has no pooler: a pooler is left out), ``MegatronBertModel`` with none.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.bert import PRETRAINING
from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense, norm

H, FF = "hidden_size", "intermediate_size"
_MLM = PRETRAINING[:5]  # cls/predictions: transform dense, its norm, output_bias
_NSP = PRETRAINING[5:]


def _body(hf: str, pooler: bool = True) -> list[Rule]:
    lay, out = r"bert/encoder/layer_(?P<n>\d+)", f"{hf}encoder.layer.{{n}}"
    emb = f"{hf}embeddings"
    rules = [Rule("bert/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", H)),
             Rule("bert/embeddings/position_embeddings", f"{emb}.position_embeddings.weight", "",
                  ("max_position_embeddings", H)),
             Rule("bert/embeddings/token_type_embeddings", f"{emb}.token_type_embeddings.weight", "",
                  ("type_vocab_size", H)),
             *norm(f"{lay}/attention/ln", f"{out}.attention.ln", H),
             Rule(rf"{lay}/attention/self/(?P<p>query|key|value)/kernel", f"{out}.attention.self.{{p}}.weight",
                  "T", (H, H)),
             Rule(rf"{lay}/attention/self/(?P<p>query|key|value)/bias", f"{out}.attention.self.{{p}}.bias", "", (H,)),
             *dense(f"{lay}/attention/output/dense", f"{out}.attention.output.dense", H, H),
             *norm(f"{lay}/ln", f"{out}.ln", H),
             *dense(f"{lay}/intermediate/dense", f"{out}.intermediate.dense", FF, H),
             *dense(f"{lay}/output/dense", f"{out}.output.dense", H, FF),
             *norm("bert/encoder/ln", f"{hf}encoder.ln", H)]
    if pooler:
        return rules + dense("bert/pooler/dense", f"{hf}pooler.dense", H, H)
    return rules + [Rule("bert/pooler/dense/(kernel|bias)", None, why="MegatronBertForMaskedLM has no pooler")]


_BODY = r"^bert/encoder/(ln|layer_\d+/attention/ln)/"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}
_HEADS = "the pretraining heads (--arch megatron-bert-pretraining exports them)"


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    # no release config: an HF config.json, or a bert_config.json in transformers' names
    return Arch(name, "megatron_bert", "megatron-bert", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads",), passthrough=True, tokenizer="BertTokenizer")


ARCHS = [
    _arch("megatron-bert-pretraining", "MegatronBertForPreTraining", [*_body("bert."), *_MLM, *_NSP],
          r"^cls/predictions/", r"^cls/seq_relationship/"),
    _arch("megatron-bert-mlm", "MegatronBertForMaskedLM", [*_body("bert.", pooler=False), *_MLM],
          r"^cls/predictions/"),
    _arch("megatron-bert", "MegatronBertModel", [*_body(""), Rule("cls/.*", None, why=_HEADS)]),
]
