"""EfficientNet: a tf_keras ``keras.applications`` EfficientNet (B0-B7, or ``EfficientNet(...)`` with
other coefficients) as transformers' own ``convert_efficientnet_to_pytorch.py`` maps the Keras
weights: ``stem_conv``/``stem_bn`` -> ``embeddings.convolution``/``batchnorm``; the blocks
(``block1a_``, ``block2a_``, ... in sorted order) -> ``encoder.blocks.N`` (``expand_conv``/
``expand_bn`` -> ``expansion``, ``dwconv``/``bn`` -> ``depthwise_conv.depthwise_conv``/
``depthwise_norm``, ``se_reduce``/``se_expand`` -> ``squeeze_excite``, ``project_conv``/
``project_bn`` -> ``projection``); ``top_conv``/``top_bn`` -> ``encoder``; ``predictions`` ->
``classifier`` (``EfficientNetForImageClassification``; without it ``EfficientNetModel``).
Kernels ``[h, w, in, out]`` -> ``[out, in, h, w]``, depthwise ``[h, w, in, 1]`` -> ``[in, 1, h, w]``,
the dense kernel transposed; batch norm ``gamma``/``beta``/``moving_mean``/``moving_variance`` ->
``weight``/``bias``/``running_mean``/``running_var`` (and ``num_batches_tracked`` 0, as the script
leaves it). The ``Normalization`` layer (the input's mean and variance) is left out, as the
script leaves it: transformers' ``EfficientNetImageProcessor`` normalizes the input.

Names: a Keras checkpoint written by ``model.save_weights`` / ``tf.train.Checkpoint`` is
object-based (``layer_with_weights-N/kernel``): the layers are read from their order and the
variables each holds (normalization, stem, each block's optional expansion, depthwise, squeeze-
excite and projection, top, predictions); a checkpoint under the Keras variable names
(``stem_conv/kernel``, ``block1a_dwconv/depthwise_kernel``) is read by its names.

The config: the coefficients of B0-B7 (width, depth, image size, dropout: the script's table) when
the tensors are one of them, else ``in_channels``/``out_channels``/``kernel_sizes``/``expand_ratios``/
``num_block_repeats`` from the tensors; ``strides`` are B0's (the tensors cannot tell) unless a
``--config`` says; ``depthwise_padding`` (the stride-2 blocks whose input has an odd size, which
Keras pads on both sides) computed from ``image_size`` as Keras pads. Activation ``swish`` and batch
norm epsilon 1e-3, as Keras's. A ``--config`` is an HF ``config.json`` or a JSON of
``EfficientNet()``'s arguments (``width_coefficient``, ``depth_coefficient``, ``default_size``, ...).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ckptool.errors import CkptError
from ckptool.ops.transform.hf.common import batch_norm_counters
from ckptool.ops.transform.hf.weightmap import Arch, Plan, Rule, check_value

_BN = (("gamma", "weight"), ("beta", "bias"), ("moving_mean", "running_mean"), ("moving_variance", "running_var"))
_CONV = "perm:3,2,0,1"  # [h, w, in, out] -> [out, in, h, w]
_KERAS = re.compile(r"(?P<p>.*/)?(?P<layer>normalization(?:_\d+)?|stem_conv|stem_bn|top_conv|top_bn|predictions|"
                    r"block(?P<b>\d+[a-z]+)_(?P<part>expand_conv|expand_bn|dwconv|bn|se_reduce|se_expand|"
                    r"project_conv|project_bn))/(?P<v>\w+)")
_NUMBERED = re.compile(r"_\d+$")  # a second model's normalization_1
_OBJECT = re.compile(r"(?P<p>.*/)?layer_with_weights-(?P<n>\d+)/(?P<v>\w+)")
_KINDS = {frozenset({"mean", "variance", "count"}): "norm", frozenset({"kernel"}): "conv",
          frozenset({"depthwise_kernel"}): "dw", frozenset(a for a, _ in _BN): "bn",
          frozenset({"kernel", "bias"}): "kb"}
_BLOCK_PARTS = ("se_reduce", "se_expand", "project_conv", "project_bn")


def _bn(tf: str, hf: str, optional: bool = False) -> list[Rule]:
    return [Rule(f"{tf}/{a}", f"{hf}.{b}", optional=optional) for a, b in _BN]


def _rules(hf: str) -> list[Rule]:
    blk, out = r"blocks/(?P<n>\d+)", f"{hf}encoder.blocks.{{n}}"
    return [Rule("normalization/(mean|variance|count)", None, why="the input's normalization (Keras's Normalization "
                 "layer): transformers' EfficientNetImageProcessor normalizes the input, as the script leaves it"),
            Rule("stem_conv/kernel", f"{hf}embeddings.convolution.weight", _CONV),
            *_bn("stem_bn", f"{hf}embeddings.batchnorm"),
            Rule(f"{blk}/expand_conv/kernel", f"{out}.expansion.expand_conv.weight", _CONV, optional=True),
            *_bn(f"{blk}/expand_bn", f"{out}.expansion.expand_bn", optional=True),  # expand ratio 1: none
            Rule(f"{blk}/dwconv/depthwise_kernel", f"{out}.depthwise_conv.depthwise_conv.weight", "perm:2,3,0,1"),
            *_bn(f"{blk}/bn", f"{out}.depthwise_conv.depthwise_norm"),
            Rule(f"{blk}/se_(?P<s>reduce|expand)/kernel", f"{out}.squeeze_excite.{{s}}.weight", "T"),
            Rule(f"{blk}/se_(?P<s>reduce|expand)/bias", f"{out}.squeeze_excite.{{s}}.bias"),
            Rule(f"{blk}/project_conv/kernel", f"{out}.projection.project_conv.weight", _CONV),
            *_bn(f"{blk}/project_bn", f"{out}.projection.project_bn"),
            Rule("top_conv/kernel", f"{hf}encoder.top_conv.weight", _CONV),
            *_bn("top_bn", f"{hf}encoder.top_bn")]


_HEAD = [Rule("predictions/kernel", "classifier.weight", "T", ("num_labels", "hidden_dim")),
         Rule("predictions/bias", "classifier.bias", "", ("num_labels",))]

# --------------------------------------------------------------------------- names


def _by_keras_names(names: list[str]) -> dict[str, str]:
    """``block2b_bn/gamma`` -> ``blocks/2/bn/gamma``: the blocks numbered in their names' sorted order,
    as the script numbers them."""
    found = {n: m for n in names if (m := _KERAS.fullmatch(n))}
    blocks = sorted({m["b"] for m in found.values() if m["b"]})
    index = {b: i for i, b in enumerate(blocks)}
    return {n: f"blocks/{index[m['b']]}/{m['part']}/{m['v']}" if m["b"] else f"{_NUMBERED.sub('', m['layer'])}/{m['v']}"
            for n, m in found.items()}


def _parse(kinds: list[str]) -> list[str] | None:
    """Each layer's Keras name for the layers with weights in model order, or None when they are
    not an EfficientNet's: [normalization] stem_conv stem_bn (block)+ top_conv top_bn [predictions],
    a block being [expand_conv expand_bn] dwconv bn se_reduce se_expand project_conv project_bn."""
    out: list[str] = []
    i = 0
    if kinds[:1] == ["norm"]:
        out.append("normalization")
        i = 1
    if kinds[i:i + 2] != ["conv", "bn"]:
        return None
    out += ["stem_conv", "stem_bn"]
    i += 2
    n = 0
    while True:
        expand = kinds[i:i + 3] == ["conv", "bn", "dw"]
        body = i + (2 if expand else 0)
        if kinds[body:body + 6] != ["dw", "bn", "kb", "kb", "conv", "bn"]:
            break
        parts = (["expand_conv", "expand_bn"] if expand else []) + ["dwconv", "bn", *_BLOCK_PARTS]
        out += [f"blocks/{n}/{p}" for p in parts]
        i, n = body + 6, n + 1
    if n == 0 or kinds[i:i + 2] != ["conv", "bn"]:
        return None
    out += ["top_conv", "top_bn"]
    i += 2
    if kinds[i:] == ["kb"]:
        out.append("predictions")
        i += 1
    return out if i == len(kinds) else None


def _by_order(names: list[str]) -> dict[str, str]:
    """An object-based checkpoint's ``layer_with_weights-N/VAR`` -> the Keras layer's name + ``/VAR``."""
    layers: dict[tuple[str, int], dict[str, str]] = {}
    for name in names:
        m = _OBJECT.fullmatch(name)
        if m is not None:
            layers.setdefault((m["p"] or "", int(m["n"])), {})[m["v"]] = name
    prefixes = {p for p, _ in layers}
    if len(prefixes) != 1:
        return {}
    order = sorted(layers)
    kinds = [_KINDS.get(frozenset(layers[k]), "?") for k in order]
    if [n for _, n in order] != list(range(len(order))):
        return {}
    parsed = _parse(kinds)
    if parsed is None:
        return {}
    return {tf: f"{layer}/{v}" for k, layer in zip(order, parsed) for v, tf in layers[k].items()}


def rename(names: list[str]) -> dict[str, str]:
    return _by_keras_names(names) or _by_order(names)


# --------------------------------------------------------------------------- the config

#: the script's CONFIG_MAP: hidden_dim, width, depth, image size, dropout of B0..B7
VARIANTS = {"b0": (1280, 1.0, 1.0, 224, 0.2), "b1": (1280, 1.0, 1.1, 240, 0.2), "b2": (1408, 1.1, 1.2, 260, 0.3),
            "b3": (1536, 1.2, 1.4, 300, 0.3), "b4": (1792, 1.4, 1.8, 380, 0.4), "b5": (2048, 1.6, 2.2, 456, 0.4),
            "b6": (2304, 1.8, 2.6, 528, 0.5), "b7": (2560, 2.0, 3.1, 600, 0.5)}
#: keras.applications' DEFAULT_BLOCKS_ARGS, as EfficientNetConfig's defaults hold them
BASE = {"kernel_sizes": [3, 3, 5, 3, 5, 5, 3], "in_channels": [32, 16, 24, 40, 80, 112, 192],
        "out_channels": [16, 24, 40, 80, 112, 192, 320], "strides": [1, 2, 2, 2, 1, 2, 1],
        "num_block_repeats": [1, 2, 2, 3, 3, 4, 1], "expand_ratios": [1, 6, 6, 6, 6, 6, 6]}
KEYS = {"width_coefficient": "width_coefficient", "depth_coefficient": "depth_coefficient",
        "default_size": "image_size", "image_size": "image_size", "dropout_rate": "dropout_rate",
        "drop_connect_rate": "drop_connect_rate", "depth_divisor": "depth_divisor", "activation": "hidden_act",
        **{k: k for k in BASE}, "depthwise_padding": "depthwise_padding", "classes": "num_labels"}


def round_filters(c: float, width: float, divisor: int = 8) -> int:
    """Keras's and transformers' channel rounding (the same formula in both)."""
    c *= width
    new = max(divisor, int(c + divisor / 2) // divisor * divisor)
    return int(new + divisor if new < 0.9 * c else new)


Block = tuple[int, int, int, int]  # in, expanded, out, kernel


def layout(cfg: dict[str, Any]) -> tuple[int, list[Block], int]:
    """(stem channels, blocks, top channels) of transformers' EfficientNet built from ``cfg``."""
    w, d, div = cfg["width_coefficient"], cfg["depth_coefficient"], cfg["depth_divisor"]
    blocks = []
    for i in range(len(cfg["in_channels"])):
        cin, cout = round_filters(cfg["in_channels"][i], w, div), round_filters(cfg["out_channels"][i], w, div)
        for j in range(int(math.ceil(d * cfg["num_block_repeats"][i]))):
            cin = cout if j > 0 else cin
            blocks.append((cin, cin * cfg["expand_ratios"][i], cout, cfg["kernel_sizes"][i]))
    return round_filters(32, w, div), blocks, round_filters(1280, w, div)


def _seen(plan: Plan) -> tuple[int, list[Block], int]:
    """(stem channels, blocks, top channels) the tensors hold."""
    def shape(pattern: str) -> tuple[int, ...]:
        s = plan.shape_of(pattern)
        if s is None:
            raise CkptError(f"no tensor for {pattern.strip('^$')}: not an EfficientNet")
        return s

    blocks = []
    n = 0
    while plan.has(rf"blocks\.{n}\.depthwise_conv\.depthwise_conv\.weight$"):
        dw = shape(rf"blocks\.{n}\.depthwise_conv\.depthwise_conv\.weight$")
        exp = plan.shape_of(rf"blocks\.{n}\.expansion\.expand_conv\.weight$")
        out = shape(rf"blocks\.{n}\.projection\.project_conv\.weight$")
        blocks.append((exp[1] if exp else dw[0], dw[0], out[0], dw[2]))
        n += 1
    return shape(r"embeddings\.convolution\.weight$")[0], blocks, shape(r"encoder\.top_conv\.weight$")[0]


def _stages(blocks: list[Block]) -> list[list[Block]]:
    """The blocks by stage: a stage's first block changes the channels, the others keep them."""
    out: list[list[Block]] = []
    for b in blocks:
        if not out or b[0] != b[2] or b[3] != out[-1][0][3] or b[1] // b[0] != out[-1][0][1] // out[-1][0][0]:
            out.append([])
        out[-1].append(b)
    return out


def _steps(limit: float) -> list[float]:
    """Coefficients to try, the roundest first: tenths, then hundredths, then thousandths up to ``limit``."""
    return list(dict.fromkeys(k / step for step in (10, 100, 1000) for k in range(1, int(limit * step) + 1)))


def _coefficients(seen: tuple[int, list[Block], int], div: int, width: Any) -> tuple[float, float] | None:
    """The roundest width and depth coefficients that build ``seen`` from B0's stages, or None."""
    stem, blocks, top = seen
    widths = [width] if width else [w for w in _steps(4.0) if round_filters(32, w, div) == stem
                                    and round_filters(1280, w, div) == top][:50]
    for w in widths:
        for d in _steps(4.0):
            if sum(math.ceil(d * r) for r in BASE["num_block_repeats"]) != len(blocks):
                continue
            if layout({**BASE, "width_coefficient": w, "depth_coefficient": d, "depth_divisor": div}) == seen:
                return w, d
    return None


def _base(c: int, w: float, div: int) -> float:
    """A base channel count that ``round_filters`` takes to ``c``."""
    n = round(c / w)
    return n if round_filters(n, w, div) == c else c / w


def _derive(seen: tuple[int, list[Block], int], cfg: dict[str, Any], where: str) -> None:
    stem, blocks, top = seen
    div = cfg.setdefault("depth_divisor", 8)
    for _hidden, vw, d, size, drop in VARIANTS.values():
        if cfg.get("width_coefficient", vw) == vw and layout({**BASE, "width_coefficient": vw, "depth_coefficient": d,
                                                            "depth_divisor": div}) == seen:
            for k, v in {**BASE, "width_coefficient": vw, "depth_coefficient": d, "image_size": size,
                         "dropout_rate": drop}.items():
                cfg.setdefault(k, v)
            return
    found = _coefficients(seen, div, cfg.get("width_coefficient"))
    if found is not None:  # EfficientNet(width, depth) with B0's stages
        for k, v in {**BASE, "width_coefficient": found[0], "depth_coefficient": found[1]}.items():
            cfg.setdefault(k, v)
        return
    given = cfg.get("width_coefficient")
    w = given if isinstance(given, (int, float)) else next(
        (w for w in _steps(4.0) if round_filters(32, w, div) == stem and round_filters(1280, w, div) == top), None)
    if w is None:
        raise CkptError(f"{where or 'the tensors'}: no width_coefficient gives a stem of {stem} and a top of {top} "
                        "channels (give --config)")
    stages = _stages(blocks)  # other stages: as the tensors hold them
    cfg.setdefault("width_coefficient", w)
    cfg["depth_coefficient"] = 1.0
    cfg["num_block_repeats"] = [len(s) for s in stages]
    cfg["in_channels"] = [_base(s[0][0], w, div) for s in stages]
    cfg["out_channels"] = [_base(s[0][2], w, div) for s in stages]
    cfg["kernel_sizes"] = [s[0][3] for s in stages]
    cfg["expand_ratios"] = [s[0][1] // s[0][0] for s in stages]
    if len(stages) == len(BASE["strides"]):
        cfg.setdefault("strides", BASE["strides"])


def dw_padding(cfg: dict[str, Any]) -> list[int]:
    """The blocks Keras pads on both sides: stride 2 on an odd-sized input (``correct_pad``)."""
    size = -(-cfg["image_size"] // 2)  # after the stem
    out, n = [], 0
    for i, stride in enumerate(cfg["strides"]):
        for j in range(int(math.ceil(cfg["depth_coefficient"] * cfg["num_block_repeats"][i]))):
            if j == 0 and stride == 2:
                if size % 2:
                    out.append(n)
                size = -(-size // 2)
            n += 1
    return out


def no_first_residual(cfg: dict[str, Any], where: str) -> None:
    """Keras adds a stage's first block's input to its output when the block keeps the channels at
    stride 1; transformers' EfficientNet never does (its first blocks have no residual)."""
    w, div = cfg["width_coefficient"], cfg["depth_divisor"]
    for i, stride in enumerate(cfg["strides"]):
        cin, cout = (round_filters(cfg[k][i], w, div) for k in ("in_channels", "out_channels"))
        if stride == 1 and cin == cout:
            raise CkptError(f"{where or 'the tensors'}: stage {i + 1}'s first block keeps its channels at stride 1, "
                            "where Keras adds a residual that transformers' EfficientNet has not: it cannot hold "
                            "this model")


def _finish(plan: Plan, config: dict[str, Any], where: str) -> None:
    seen = _seen(plan)
    if not all(k in config for k in ("width_coefficient", "depth_coefficient", *BASE)):
        _derive(seen, config, where)
    config.setdefault("depth_divisor", 8)
    if "strides" not in config:
        raise CkptError(f"{where or 'the config'}: {len(config['in_channels'])} stages, not B0's 7: their strides "
                        "are not in the tensors (give --config with strides)")
    got = layout(config)
    if got != seen:
        raise CkptError(f"{where or 'the config'}: its EfficientNet has stem, blocks (in, expanded, out, kernel) and "
                        f"top {got}, but the tensors have {seen}")
    config.setdefault("image_size", 224)
    config.setdefault("dropout_rate", 0.2)
    config.setdefault("depthwise_padding", dw_padding(config))
    config.setdefault("hidden_act", "swish")
    config.setdefault("batch_norm_eps", 1e-3)
    check_value(config, "hidden_dim", seen[2], f"the tensors' top_conv ({seen[2]} channels)", where)
    no_first_residual(config, where)
    num_channels = plan.shape_of(r"embeddings\.convolution\.weight$")
    if num_channels is not None:
        config.setdefault("num_channels", num_channels[1])


def _arch(name: str, cls: str, rules: list[Rule], *detect: str) -> Arch:
    return Arch(name, "efficientnet", "efficientnet", cls, tuple(rules),
                (r"^blocks/0/dwconv/depthwise_kernel$", r"^stem_conv/kernel$", *detect), keys=KEYS,
                finish=_finish, constants=batch_norm_counters, rename=rename,
                aliases=("efficient-net", "keras-efficientnet"))


ARCHS = [_arch("efficientnet", "EfficientNetForImageClassification", [*_rules("efficientnet."), *_HEAD],
               r"^predictions/kernel$"),
         _arch("efficientnet-features", "EfficientNetModel", _rules(""))]
