"""``convert --to hf``: a TF checkpoint as a Hugging Face folder (``config.json``, ``model.safetensors``
or its shards and index, tokenizer files) that transformers 5 loads with ``from_pretrained``, each
weight equal to what transformers 4.57's own TF loader (``load_tf_weights_in_*``) put there.

Each architecture is a table of rules (TF name pattern -> HF name, transform) in its family's module
(``albert``, ``bert``, ``big_bird``, ``canine``, ``convbert``, ``decision_transformer``, ``efficientnet``,
``electra``, ``funnel``, ``gpt2``, ``gpt_neo``, ``imagegpt``, ``lxmert``, ``megatron_bert``, ``mobilebert``,
``mobilenet``, ``mobilenet_v2``, ``rembert``, ``roc_bert``, ``roformer``, ``t5``, ``tapas``, ``xlnet``), written as
``weightmap``'s docstring says; ``weightmap`` (the one weight-map engine) checks a table when it is built,
matches and checks the config, ``steps`` is its table of transform steps, ``coverage`` finds the
model's weights no variable fills, ``config`` reads the release's config, ``tokenizer`` writes the
tokenizer files, ``export`` picks the architecture and ``folder`` writes the folder. :data:`ARCHS`
lists them in the order detection tries them (the most specific first).
"""

from __future__ import annotations

from ckptool.ops.transform.hf import (
    albert,
    bert,
    big_bird,
    canine,
    convbert,
    decision_transformer,
    efficientnet,
    electra,
    funnel,
    gpt2,
    gpt_neo,
    imagegpt,
    lxmert,
    megatron_bert,
    mobilebert,
    mobilenet,
    mobilenet_v2,
    rembert,
    roc_bert,
    roformer,
    t5,
    tapas,
    xlnet,
)
from ckptool.ops.transform.hf.weightmap import Arch

# in the order detection tries them; the families that share BERT's names before ELECTRA and BERT
ARCHS: tuple[Arch, ...] = (*albert.ARCHS, *convbert.ARCHS, *funnel.ARCHS, *canine.ARCHS, *electra.ARCHS,
                           *roformer.ARCHS, *megatron_bert.ARCHS, *roc_bert.ARCHS, *tapas.ARCHS, *rembert.ARCHS,
                           *mobilebert.ARCHS, *big_bird.ARCHS, *bert.ARCHS, *t5.ARCHS, *gpt2.ARCHS, *gpt_neo.ARCHS,
                           *mobilenet.ARCHS, *mobilenet_v2.ARCHS, *efficientnet.ARCHS, *xlnet.ARCHS,
                           *imagegpt.ARCHS, *decision_transformer.ARCHS, *lxmert.ARCHS)

__all__ = ["ARCHS"]
