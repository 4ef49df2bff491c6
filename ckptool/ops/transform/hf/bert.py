"""BERT: google-research/bert's checkpoints (``bert/encoder/layer_N/...``, with the pretraining
heads ``cls/predictions``, ``cls/seq_relationship``; ``run_classifier``'s top-level
``output_weights``/``output_bias``; ``run_squad``'s ``cls/squad``) and the TF2 Model Garden
encoder (object-based: ``layer_with_weights-N/...``, under ``model/`` or ``encoder/``).

What transformers 4.57's ``load_tf_weights_in_bert`` does: kernels transposed, ``gamma``/``beta``
-> ``weight``/``bias``, ``output_weights`` kept as stored (already ``[out, in]``),
``cls/predictions/output_bias`` -> ``cls.predictions.bias`` (the decoder's weight is tied to the
word embeddings). The fine-tuned heads, which that loader could not place, go to
``classifier`` (``BertForSequenceClassification``, num_labels from the shape) and
``qa_outputs`` (``BertForQuestionAnswering``). The Model Garden encoder as transformers'
TF2 script placed it (``BertModel``): embeddings are layers 0-2, their norm 3, the transformer
layers 4.., the pooler last; the per-head ``EinsumDense`` kernels are merged to 2-D, then
transposed.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense, norm

H, FF = "hidden_size", "intermediate_size"


def encoder_rules(tf: str, hf: str) -> list[Rule]:
    """The transformer layers of google-research/bert's ``modeling.py`` (ELECTRA shares them)."""
    return layer_rules(rf"{tf}/encoder/layer_(?P<n>\d+)", f"{hf}encoder.layer.{{n}}")


def layer_rules(lay: str, out: str) -> list[Rule]:
    """One such layer: ``lay`` its TF scope (a pattern), ``out`` its HF module (CANINE's local encoders)."""
    rules = [Rule(rf"{lay}/attention/self/(?P<p>query|key|value)/kernel", f"{out}.attention.self.{{p}}.weight",
                  "T", (H, H)),
             Rule(rf"{lay}/attention/self/(?P<p>query|key|value)/bias", f"{out}.attention.self.{{p}}.bias", "", (H,))]
    rules += dense(f"{lay}/attention/output/dense", f"{out}.attention.output.dense", H, H)
    rules += norm(f"{lay}/attention/output/LayerNorm", f"{out}.attention.output.LayerNorm", H)
    rules += dense(f"{lay}/intermediate/dense", f"{out}.intermediate.dense", FF, H)
    rules += dense(f"{lay}/output/dense", f"{out}.output.dense", H, FF)
    rules += norm(f"{lay}/output/LayerNorm", f"{out}.output.LayerNorm", H)
    return rules


def embedding_rules(tf: str, hf: str, width: str = H) -> list[Rule]:
    emb = f"{hf}embeddings"
    return [Rule(f"{tf}/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", width)),
            Rule(f"{tf}/embeddings/position_embeddings", f"{emb}.position_embeddings.weight", "",
                 ("max_position_embeddings", width)),
            Rule(f"{tf}/embeddings/token_type_embeddings", f"{emb}.token_type_embeddings.weight", "",
                 ("type_vocab_size", width)),
            *norm(f"{tf}/embeddings/LayerNorm", f"{emb}.LayerNorm", width)]


def _body(hf: str, pooler: bool = True) -> list[Rule]:
    top = dense("bert/pooler/dense", f"{hf}pooler.dense", H, H) if pooler else \
        [Rule("bert/pooler/dense/(kernel|bias)", None, why="the model has no pooler")]
    return [*embedding_rules("bert", hf), *encoder_rules("bert", hf), *top]


PRETRAINING = [*dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", H, H),
               *norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm", H),
               Rule("cls/predictions/output_bias", "cls.predictions.bias", "", ("vocab_size",)),
               Rule("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", "", ("", H)),
               Rule("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")]
CLASSIFIER = [Rule("output_weights", "classifier.weight", "", ("num_labels", H)),
              Rule("output_bias", "classifier.bias", "", ("num_labels",))]
SQUAD = [Rule("cls/squad/output_weights", "qa_outputs.weight", "", ("num_labels", H)),
         Rule("cls/squad/output_bias", "qa_outputs.bias", "", ("num_labels",))]

_BODY = r"^bert/encoder/layer_\d+/"

# --------------------------------------------------------------------------- Model Garden (TF2)

_W = r"(?:model/|encoder/)?layer_with_weights-"
_LAYER = rf"{_W}(?P<n>\d+)"
_OUT = "encoder.layer.{n-4}"


def _garden() -> list[Rule]:
    rules = [Rule(f"{_W}0/embeddings", "embeddings.word_embeddings.weight", "", ("vocab_size", H)),
             Rule(f"{_W}1/embeddings", "embeddings.position_embeddings.weight", "", ("max_position_embeddings", H)),
             Rule(f"{_W}2/embeddings", "embeddings.token_type_embeddings.weight", "", ("type_vocab_size", H)),
             *norm(f"{_W}3", "embeddings.LayerNorm", H),
             Rule(rf"{_LAYER}/_attention_layer/_(?P<p>query|key|value)_dense/kernel",
                  f"{_OUT}.attention.self.{{p}}.weight", "merge:1 T", (H, H)),
             Rule(rf"{_LAYER}/_attention_layer/_(?P<p>query|key|value)_dense/bias",
                  f"{_OUT}.attention.self.{{p}}.bias", "flat", (H,))]
    # the attention's output projection: its own layer until Model Garden 2.3, inside the attention layer after
    for scope in ("_attention_output_dense", "_attention_layer/_output_dense"):
        rules += dense(f"{_LAYER}/{scope}", f"{_OUT}.attention.output.dense", H, H, op="merge:2 T")
    rules += norm(f"{_LAYER}/_attention_layer_norm", f"{_OUT}.attention.output.LayerNorm", H)
    rules += dense(f"{_LAYER}/_intermediate_dense", f"{_OUT}.intermediate.dense", FF, H)
    rules += dense(f"{_LAYER}/_output_dense", f"{_OUT}.output.dense", H, FF)
    rules += norm(f"{_LAYER}/_output_layer_norm", f"{_OUT}.output.LayerNorm", H)
    rules += dense(f"{_LAYER}", "pooler.dense", H, H)
    return rules


_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, family: str, cls: str, rules: list[Rule], detect: tuple[str, ...], *aliases: str) -> Arch:
    # bert_config.json's keys are transformers' own: kept as they are
    return Arch(name, family, "bert", cls, tuple(rules), detect, _COUNT, required=("num_attention_heads",),
                passthrough=True, tokenizer="BertTokenizer", aliases=aliases)


ARCHS = [
    _arch("bert-squad", "bert", "BertForQuestionAnswering", [*_body("bert.", pooler=False), *SQUAD],
          (_BODY, r"^cls/squad/output_weights$")),
    _arch("bert-classifier", "bert", "BertForSequenceClassification", [*_body("bert."), *CLASSIFIER],
          (_BODY, r"^output_weights$")),
    _arch("bert-pretraining", "bert", "BertForPreTraining", [*_body("bert."), *PRETRAINING],
          (_BODY, r"^cls/(predictions|seq_relationship)/")),
    _arch("bert", "bert", "BertModel", _body(""), (_BODY,)),
    _arch("bert-tf2", "bert-tf2", "BertModel", _garden(), (r"(^|/)layer_with_weights-\d+/_attention_layer/",),
          "model-garden", "bert-model-garden"),
]
