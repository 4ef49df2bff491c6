"""ALBERT: google-research/albert's checkpoints (``bert/encoder/transformer/group_G/inner_group_I/...``,
``module/`` in front when saved from a TF Hub module), as transformers 4.57's
``load_tf_weights_in_albert`` places them: the shared groups become ``albert_layer_groups.G.
albert_layers.I``, ``attention_1/self`` and ``attention_1/output`` one ``attention``,
``ffn_1/intermediate/dense`` ``ffn``, its ``output/dense`` ``ffn_output``, ``LayerNorm_1``
``full_layer_layer_norm``, ``cls/predictions`` ``predictions``, ``cls/seq_relationship``
``sop_classifier.classifier``; kernels transposed. ``run_classifier``'s top-level
``output_weights`` go to ``classifier`` (``AlbertForSequenceClassification``).
"""

from __future__ import annotations

from ckptool.ops.transform.hf.bert import CLASSIFIER, embedding_rules
from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense, norm

H, E, FF = "hidden_size", "embedding_size", "intermediate_size"
_TF = "(?:module/)?bert"
_GROUP = rf"{_TF}/encoder/transformer/group_(?P<g>\d+)/inner_group_(?P<i>\d+)"
_LAYER = "albert.encoder.albert_layer_groups.{g}.albert_layers.{i}"


def _body(hf: str) -> list[Rule]:
    lay = _LAYER.replace("albert.", hf, 1)
    return [*embedding_rules(_TF, hf, E),
            *dense(f"{_TF}/encoder/embedding_hidden_mapping_in", f"{hf}encoder.embedding_hidden_mapping_in", H, E),
            Rule(rf"{_GROUP}/attention_1/self/(?P<p>query|key|value)/kernel", f"{lay}.attention.{{p}}.weight",
                 "T", (H, H)),
            Rule(rf"{_GROUP}/attention_1/self/(?P<p>query|key|value)/bias", f"{lay}.attention.{{p}}.bias", "", (H,)),
            *dense(f"{_GROUP}/attention_1/output/dense", f"{lay}.attention.dense", H, H),
            *norm(f"{_GROUP}/LayerNorm", f"{lay}.attention.LayerNorm", H),
            *dense(f"{_GROUP}/ffn_1/intermediate/dense", f"{lay}.ffn", FF, H),
            *dense(f"{_GROUP}/ffn_1/intermediate/output/dense", f"{lay}.ffn_output", H, FF),
            *norm(f"{_GROUP}/LayerNorm_1", f"{lay}.full_layer_layer_norm", H),
            *dense(f"{_TF}/pooler/dense", f"{hf}pooler", H, H)]


_HEADS = [*dense("(?:module/)?cls/predictions/transform/dense", "predictions.dense", E, H),
          *norm("(?:module/)?cls/predictions/transform/LayerNorm", "predictions.LayerNorm", E),
          Rule("(?:module/)?cls/predictions/output_bias", "predictions.bias", "", ("vocab_size",)),
          Rule("(?:module/)?cls/seq_relationship/output_weights", "sop_classifier.classifier.weight", "", ("", H)),
          Rule("(?:module/)?cls/seq_relationship/output_bias", "sop_classifier.classifier.bias")]
_BODY = rf"^{_TF}/encoder/transformer/group_\d+/"
#: albert_config.json's hidden_act as ALBERT's modeling.py computes it: its gelu is the tanh
#: approximation (transformers' "gelu_new", what the ALBERT configs on the hub say)
ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "tanh": "tanh", "linear": "linear"}
_COUNT = {r"albert_layer_groups\.(\d+)\.": "num_hidden_groups", r"\.albert_layers\.(\d+)\.": "inner_group_num"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    # albert_config.json's keys are transformers' own; shared layers: the tensors cannot tell the depth
    return Arch(name, "albert", "albert", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads", "num_hidden_layers"), passthrough=True, tokenizer="AlbertTokenizer",
                values={"hidden_act": ACTIVATIONS})


ARCHS = [
    _arch("albert-classifier", "AlbertForSequenceClassification", [*_body("albert."), *CLASSIFIER],
          r"^output_weights$"),
    _arch("albert-pretraining", "AlbertForPreTraining", [*_body("albert."), *_HEADS],
          r"^(module/)?cls/(predictions|seq_relationship)/"),
    _arch("albert", "AlbertModel", _body("")),
]
