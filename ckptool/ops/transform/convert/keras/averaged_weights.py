"""``convert --ema`` through the Keras 3 bridge: which tensor of the source each weight reads.

The bridge maps variables by structure and reads each one's value from the source; with
``--ema`` the source is seen through :func:`ckptool.ops.transform.convert.averaged.ema_source`, the view every
``convert`` target uses: a variable with a moving average reads the average (same dtype and
shape, checked there), the averages themselves and everything else read as they are. A tf_keras
``use_ema`` checkpoint (or SavedModel) thus goes to Keras 3 with the averages as its weights, and a
Keras 3 file goes back to a TF checkpoint the same way: a ``.keras`` file by its own config, a
``.weights.h5`` by the one ``--template-config`` gives (only a config says that the optimizer keeps
averages: amsgrad's slots have the same shapes).
"""

from __future__ import annotations

import functools
from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.read.checkpoint import Checkpoint
from ckptool.ops.read.source import Opened, Spec
from ckptool.ops.transform.convert.averaged import EmaReport, ema_source


def averaged(ck: Checkpoint, where: str, config: Any = None) -> EmaReport:
    """The moving averages of the bridge's source ``ck``; ``report.source`` maps each variable
    that has one to the average it reads. ``config``: a Keras 3 source's model config where the
    file holds none. CkptError when ``ck`` has no averages (or they cannot be paired)."""
    specs = [Spec(v.name, v.dtype, tuple(v.shape), functools.partial(ck.read, v.name)) for v in ck.variables()]
    _, report = ema_source(Opened(specs, lambda: None, ck), where=where, keras_config=config)
    if report is None:  # pragma: no cover - with ema=True, ema_source reports or raises
        raise CkptError(f"{where}: no moving averages found")
    return report


__all__ = ["averaged"]
