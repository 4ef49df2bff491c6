"""MobileBERT: google-research/google-research's ``mobilebert`` checkpoints: Google BERT's names with
the inverted bottleneck (``bert/encoder/layer_N/bottleneck/{input,attention}``, ``output/bottleneck``),
the stacked feed-forwards ``ffn_layer_I``, ``FakeLayerNorm`` (the element-wise ``no_norm``) where a
layer norm would be, the trigram ``bert/embeddings/embedding_transformation``, and the MLM head's
``cls/predictions/extra_output_weights`` (the rows past the embedding width).

As transformers 4.57's ``load_tf_weights_in_mobilebert`` places them: ``ffn_layer`` -> ``ffn``,
``FakeLayerNorm`` -> ``LayerNorm``, ``extra_output_weights`` -> ``dense`` (transposed, as a kernel),
``bert`` -> ``mobilebert``, kernels transposed. The config's shape fields the tensors tell are checked
or filled: ``num_feedforward_networks`` (the ``ffn_layer`` count + 1), ``use_bottleneck``,
``key_query_shared_bottleneck``, ``trigram_input``, ``normalization_type`` (``FakeLayerNorm``:
``no_norm``), ``classifier_activation`` (a pooler dense layer). Heads: ``MobileBertForPreTraining``
(MLM and next-sentence), ``MobileBertForMaskedLM`` (MLM, no pooler), ``MobileBertModel``.
"""

from __future__ import annotations

from typing import Any

from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense

H, E, B, FF = "hidden_size", "embedding_size", "intra_bottleneck_size", "intermediate_size"  # B: the layers' width
_NORM = "(?:Fake)?LayerNorm"
_LAY = r"bert/encoder/layer_(?P<n>\d+)"
_OUT = "encoder.layer.{n}"


def _norm(tf: str, hf: str, dim: str, optional: bool = False) -> list[Rule]:
    return [Rule(f"{tf}/{_NORM}/gamma", f"{hf}.LayerNorm.weight", "", (dim,), optional=optional),
            Rule(f"{tf}/{_NORM}/beta", f"{hf}.LayerNorm.bias", "", (dim,), optional=optional)]


def _body(hf: str, pooler: bool = True) -> list[Rule]:
    emb, out = f"{hf}embeddings", f"{hf}{_OUT}"
    rules = [Rule("bert/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", E)),
             Rule("bert/embeddings/position_embeddings", f"{emb}.position_embeddings.weight", "",
                  ("max_position_embeddings", H)),
             Rule("bert/embeddings/token_type_embeddings", f"{emb}.token_type_embeddings.weight", "",
                  ("type_vocab_size", H)),
             *dense("bert/embeddings/embedding_transformation", f"{emb}.embedding_transformation", H, ""),
             *_norm("bert/embeddings", emb, H),
             Rule(rf"{_LAY}/attention/self/(?P<p>query|key|value)/kernel", f"{out}.attention.self.{{p}}.weight",
                  "T", (B, "")),
             Rule(rf"{_LAY}/attention/self/(?P<p>query|key|value)/bias", f"{out}.attention.self.{{p}}.bias", "", (B,)),
             *dense(f"{_LAY}/attention/output/dense", f"{out}.attention.output.dense", B, B),
             *_norm(f"{_LAY}/attention/output", f"{out}.attention.output", B),
             *dense(f"{_LAY}/intermediate/dense", f"{out}.intermediate.dense", FF, B),
             *dense(f"{_LAY}/output/dense", f"{out}.output.dense", B, FF),
             *_norm(f"{_LAY}/output", f"{out}.output", B),
             *dense(f"{_LAY}/output/bottleneck/dense", f"{out}.output.bottleneck.dense", H, B, optional=True),
             *_norm(f"{_LAY}/output/bottleneck", f"{out}.output.bottleneck", H, optional=True)]
    for part in ("input", "attention"):
        rules += dense(f"{_LAY}/bottleneck/{part}/dense", f"{out}.bottleneck.{part}.dense", B, H, optional=True)
        rules += _norm(f"{_LAY}/bottleneck/{part}", f"{out}.bottleneck.{part}", B, optional=True)
    ffn, hf_ffn = rf"{_LAY}/ffn_layer_(?P<i>\d+)", f"{out}.ffn.{{i}}"
    rules += [*dense(f"{ffn}/intermediate/dense", f"{hf_ffn}.intermediate.dense", FF, B),
              *dense(f"{ffn}/output/dense", f"{hf_ffn}.output.dense", B, FF),
              *_norm(f"{ffn}/output", f"{hf_ffn}.output", B)]
    if pooler:  # the pooler's dense layer exists only with classifier_activation
        return rules + dense("bert/pooler/dense", f"{hf}pooler.dense", H, H, optional=True)
    return rules + [Rule("bert/pooler/dense/(kernel|bias)", None, why="MobileBertForMaskedLM has no pooler")]


_MLM = [*dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", H, H),
        *_norm("cls/predictions/transform", "cls.predictions.transform", H),
        Rule("cls/predictions/output_bias", "cls.predictions.bias", "", ("vocab_size",)),
        Rule("cls/predictions/extra_output_weights", "cls.predictions.dense.weight", "T", ("", "vocab_size"))]
_NSP = [Rule("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", "", ("", H)),
        Rule("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")]


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """The architecture switches the tensors show (see the module doc)."""
    ffns = {p.hf.split(".ffn.")[1].split(".")[0] for p in plan.placed if ".ffn." in p.hf}
    check_value(config, "num_feedforward_networks", len(ffns) + 1, f"the checkpoint's {len(ffns)} ffn_layer_N", where)
    check_value(config, "use_bottleneck", plan.has(r"\.bottleneck\.input\."), "the checkpoint's bottleneck", where)
    if config["use_bottleneck"]:
        check_value(config, "key_query_shared_bottleneck", plan.has(r"\.bottleneck\.attention\."),
                    "the checkpoint's bottleneck/attention (or its absence)", where)
    names = [p.name for p in plan.placed] + [n for n, _ in plan.dropped]
    pooler = any(n.startswith("bert/pooler/dense/") for n in names)
    check_value(config, "classifier_activation", pooler, "the checkpoint's bert/pooler/dense (or its absence)", where)
    fake = any("FakeLayerNorm" in p.name for p in plan.placed)
    config.setdefault("normalization_type", "no_norm" if fake else "layer_norm")  # a config's word stands
    trans, emb = plan.shape_of(r"\.embedding_transformation\.weight$"), config.get(E)
    if trans is not None and isinstance(emb, int):
        check_value(config, "trigram_input", trans[1] == 3 * emb,
                    f"the checkpoint's embedding_transformation ({trans[1]} inputs)", where)


_BODY = r"^bert/embeddings/embedding_transformation/"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    # the release's bert_config.json uses transformers' names (embedding_size, intra_bottleneck_size, ...)
    return Arch(name, "mobilebert", "mobilebert", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads",), passthrough=True, finish=_finish, tokenizer="MobileBertTokenizer")


ARCHS = [
    _arch("mobilebert-pretraining", "MobileBertForPreTraining", [*_body("mobilebert."), *_MLM, *_NSP],
          r"^cls/predictions/", r"^cls/seq_relationship/"),
    _arch("mobilebert-mlm", "MobileBertForMaskedLM", [*_body("mobilebert.", pooler=False), *_MLM],
          r"^cls/predictions/"),
    _arch("mobilebert", "MobileBertModel", [*_body(""), Rule("cls/.*", None, why="a pretraining head")]),
]
