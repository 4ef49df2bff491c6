"""Which tf_keras layer classes Keras 3 has, which it cannot express (and why), and each class's
arguments as Keras 3's constructor takes them: the tables of :mod:`ckptool.format.keras2_config`."""

from __future__ import annotations

from typing import Any

from ckptool.errors import RefusedError

MODELS = {"Functional", "Sequential", "Model"}
#: stock layer classes tf_keras 2.21 and Keras 3 both have, under the class names their configs carry
LAYERS = {
    "Activation", "ActivityRegularization", "Add", "AdditiveAttention", "AlphaDropout", "Attention", "Average",
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization", "Bidirectional",
    "CategoryEncoding", "CenterCrop", "Concatenate", "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose",
    "Conv3D", "Conv3DTranspose", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Cropping1D", "Cropping2D", "Cropping3D",
    "Dense", "DepthwiseConv1D", "DepthwiseConv2D", "Discretization", "Dot", "Dropout", "ELU", "EinsumDense",
    "Embedding", "Flatten", "GRU", "GRUCell", "GaussianDropout", "GaussianNoise", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
    "GlobalMaxPooling3D", "GroupNormalization", "HashedCrossing", "Hashing", "Identity", "InputLayer",
    "IntegerLookup", "LSTM", "LSTMCell", "LayerNormalization", "LeakyReLU", "Masking", "MaxPooling1D",
    "MaxPooling2D", "MaxPooling3D", "Maximum", "Minimum", "MultiHeadAttention", "Multiply", "Normalization", "PReLU",
    "Permute", "RNN", "RandomBrightness", "RandomContrast", "RandomCrop", "RandomFlip", "RandomRotation",
    "RandomTranslation", "RandomZoom", "ReLU", "RepeatVector", "Rescaling", "Reshape", "Resizing", "SeparableConv1D",
    "SeparableConv2D", "SimpleRNN", "SimpleRNNCell", "Softmax", "SpatialDropout1D", "SpatialDropout2D",
    "SpatialDropout3D", "SpectralNormalization", "StackedRNNCells", "StringLookup", "Subtract", "TextVectorization",
    "TimeDistributed", "UnitNormalization", "UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D",
    "ZeroPadding2D", "ZeroPadding3D"}
#: layers of tf_keras's keras.applications that Keras 3 keeps, unexported, in its own applications'
#: modules (which its loader imports: ``keras.*`` modules only), with the arguments both take
APPLICATION_LAYERS = {
    "LayerScale": ("keras.src.applications.convnext", {"init_values", "projection_dim"}),
    "StochasticDepth": ("keras.src.applications.convnext", {"drop_path_rate"}),
    "CustomScaleLayer": ("keras.src.applications.inception_resnet_v2", {"scale"})}
#: tf_keras layers Keras 3 has no way to express, and why
NOT_IN_KERAS3 = {
    "Lambda": "its function is Python bytecode of the interpreter that saved it, which Keras 3 does not run "
              "(unsafe to deserialize, and tied to that Python version)",
    "DenseFeatures": "feature columns (tf.feature_column) are TensorFlow-only and gone from Keras 3",
    "LocallyConnected1D": "Keras 3 removed locally connected layers",
    "LocallyConnected2D": "Keras 3 removed locally connected layers",
    "ThresholdedReLU": "Keras 3 removed it (ReLU(threshold=) differs at the threshold itself)",
    "RandomHeight": "Keras 3 removed it (RandomZoom replaces it, with other random draws)",
    "RandomWidth": "Keras 3 removed it (RandomZoom replaces it, with other random draws)",
    "TFSMLayer": "it calls a SavedModel, not a layer Keras 3 builds",
}
#: arguments tf_keras records that Keras 3's constructors no longer take (their behaviour is Keras 3's default)
_GONE = {"input_length", "time_major", "zero_output_for_mask", "query_shape", "key_shape", "value_shape",
         "fused", "virtual_batch_size", "adjustment", "batch_input_shape"}
#: arguments Keras 3 dropped that must hold tf_keras's default for the layer to be the same
_DEFAULTS = {"groups": 1, "softmax_robust_masking": False, "renorm": False}
_NO_GROUPS = {"DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D", "SeparableConv2D", "Conv1DTranspose",
              "Conv2DTranspose", "Conv3DTranspose"}
#: Keras 3 layers whose constructor takes these arguments only (no ``**kwargs``: not even ``trainable``)
_ONLY = {"Discretization": {"bin_boundaries", "dtype", "epsilon", "name", "num_bins", "output_mode", "sparse"},
         "SpatialDropout1D": {"dtype", "name", "rate", "seed"},
         "SpatialDropout2D": {"data_format", "dtype", "name", "rate", "seed"},
         "SpatialDropout3D": {"data_format", "dtype", "name", "rate", "seed"}}
#: arguments tf_keras records that the class never used (SeparableConv's kernel_*: it has depthwise and pointwise)
_UNUSED = {"SeparableConv1D": ("kernel_initializer", "kernel_regularizer", "kernel_constraint"),
           "SeparableConv2D": ("kernel_initializer", "kernel_regularizer", "kernel_constraint")}

_RNN = {"LSTM", "GRU", "SimpleRNN", "RNN", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D"}


def _one_axis(cls: str, cfg: dict[str, Any], where: str) -> None:
    axis = cfg.get("axis")
    if isinstance(axis, list):
        if len(axis) != 1:
            raise RefusedError(f"{where}: {cls} over axes {axis}: Keras 3's {cls} normalizes over one axis")
        cfg["axis"] = axis[0]


def _input(cfg: dict[str, Any], where: str) -> None:
    if "batch_input_shape" in cfg:
        cfg["batch_shape"] = cfg.pop("batch_input_shape")
    if cfg.get("ragged"):
        raise RefusedError(f"{where}: a ragged input: Keras 3 takes ragged tensors on TensorFlow only")
    cfg.pop("ragged", None)


def _bidirectional(cfg: dict[str, Any], where: str) -> None:
    back = cfg.get("backward_layer")
    units = [c.get("config", {}).get("units") if isinstance(c, dict) else None for c in (cfg.get("layer"), back)]
    if back is not None and units[0] != units[1] and cfg.get("merge_mode") == "concat":
        raise RefusedError(f"{where}: a backward layer of {units[1]} units beside a forward one of {units[0]}: "
                           "Keras 3's Bidirectional takes the forward layer's output size for both directions")


def fix_layer(cls: str, cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """``cfg`` (a tf_keras ``cls`` layer's config, its parts already translated) as Keras 3's
    constructor takes it."""
    if cls == "InputLayer":
        _input(cfg, where)
        return cfg
    if cls in _RNN and cfg.get("time_major"):
        raise RefusedError(f"{where}: time-major input: Keras 3's recurrent layers take batch-major input only")
    for key in _GONE & set(cfg):
        del cfg[key]
    for key in _UNUSED.get(cls, ()):
        cfg.pop(key, None)
    for key, default in _DEFAULTS.items():
        if key == "groups" and cls not in _NO_GROUPS or key not in cfg:
            continue
        value = cfg.pop(key)
        if value != default:
            raise RefusedError(f"{where}: {key}={value!r}: Keras 3's {cls} has no such argument, only "
                               f"the behaviour of {key}={default!r}")
    for key in ("activation", "recurrent_activation"):
        if cfg.get(key) == "hard_sigmoid":
            raise RefusedError(f"{where}: {key}='hard_sigmoid': tf_keras's is clip(0.2x + 0.5) and Keras 3's "
                               "relu6(x + 3) / 6, and Keras 3 has no activation computing tf_keras's")
    if cls == "Bidirectional":
        _bidirectional(cfg, where)
    if cls == "BatchNormalization":
        _one_axis(cls, cfg, where)
    for key in set(cfg) - _ONLY.get(cls, set(cfg)):
        value = cfg.pop(key)
        if key != "trainable" and value is not None:
            raise RefusedError(f"{where}: {key}={value!r}: Keras 3's {cls} takes no such argument")
    return cfg


__all__ = ["APPLICATION_LAYERS", "LAYERS", "MODELS", "NOT_IN_KERAS3", "fix_layer"]
