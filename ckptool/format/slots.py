"""Which tensors are optimizer state: the one table of slot-name patterns.

Name-based (TF1) checkpoints name slots after their variable; object-based
(TF2) checkpoints record optimizers in the object graph, which
``ObjectGraph.optimizer_nodes`` reads; their keys still match the patterns
below, which is what :func:`is_optimizer_name` answers for names alone.

====================================  ==============================================
pattern (one path component, or the    written by
key's shape)
====================================  ==============================================
``Adam``, ``Adam_1`` (``_N``)          tf.compat.v1.train.AdamOptimizer (m, v slots)
``beta1_power``, ``beta2_power``       AdamOptimizer's accumulators (``_N`` suffixed)
``Momentum``                           MomentumOptimizer
``RMSProp``, ``RMSProp_1``             RMSPropOptimizer (rms, momentum)
``Adagrad``, ``AdagradDA``             AdagradOptimizer, AdagradDAOptimizer
``Ftrl``, ``Ftrl_1``                   FtrlOptimizer (accum, linear)
``Adadelta``, ``Adadelta_1``           AdadeltaOptimizer
``ProximalAdagrad``                    ProximalAdagradOptimizer
``AdamW``, ``Nadam``, ``Adamax``       contrib / addons TF1 optimizers
``adam_m``, ``adam_v``                 Google BERT's AdamWeightDecayOptimizer, LAMB
``optimizer/...`` (first component)    Keras 2 and Keras 3 optimizers in TF2 checkpoints
                                       (but ``optimizer/_trainable_variables/``: below)
``.../.OPTIMIZER_SLOT/...``            TF2 slot variables (any optimizer)
====================================  ==============================================

``global_step`` (and TF2's ``save_counter``) is training bookkeeping, not
optimizer state: it is kept. So is ``optimizer/_trainable_variables/...``: a
Keras 3 optimizer tracks the model's trainable variables under that name, and
TF keys each variable by its first path breadth first, which for
``Checkpoint(model=..., optimizer=...)`` runs through the optimizer: those keys
hold the model's weights. With an object graph they are re-keyed under the
model when the optimizer is cut out (``ObjectGraph.edited``); by name alone
they are kept as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ckptool.format.objgraph import OPTIMIZER_SLOT

if TYPE_CHECKING:
    from ckptool.format.objgraph import ObjectGraph

_SLOT = re.compile(r"(^|.*/)(Adam(_\d+)?|Momentum(_\d+)?|RMSProp(_\d+)?|Adagrad(DA)?(_\d+)?|Ftrl(_\d+)?|"
                   r"Adadelta(_\d+)?|ProximalAdagrad(_\d+)?|AdamW(_\d+)?|Nadam(_\d+)?|Adamax(_\d+)?|"
                   r"adam_[mv](_\d+)?)$")
_POWER = re.compile(r"(^|.*/)beta[12]_power(_\d+)?$")
#: the model's weights, as a Keras 3 optimizer tracks them (not its state)
MODEL_WEIGHTS_PREFIX = "optimizer/_trainable_variables/"


def is_optimizer_name(name: str) -> bool:
    """Whether ``name`` is optimizer state by the table above."""
    if f"/{OPTIMIZER_SLOT}/" in name:
        return True
    if name.startswith("optimizer/"):
        return not name.startswith(MODEL_WEIGHTS_PREFIX)
    return bool(_SLOT.match(name) or _POWER.match(name))


def optimizer_keys(names: Iterable[str], graph: ObjectGraph | None = None) -> set[str]:
    """The optimizer state among ``names``: from the object graph when there is one (it
    knows a Keras model's weights that the optimizer also tracks are not its state), else
    by name."""
    if graph is None:
        return {n for n in names if is_optimizer_name(n)}
    _, keys = graph.edited({}, frozenset(), strip_optimizer=True)
    return {n for n in names if n in keys and keys[n] is None}
