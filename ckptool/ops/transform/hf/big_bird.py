"""BigBird: google-research/bigbird's checkpoints: Google BERT's names with the attention kernels
per head (``bert/encoder/layer_N/attention/self/{query,key,value}/kernel`` ``[hidden, heads,
head_size]``, their biases ``[heads, head_size]``, ``attention/output/dense/kernel`` ``[heads,
head_size, hidden]``; the later code's ``Dense3dLayer`` stores them 2-D, taken too) and the
embeddings' layer norm under ``bert/encoder/LayerNorm``; the pretraining heads ``cls/predictions``,
``cls/seq_relationship``.

As transformers 4.57's ``load_tf_weights_in_big_bird`` places them: ``bert/encoder/LayerNorm`` ->
``bert.embeddings.LayerNorm``, the per-head kernels flattened to 2-D and transposed, biases
flattened, other kernels transposed. (Its TriviaQA path reads a SavedModel, not a checkpoint: not
served here.) A release's ``gelu`` is the tanh form its code computes (``gelu_new``, transformers'
default for BigBird too).
"""

from __future__ import annotations

from typing import Any

from ckptool.ops.transform.hf.albert import ACTIVATIONS  # Google BERT modeling.py's get_activation
from ckptool.ops.transform.hf.bert import PRETRAINING
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value, dense, norm

H, FF = "hidden_size", "intermediate_size"
_LAY = r"bert/encoder/layer_(?P<n>\d+)"


def _body(hf: str) -> list[Rule]:
    out, emb = f"{hf}encoder.layer.{{n}}", f"{hf}embeddings"
    return [Rule("bert/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", H)),
            Rule("bert/embeddings/position_embeddings", f"{emb}.position_embeddings.weight", "",
                 ("max_position_embeddings", H)),
            Rule("bert/embeddings/token_type_embeddings", f"{emb}.token_type_embeddings.weight", "",
                 ("type_vocab_size", H)),
            *norm("bert/(?:encoder|embeddings)/LayerNorm", f"{emb}.LayerNorm", H),
            Rule(rf"{_LAY}/attention/self/(?P<p>query|key|value)/kernel", f"{out}.attention.self.{{p}}.weight",
                 "merge:1 T", (H, H)),
            Rule(rf"{_LAY}/attention/self/(?P<p>query|key|value)/bias", f"{out}.attention.self.{{p}}.bias", "flat",
                 (H,)),
            Rule(f"{_LAY}/attention/output/dense/kernel", f"{out}.attention.output.dense.weight", "merge:-1 T", (H, H)),
            Rule(f"{_LAY}/attention/output/dense/bias", f"{out}.attention.output.dense.bias", "", (H,)),
            *norm(f"{_LAY}/attention/output/LayerNorm", f"{out}.attention.output.LayerNorm", H),
            *dense(f"{_LAY}/intermediate/dense", f"{out}.intermediate.dense", FF, H),
            *dense(f"{_LAY}/output/dense", f"{out}.output.dense", H, FF),
            *norm(f"{_LAY}/output/LayerNorm", f"{out}.output.LayerNorm", H),
            *dense("bert/pooler/dense", f"{hf}pooler", H, H)]  # a bare Linear


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    """``num_attention_heads`` from a per-head kernel."""
    for p in plan.placed:
        if p.name.endswith("/attention/self/query/kernel") and len(p.spec.shape) == 3:
            check_value(config, "num_attention_heads", p.spec.shape[1], f"tensor {p.name!r} {list(p.spec.shape)}",
                        where)
            break


_BODY = r"^bert/encoder/LayerNorm/"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    # the config: transformers' names (a bert_config.json of them, or an HF config.json)
    return Arch(name, "big_bird", "big_bird", cls, tuple(rules), (_BODY, *detect), _COUNT,
                passthrough=True, finish=_finish, tokenizer="BigBirdTokenizer", values={"hidden_act": ACTIVATIONS},
                defaults={"hidden_act": "gelu_new"})


ARCHS = [
    _arch("big-bird-pretraining", "BigBirdForPreTraining", [*_body("bert."), *PRETRAINING],
          r"^cls/predictions/", r"^cls/seq_relationship/"),
    _arch("big-bird-mlm", "BigBirdForMaskedLM", [*_body("bert."), *PRETRAINING[:5]], r"^cls/predictions/"),
    _arch("big-bird", "BigBirdModel", [*_body(""), Rule("cls/.*", None, why="a pretraining head")]),
]
