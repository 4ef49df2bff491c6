"""MobileNetV2: TF-slim's checkpoints (tensorflow/models research/slim ``nets/mobilenet``:
``MobilenetV2/Conv/weights``, ``MobilenetV2/expanded_conv/depthwise``, ``MobilenetV2/expanded_conv_N/
{expand,depthwise,project}``, ``MobilenetV2/Conv_1``, ``MobilenetV2/Logits/Conv2d_1c_1x1``), as
transformers 4.57's ``load_tf_weights_in_mobilenet_v2`` places them: ``Conv`` and ``expanded_conv`` ->
``conv_stem`` (``first_conv``, ``conv_3x3``, ``reduce_1x1``), ``expanded_conv_N`` -> ``layer.{N-1}``
(``expand_1x1``, ``conv_3x3``, ``reduce_1x1``), ``Conv_1`` -> ``conv_1x1``; kernels ``[h, w, in, out]``
-> ``[out, in, h, w]``, depthwise ``[h, w, in, 1]`` -> ``[in, 1, h, w]``, the 1x1 logits squeezed to
a linear layer; batch norm as MobileNetV1's. Unlike V1's loader, V2's takes each weight's, ``gamma``'s,
``beta``'s and ``biases``' ``ExponentialMovingAverage`` where the checkpoint has one (the slim
release's training shadows): so does this table; ``moving_mean``/``moving_variance`` stay raw.

The config from the tensors: ``depth_multiplier`` (the one of 0.35-1.4, or a hundredth, that builds
every layer's channels as slim and transformers round them), ``finegrained_output`` (a last layer of
1280 channels under a multiplier below 1), ``num_labels`` (slim's 1001 with its background class);
``image_size`` 224, ``relu6``, batch norm epsilon 1e-3 as slim's, unless a ``--config`` says.
DeepLab's segmentation release (``image_pooling``, ``aspp0``, ``logits/semantic``) is not served:
it has no ``Conv_1``, which transformers' model holds all the same.
"""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.common import batch_norm_counters
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule

_BN = (("gamma", "weight"), ("beta", "bias"), ("moving_mean", "running_mean"), ("moving_variance", "running_var"))
_M = "MobilenetV2"
_PARTS = {"expand": "expand_1x1", "depthwise": "conv_3x3", "project": "reduce_1x1"}


def _conv(tf: str, hf: str, weights: str = "weights") -> list[Rule]:
    perm = "perm:2,3,0,1" if weights == "depthwise_weights" else "perm:3,2,0,1"
    return [Rule(f"{tf}/{weights}", f"{hf}.convolution.weight", perm),
            *(Rule(f"{tf}/BatchNorm/{a}", f"{hf}.normalization.{b}") for a, b in _BN)]


def _body(hf: str) -> list[Rule]:
    lay = rf"{_M}/expanded_conv_(?P<i>\d+)"
    return [*_conv(f"{_M}/Conv", f"{hf}conv_stem.first_conv"),
            *_conv(f"{_M}/expanded_conv/depthwise", f"{hf}conv_stem.conv_3x3", "depthwise_weights"),
            *_conv(f"{_M}/expanded_conv/project", f"{hf}conv_stem.reduce_1x1"),
            *(r for part, name in _PARTS.items()
              for r in _conv(f"{lay}/{part}", f"{hf}layer.{{i-1}}.{name}",
                             "depthwise_weights" if part == "depthwise" else "weights")),
            *_conv(f"{_M}/Conv_1", f"{hf}conv_1x1")]


_LOGITS = [Rule(f"{_M}/Logits/Conv2d_1c_1x1/weights", "classifier.weight", "squeeze T", ("num_labels", "")),
           Rule(f"{_M}/Logits/Conv2d_1c_1x1/biases", "classifier.bias", "", ("num_labels",))]
#: what the loader's ema() reads from its shadow when there is one
AVERAGE = rf"{_M}/.*/(weights|depthwise_weights|biases|BatchNorm/gamma|BatchNorm/beta)"
KEYS = {k: k for k in ("depth_multiplier", "image_size", "min_depth", "num_channels", "depth_divisible_by",
                       "expand_ratio", "output_stride", "finegrained_output", "first_layer_is_expansion",
                       "tf_padding", "classifier_dropout_prob", "layer_norm_eps", "hidden_act")}

# --------------------------------------------------------------------------- the config

CHANNELS = [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320]  # transformers' (slim's V2_DEF)
RELEASED = (1.0, 1.4, 1.3, 0.75, 0.5, 0.35)  # slim's published multipliers, tried first


def make_divisible(value: float, divisor: int, min_value: int) -> int:
    new = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return int(new + divisor if new < 0.9 * value else new)


def layout(cfg: dict[str, Any]) -> list[int]:
    """Each convolution's output channels in transformers' MobileNetV2 built from ``cfg``: the stem's
    three, each layer's three, the last."""
    div, least, dm = cfg["depth_divisible_by"], cfg["min_depth"], cfg["depth_multiplier"]

    def depth(c: int) -> int:
        return make_divisible(int(round(c * dm)), div, least)

    ch = [depth(c) for c in CHANNELS]
    first = depth(32)
    out = [first, first, ch[0]]
    for i in range(16):
        exp = make_divisible(int(round(ch[i] * cfg["expand_ratio"])), div, least)
        out += [exp, exp, ch[i + 1]]
    out.append(1280 if cfg["finegrained_output"] and dm < 1.0 else depth(1280))
    return out


def _seen(plan: Plan) -> list[int]:
    names = [r"conv_stem\.first_conv", r"conv_stem\.conv_3x3", r"conv_stem\.reduce_1x1"]
    names += [rf"layer\.{i}\.{p}" for i in range(16) for p in _PARTS.values()] + [r"conv_1x1"]
    out = []
    for n in names:
        shape = plan.shape_of(rf"(^|\.){n}\.convolution\.weight$")
        if shape is None:
            raise CkptError(f"the checkpoint has no {n.replace(chr(92), '')} (transformers' MobileNetV2 holds 17 "
                            "layers and Conv_1)")
        out.append(shape[0])
    return out


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    seen = _seen(plan)
    for k, v in (("depth_divisible_by", 8), ("min_depth", 8), ("expand_ratio", 6.0)):
        config.setdefault(k, v)
    stem = plan.shape_of(r"conv_stem\.first_conv\.convolution\.weight$")
    if stem is not None:
        config.setdefault("num_channels", stem[1])
    tries = [config["depth_multiplier"]] if "depth_multiplier" in config else \
        [*RELEASED, *(k / 100 for k in range(1, 401))]
    fine = [config["finegrained_output"]] if "finegrained_output" in config else [True, False]
    for dm in tries:
        for f in fine:
            if layout({**config, "depth_multiplier": dm, "finegrained_output": f}) == seen:
                config["depth_multiplier"], config["finegrained_output"] = dm, f
                slim: dict[str, Any] = {"image_size": 224, "hidden_act": "relu6", "layer_norm_eps": 1e-3,
                                        "tf_padding": True}  # slim's: relu6, batch norm epsilon 1e-3, SAME padding
                for k, value in slim.items():
                    config.setdefault(k, value)
                return
    raise CkptError(f"{where or 'the tensors'}: no depth_multiplier builds these channels {seen} as transformers' "
                    "MobileNetV2 does" + (f" (depth_multiplier {tries[0]})" if len(tries) == 1 else ""))


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "mobilenet-v2", "mobilenet_v2", cls, tuple(rules), (f"^{_M}/Conv/weights$", *detect),
                keys=KEYS, finish=_finish, constants=batch_norm_counters, average=AVERAGE,
                aliases=("mobilenetv2", "mobilenet_v2"))


ARCHS = [_arch("mobilenet-v2", "MobileNetV2ForImageClassification", [*_body("mobilenet_v2."), *_LOGITS],
               f"^{_M}/Logits/"),
         _arch("mobilenet-v2-features", "MobileNetV2Model", _body(""))]
