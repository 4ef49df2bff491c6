"""TAPAS: google-research/tapas's checkpoints: Google BERT's names with seven token-type tables
(``bert/embeddings/token_type_embeddings_0`` .. ``_6``: segment, column, row, previous answer,
column rank, inverse rank, numeric relation), the pretraining heads ``cls/predictions`` and
``cls/seq_relationship``, and the fine-tuned heads at the top level: cell selection
``output_weights`` [hidden] and ``output_bias`` [], ``column_output_weights``/``column_output_bias``,
aggregation ``output_weights_agg`` [labels, hidden]/``output_bias_agg``, classification (TabFact)
``output_weights_cls``/``output_bias_cls``.

As transformers 4.57's ``load_tf_weights_in_tapas`` places them: ``bert`` -> ``tapas``, kernels
transposed, the heads as stored (``output_weights_agg`` -> ``aggregation_classifier.weight``,
``output_weights_cls`` -> ``classifier.weight``), ``cls/seq_relationship`` left out (no model holds
it), the pooler left out of ``TapasForMaskedLM``. The release's ``bert_config.json`` gives
``type_vocab_size`` as the seven tables' sizes (``type_vocab_sizes``), and ``hidden_act: gelu``, which
TAPAS's ``modeling.py`` computes as the tanh approximation: ``gelu_new``.
"""

from __future__ import annotations

from typing import Any

from ckptool.ops.transform.hf.albert import ACTIVATIONS  # Google BERT modeling.py's get_activation
from ckptool.ops.transform.hf.bert import PRETRAINING, encoder_rules
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense, norm

H = "hidden_size"
_MLM = PRETRAINING[:5]
_NSP = Rule("cls/seq_relationship/output_(weights|bias)", None,
            why="TAPAS's pretraining next-sentence head: no transformers TAPAS model holds it")


def _body(hf: str, pooler: bool = True) -> list[Rule]:
    emb = f"{hf}embeddings"
    rules = [Rule("bert/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", H)),
             Rule("bert/embeddings/position_embeddings", f"{emb}.position_embeddings.weight", "",
                  ("max_position_embeddings", H)),
             Rule(r"bert/embeddings/token_type_embeddings_(?P<i>\d)", f"{emb}.token_type_embeddings_{{i}}.weight",
                  "", ("", H)),
             *norm("bert/embeddings/LayerNorm", f"{emb}.LayerNorm", H),
             *encoder_rules("bert", hf)]
    if pooler:
        return rules + dense("bert/pooler/dense", f"{hf}pooler.dense", H, H)
    return rules + [Rule("bert/pooler/dense/(kernel|bias)", None, why="TapasForMaskedLM has no pooler")]


_CELLS = [Rule("output_weights", "output_weights", "", (H,)), Rule("output_bias", "output_bias", "", ()),
          Rule("column_output_weights", "column_output_weights", "", (H,)),
          Rule("column_output_bias", "column_output_bias", "", ()),
          Rule("output_weights_agg", "aggregation_classifier.weight", "", ("num_aggregation_labels", H), optional=True),
          Rule("output_bias_agg", "aggregation_classifier.bias", "", ("num_aggregation_labels",), optional=True)]
_CLS = [Rule("output_weights_cls", "classifier.weight", "", ("num_labels", H)),
        Rule("output_bias_cls", "classifier.bias", "", ("num_labels",))]
_HEADS = "a fine-tuned or pretraining head (--dry-run --arch tapas-qa, tapas-classifier, tapas-mlm)"


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """``type_vocab_sizes`` from the seven tables; no aggregation head in the checkpoint:
    ``num_aggregation_labels`` 0."""
    rows = []
    for i in range(10):
        shape = plan.shape_of(rf"\.token_type_embeddings_{i}\.weight$")
        if shape is None:
            break
        rows.append(shape[0])
    if rows:
        check_value(config, "type_vocab_sizes", rows, "the checkpoint's token_type_embeddings_0.."
                    f"{len(rows) - 1}", where)
    if plan.arch.architecture == "TapasForQuestionAnswering" and not plan.has(r"^aggregation_classifier\."):
        check_value(config, "num_aggregation_labels", 0, "the checkpoint (no output_weights_agg)", where)


_BODY = r"^bert/embeddings/token_type_embeddings_\d$"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "tapas", "tapas", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads",), keys={"type_vocab_size": "type_vocab_sizes"}, passthrough=True,
                finish=_finish, values={"hidden_act": ACTIVATIONS}, defaults={"hidden_act": "gelu_new"},
                tokenizer="TapasTokenizer")


ARCHS = [
    _arch("tapas-classifier", "TapasForSequenceClassification",
          [*_body("tapas."), *_CLS, Rule("output_(weights|bias)(_agg)?|column_output_(weights|bias)|cls/.*", None,
                                         why="not a head of TapasForSequenceClassification")],
          r"^output_weights_cls$"),
    _arch("tapas-qa", "TapasForQuestionAnswering", [*_body("tapas."), *_CELLS, Rule("cls/.*", None, why=_HEADS)],
          r"^output_weights$"),
    _arch("tapas-mlm", "TapasForMaskedLM", [*_body("tapas.", pooler=False), *_MLM, _NSP], r"^cls/predictions/"),
    _arch("tapas", "TapasModel", [*_body(""), Rule(r"cls/.*|output_\w+|column_output_\w+", None, why=_HEADS)]),
]
