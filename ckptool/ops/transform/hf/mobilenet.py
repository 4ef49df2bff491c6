"""MobileNetV1: TF-slim's checkpoints (``MobilenetV1/Conv2d_0/weights``, ``Conv2d_N_depthwise``,
``Conv2d_N_pointwise``, ``Logits/Conv2d_1c_1x1``), as transformers 4.57's
``load_tf_weights_in_mobilenet_v1`` places them: the raw weights (their
``ExponentialMovingAverage`` shadows and RMSProp slots left out), convolution kernels from
``[h, w, in, out]`` to ``[out, in, h, w]`` (depthwise ``[h, w, in, 1]`` to ``[in, 1, h, w]``), the
1x1 logits convolution squeezed to a linear layer, batch norm ``gamma``/``beta``/``moving_mean``/
``moving_variance`` -> ``weight``/``bias``/``running_mean``/``running_var`` (and PyTorch's
``num_batches_tracked``, which TF does not keep, 0 as the loader leaves it).

The config comes from the tensors (``depth_multiplier`` from the last layer's 1024 x multiplier
channels, ``num_labels`` from the logits, slim's 1001 with its background class); ``image_size``
is 224 unless a ``--config`` says otherwise.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.common import batch_norm_counters
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule

_BN = (("gamma", "weight"), ("beta", "bias"), ("moving_mean", "running_mean"), ("moving_variance", "running_var"))


def _conv(tf: str, hf: str, weights: str, perm: str) -> list[Rule]:
    return [Rule(f"{tf}/{weights}", f"{hf}.convolution.weight", f"perm:{perm}"),
            *(Rule(f"{tf}/BatchNorm/{a}", f"{hf}.normalization.{b}") for a, b in _BN)]


def _body(hf: str) -> list[Rule]:
    return [*_conv("MobilenetV1/Conv2d_0", f"{hf}conv_stem", "weights", "3,2,0,1"),
            *_conv(r"MobilenetV1/Conv2d_(?P<i>\d+)_depthwise", f"{hf}layer.{{2*i-2}}", "depthwise_weights", "2,3,0,1"),
            *_conv(r"MobilenetV1/Conv2d_(?P<i>\d+)_pointwise", f"{hf}layer.{{2*i-1}}", "weights", "3,2,0,1")]


_LOGITS = [Rule("MobilenetV1/Logits/Conv2d_1c_1x1/weights", "classifier.weight", "squeeze T", ("num_labels", "")),
           Rule("MobilenetV1/Logits/Conv2d_1c_1x1/biases", "classifier.bias", "", ("num_labels",))]
LAST = 26  # transformers' 13 depthwise + 13 pointwise layers
KEYS = {"depth_multiplier": "depth_multiplier", "image_size": "image_size", "min_depth": "min_depth",
        "num_channels": "num_channels"}


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    stem = plan.shape_of(r"conv_stem\.convolution\.weight$")
    last = plan.shape_of(rf"layer\.{LAST - 1}\.convolution\.weight$")
    if stem is not None and config.get("num_channels") is None:
        config["num_channels"] = stem[1]
    if last is None:
        return
    min_depth = config.setdefault("min_depth", 8)
    dm = config.get("depth_multiplier")
    if dm is None:
        config["depth_multiplier"] = last[0] / 1024
    elif max(int(1024 * dm), min_depth) != last[0]:
        raise CkptError(f"{where or 'the config'}: depth_multiplier is {dm}, but the last layer has {last[0]} "
                        f"channels (1024 x {last[0] / 1024})")


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "mobilenet-v1", "mobilenet_v1", cls, tuple(rules), ("^MobilenetV1/Conv2d_0/weights$", *detect),
                keys=KEYS, defaults={"image_size": 224}, finish=_finish, constants=batch_norm_counters,
                aliases=("mobilenet", "mobilenet_v1"))


ARCHS = [_arch("mobilenet-v1", "MobileNetV1ForImageClassification", [*_body("mobilenet_v1."), *_LOGITS],
               "^MobilenetV1/Logits/"),
         _arch("mobilenet-v1-features", "MobileNetV1Model", _body(""))]
