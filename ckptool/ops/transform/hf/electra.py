"""ELECTRA: google-research/electra's pretraining checkpoints, which hold both models: the
discriminator (``electra/...``, ``discriminator_predictions/dense``, ``dense_1``) and the generator
(``generator/...``, ``generator_predictions/...``), sharing ``electra/embeddings``.

As transformers 4.57's ``load_tf_weights_in_electra`` places them: the discriminator
(``ElectraForPreTraining``, the default) takes ``electra/`` and ``discriminator_predictions``
(``dense_1`` -> ``dense_prediction``); the generator (``ElectraForMaskedLM``, ``--arch
electra-generator``) takes the shared embeddings, ``generator/`` as ``electra.`` and
``generator_predictions`` (``output_bias`` -> ``generator_lm_head.bias``, whose weight is tied to
the word embeddings). Each leaves the other model's variables out, by name.
"""

from __future__ import annotations

from ckptool.ops.transform.hf.bert import embedding_rules, encoder_rules
from ckptool.ops.transform.hf.weightmap import Arch, Rule, dense, norm

H, E = "hidden_size", "embedding_size"
_GENERATOR = "the generator's (--arch electra-generator exports it)"
_DISCRIMINATOR = "the discriminator's (--arch electra exports it)"

DISCRIMINATOR = [*embedding_rules("electra", "electra.", E),
                 *dense("electra/embeddings_project", "electra.embeddings_project", H, E, optional=True),  # E != H only
                 *encoder_rules("electra", "electra."),
                 *dense("discriminator_predictions/dense", "discriminator_predictions.dense", H, H),
                 *dense("discriminator_predictions/dense_1", "discriminator_predictions.dense_prediction", "", H),
                 Rule("(generator|generator_predictions)/.*", None, why=_GENERATOR)]
GENERATOR = [*embedding_rules("electra", "electra.", E),
             *embedding_rules("generator", "electra.", E),  # untied generator embeddings
             *dense("generator/embeddings_project", "electra.embeddings_project", H, E, optional=True),
             *encoder_rules("generator", "electra."),
             *dense("generator_predictions/dense", "generator_predictions.dense", E, H),
             *norm("generator_predictions/LayerNorm", "generator_predictions.LayerNorm", E),
             Rule("generator_predictions/output_bias", "generator_lm_head.bias", "", ("vocab_size",)),
             Rule("(electra/(encoder|embeddings_project)|discriminator_predictions)/.*", None, why=_DISCRIMINATOR)]
_COUNT = {r"^electra\.encoder\.layer\.(\d+)\.": "num_hidden_layers"}

ARCHS = [
    Arch("electra", "electra", "electra", "ElectraForPreTraining", tuple(DISCRIMINATOR),
         (r"^electra/encoder/layer_\d+/",), _COUNT, aliases=("electra-discriminator",),
         required=("num_attention_heads",), passthrough=True, tokenizer="ElectraTokenizer"),
    Arch("electra-generator", "electra-generator", "electra", "ElectraForMaskedLM", tuple(GENERATOR),
         (r"^generator/encoder/layer_\d+/",), _COUNT, required=("num_attention_heads",), passthrough=True,
         tokenizer="ElectraTokenizer"),
]
