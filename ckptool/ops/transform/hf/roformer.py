"""RoFormer: ZhuiyiTechnology/roformer's checkpoints, written by bert4keras under Google BERT's names
(``bert/embeddings/word_embeddings``, ``bert/encoder/layer_N/...``, the MLM head ``cls/predictions``)
but with no position embeddings: the positions are rotary, computed.

As transformers 4.57's ``load_tf_weights_in_roformer`` places them (``bert`` -> ``roformer``,
kernels transposed, ``gamma``/``beta`` -> ``weight``/``bias``): the body under ``roformer.``, the MLM
head as ``cls.predictions`` (``RoFormerForMaskedLM``; its decoder is tied to the word embeddings).
The sinusoidal table ``roformer.encoder.embed_positions.weight`` is the model's own computation
(sin in the first half of each row, cos in the second), written as the model computes it.
bert4keras's ``embedding_hidden_mapping_in`` (``embedding_size`` != ``hidden_size``) goes to
``roformer.embeddings_project``, where the model holds it (4.57's loader looks for it in the
encoder and fails). RoFormer has no pooler and no next-sentence head: a release's are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptool.ops.transform.hf.bert import encoder_rules
from ckptool.ops.transform.hf.weightmap import Arch, Placed, Plan, Rule, dense, norm

if TYPE_CHECKING:
    import numpy as np

H, E = "hidden_size", "embedding_size"
_TF = "(?:bert|roformer)"
_NO_POSITIONS = (r"^(bert|roformer)/embeddings/position_embeddings$",)


def _body(hf: str) -> list[Rule]:
    emb = f"{hf}embeddings"
    return [Rule(f"{_TF}/embeddings/word_embeddings", f"{emb}.word_embeddings.weight", "", ("vocab_size", E)),
            Rule(f"{_TF}/embeddings/token_type_embeddings", f"{emb}.token_type_embeddings.weight", "",
                 ("type_vocab_size", E)),
            *norm(f"{_TF}/embeddings/LayerNorm", f"{emb}.LayerNorm", E),
            *dense(f"{_TF}/encoder/embedding_hidden_mapping_in", f"{hf}embeddings_project", H, E, optional=True),
            *encoder_rules(_TF, hf),
            Rule(f"{_TF}/pooler/dense/(kernel|bias)", None, why="RoFormer has no pooler"),
            Rule("cls/seq_relationship/output_(weights|bias)", None, why="RoFormer has no next-sentence head")]


MLM = [*dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", E, H),
       *norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm", E),
       Rule("cls/predictions/output_bias", "cls.predictions.bias", "", ("vocab_size",))]


def sinusoid(n_pos: int, dim: int) -> np.ndarray:
    """RoFormerSinusoidalPositionalEmbedding's table: angle pos / 10000^(2*(j//2)/dim), float64, then
    sin of the even columns in the first half, cos of the odd ones in the second, as float32."""
    import numpy as np

    j = np.arange(dim)
    angle = np.array([[pos / np.power(10000, 2 * (k // 2) / dim) for k in j] for pos in range(n_pos)])
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out = np.empty((n_pos, dim), np.float32)
    out[:, :half] = np.sin(angle[:, 0::2]).astype(np.float32)
    out[:, half:] = np.cos(angle[:, 1::2]).astype(np.float32)
    return out


def _positions(plan: Plan, config: dict[str, Any], where: str) -> None:
    """The computed table, placed (the config's max_position_embeddings rows of head size)."""
    from ckptool.ops.read.spec import Spec

    n, hidden, heads = (config.get(k) for k in ("max_position_embeddings", "hidden_size", "num_attention_heads"))
    if not (isinstance(n, int) and isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
        return  # the required fields' check names what is missing
    dim = hidden // heads
    prefix = "" if plan.arch.architecture == "RoFormerModel" else "roformer."
    spec = Spec("(sinusoid)", "float32", (n, dim), lambda: sinusoid(n, dim))
    plan.placed.append(Placed(spec, "(computed: sinusoidal positions)", f"{prefix}encoder.embed_positions.weight",
                              "", (n, dim), ()))


_BODY = rf"^{_TF}/encoder/layer_\d+/"
_COUNT = {r"(?:^|\.)encoder\.layer\.(\d+)\.": "num_hidden_layers"}


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    # the release's bert_config.json uses transformers' names; the table's length is the config's
    return Arch(name, "roformer", "roformer", cls, tuple(rules), (_BODY, *detect), _COUNT,
                required=("num_attention_heads", "max_position_embeddings"), passthrough=True, finish=_positions,
                tokenizer="RoFormerTokenizer", absent=_NO_POSITIONS)


ARCHS = [
    _arch("roformer-mlm", "RoFormerForMaskedLM", [*_body("roformer."), *MLM], r"^cls/predictions/"),
    _arch("roformer", "RoFormerModel", [*_body(""), Rule("cls/predictions/.*", None,
                                                        why="the MLM head (--arch roformer-mlm exports it)")]),
]
