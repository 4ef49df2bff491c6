"""RemBERT: Google's released checkpoint: Google BERT's names with decoupled embeddings
(``bert/embeddings/*`` of width ``input_embedding_size``, ``bert/encoder/embedding_hidden_mapping_in``
up to ``hidden_size``), the layers ``bert/encoder/layer_N/...``, the pooler, and the pretraining
output side (``bert/embeddings/output_embedding``, ``cls/predictions/...``).

As transformers 4.57's ``load_tf_weights_in_rembert`` places them (``RemBertModel``): ``bert`` ->
``rembert``, kernels transposed, ``gamma``/``beta`` -> ``weight``/``bias``. That loader leaves the
output embedding and everything under ``cls`` out ("reset at classification time"), so no
transformers class is known to take them: they are left out, saying so.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.bert import embedding_rules, encoder_rules
from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense

H, E = "hidden_size", "input_embedding_size"
_OUTPUT = "the pretraining output side: 4.57's loader leaves it out (reset when fine-tuned)"

RULES = [*embedding_rules("bert", "", E),
         *dense("bert/encoder/embedding_hidden_mapping_in", "encoder.embedding_hidden_mapping_in", H, E),
         *encoder_rules("bert", ""),
         *dense("bert/pooler/dense", "pooler.dense", H, H),
         Rule("bert/embeddings/output_embedding|cls/.*", None, why=_OUTPUT)]

ARCHS = [
    # the release's config uses transformers' names (input_embedding_size, output_embedding_size)
    Arch("rembert", "rembert", "rembert", "RemBertModel", tuple(RULES),
         (r"^bert/encoder/layer_\d+/", r"^bert/encoder/embedding_hidden_mapping_in/"),
         {r"^encoder\.layer\.(\d+)\.": "num_hidden_layers"}, required=("num_attention_heads",), passthrough=True,
         tokenizer="RemBertTokenizer"),
]
