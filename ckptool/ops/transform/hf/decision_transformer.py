"""Decision Transformer: it has no TF release (kzl/decision-transformer is PyTorch, on transformers'
GPT-2); transformers 4.57's ``DecisionTransformerGPT2PreTrainedModel.load_tf_weights`` is a copy of
``load_tf_weights_in_gpt2``, so what it loads is an OpenAI GPT-2 checkpoint (``model/h0/attn/c_attn/w``,
``hparams.json``) into the model's GPT-2 (``DecisionTransformerGPT2Model``): the GPT-2 table
(:mod:`ckptool.ops.transform.hf.gpt2`) without the ``transformer.`` prefix, the width named
``hidden_size``. The Decision Transformer's own layers (``embed_timestep``, ``embed_state``,
``predict_action``, ...) are in no TF checkpoint: ``DecisionTransformerModel`` cannot be written from
one without weights at random, so only its GPT-2 is served, and only by ``--arch`` (the names are
GPT-2's, which detection takes as GPT-2). OpenAI's ``gelu`` is the tanh approximation:
``activation_function`` ``gelu_new`` (the config's default, ``relu``, is the Decision Transformer
paper's for its own GPT-2, trained in PyTorch).
"""

from __future__ import annotations

from ckptool.ops.transform.hf.gpt2 import rules
from ckptool.ops.transform.hf.weightmap import Arch

KEYS = {"n_vocab": "vocab_size", "n_ctx": "n_positions", "n_embd": "hidden_size", "n_head": "n_head",
        "n_layer": "n_layer", "n_positions": "n_positions", "vocab_size": "vocab_size", "hidden_size": "hidden_size",
        "state_dim": "state_dim", "act_dim": "act_dim", "max_ep_len": "max_ep_len"}

ARCHS = [Arch("decision-transformer-gpt2", "decision-transformer", "decision_transformer",
              "DecisionTransformerGPT2Model", rules("", "hidden_size"), (r"^model/h\d+/attn/c_attn/w$", r"^$"),
              {r"^h\.(\d+)\.": "n_layer"}, required=("n_head",), keys=KEYS,
              defaults={"activation_function": "gelu_new"}, aliases=("decision_transformer", "decisiontransformer"))]
