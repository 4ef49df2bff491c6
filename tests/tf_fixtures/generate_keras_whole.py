#!/usr/bin/env python
"""tf_keras 2.21 models for issue 52 (a tf_keras SavedModel becomes a Keras 3 ``.keras`` file).

    /root/v/tf/bin/python tests/tf_fixtures/generate_keras_whole.py [--out tests/data/keras_whole] [--only NAME ...]

Each model of :data:`MODELS` is built with tf_keras, compiled (Adam, mse), trained one step and
saved with ``model.save(dir)``. What is committed under ``--out`` is what ckptool reads of each
SavedModel (``keras_metadata.pb`` and ``variables/``; ``saved_model.pb`` is the TF graph, which it
does not read, and is tens of KB) plus ``io.npz``: the inputs (``x0``, ``x1``, ...) and what
tf_keras predicted for them (``y0``, ...). The torch tier (tests/kerastorch) converts these and
loads them in Keras 3 without TensorFlow. The interop tier imports :func:`build` and
:func:`save` to write these models and larger ones (:data:`LARGE`: keras.applications, not
committed) at test time.
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "keras_whole"))


def _models():
    import numpy as np
    import tf_keras as k

    L = k.layers
    rng = np.random.default_rng(52)

    def r(*shape, scale=1.0):
        return (rng.random(shape) * scale).astype("float32")

    def sequential():
        m = k.Sequential([L.Dense(5, activation="relu", input_shape=(6,), kernel_regularizer="l2"),
                          L.BatchNormalization(), L.Dropout(0.1), L.Dense(3, activation="softmax")])
        return m, [r(4, 6)]

    def shared():  # a shared layer, two inputs, two outputs, merges
        a, b = k.Input((5,), name="a"), k.Input((5,), name="b")
        sh = L.Dense(4, name="shared", kernel_constraint=k.constraints.MaxNorm(2.0))
        x = L.Concatenate()([sh(a), sh(b)])
        o1 = L.Dense(2, name="o1")(x)
        o2 = L.Dense(3, activation="sigmoid", name="o2")(L.Add()([sh(a), sh(b)]))
        return k.Model([a, b], [o1, o2]), [r(3, 5), r(3, 5)]

    def nested():  # a Sequential and a Functional model as layers, and a Sequential holding one
        inner = k.Sequential([L.Dense(4, activation="tanh"), L.Dense(4)], name="inner")
        inner.build((None, 3))
        i2 = k.Input((4,))
        f = k.Model(i2, L.LayerNormalization()(L.Dense(4)(i2)), name="innerf")
        inp = k.Input((3,))
        mid = k.Model(inp, f(inner(inp)), name="mid")
        return k.Sequential([k.Input((3,)), mid, L.Dense(2)]), [r(3, 3)]

    def recurrent():  # masking, LSTM, Bidirectional (its own backward layer), TimeDistributed, stacked cells
        inp = k.Input((7,), dtype="int32")
        x = L.Embedding(20, 6, mask_zero=True)(inp)
        x = L.LSTM(5, return_sequences=True)(x)
        x = L.Bidirectional(L.GRU(4, return_sequences=True),
                            backward_layer=L.LSTM(4, return_sequences=True, go_backwards=True))(x)
        x = L.TimeDistributed(L.Dense(3))(x)
        x = L.RNN([L.GRUCell(4), L.SimpleRNNCell(3)], return_sequences=True)(x)
        x = L.GRU(3, reset_after=False)(x)
        ids = rng.integers(1, 20, (3, 7)).astype("int32")
        ids[:, 5:] = 0
        return k.Model(inp, x), [ids]

    def masking():
        inp = k.Input((6, 4))
        x = L.Masking(0.0)(inp)
        x = L.RNN(L.LSTMCell(3), return_sequences=True)(x)
        x = L.SimpleRNN(3)(x)
        d = r(2, 6, 4)
        d[:, 4:] = 0
        return k.Model(inp, x), [d]

    def attention():
        q, v = k.Input((5, 8)), k.Input((4, 8))
        x = L.MultiHeadAttention(2, 4)(q, v)
        x = L.LayerNormalization()(L.Add()([x, q]))
        x = L.Attention()([x, q])
        x = L.AdditiveAttention()([x, q])
        return k.Model([q, v], x), [r(2, 5, 8), r(2, 4, 8)]

    def convolutional():
        inp = k.Input((12, 12, 3))
        x = L.Rescaling(1 / 255.0, offset=-0.5)(inp)
        x = L.Conv2D(4, 3, padding="same", activation="relu")(x)
        x = L.DepthwiseConv2D(3, padding="same")(x)
        x = L.SeparableConv2D(5, 3)(x)
        x = L.BatchNormalization(center=False)(x)
        x = L.MaxPooling2D()(x)
        x = L.Conv2DTranspose(3, 3, strides=2)(x)
        x = L.GroupNormalization(3)(x)
        x = L.UpSampling2D(interpolation="bilinear")(x)
        x = L.Cropping2D(1)(x)
        x = L.SpatialDropout2D(0.2)(x)
        y = L.Conv1D(4, 3, padding="causal", dilation_rate=2)(L.Reshape((-1, 3))(x))
        y = L.GlobalMaxPooling1D()(L.PReLU()(y))
        x = L.GlobalAveragePooling2D()(x)
        return k.Model(inp, L.Dense(2)(L.Concatenate()([x, y]))), [r(2, 12, 12, 3, scale=255.0)]

    def mixed():
        k.mixed_precision.set_global_policy("mixed_float16")
        try:
            inp = k.Input((4,))
            x = L.Dense(8, activation="relu")(inp)
            m = k.Model(inp, L.Dense(2, dtype="float32")(x))
        finally:
            k.mixed_precision.set_global_policy("float32")
        return m, [r(3, 4)]

    def ops():  # TF operations on Keras tensors (TFOpLambda, SlicingOpLambda): one of each translated function
        import tensorflow as tf

        inp = k.Input((4, 6), name="x")
        x = L.Dense(6)(inp)
        hs = x * (L.ReLU(6.0)(x + 3.0) * (1.0 / 6.0))  # MobileNetV3's hard_swish
        a = tf.reshape(tf.concat([hs, inp], axis=-1), (-1, 48))
        pos = tf.abs(a) + 1.0
        acts = [tf.nn.relu(a), tf.math.sigmoid(a), tf.nn.relu6(a), tf.nn.softmax(a), tf.nn.gelu(a), tf.nn.silu(a),
                tf.nn.leaky_relu(a, 0.1), tf.nn.elu(a), tf.nn.selu(a), tf.math.softplus(a), tf.tanh(a), tf.math.erf(a),
                tf.sqrt(pos), tf.math.rsqrt(pos), tf.exp(-tf.square(a)), tf.math.log(pos), 1.0 - a, a / 2.0,
                tf.divide(a, 3.0), tf.add(a, a), tf.subtract(a, 0.5), tf.maximum(a, 0.5), tf.minimum(a, 0.5),
                a ** 2, tf.clip_by_value(a, -1.0, 1.0), tf.cast(tf.cast(a, "float16"), "float32"),
                tf.math.floordiv(tf.reshape(tf.concat([inp, inp], -1), (-1, 48)), 0.3)]
        y = tf.stack(acts, axis=1)
        red = tf.reduce_mean(y, axis=1) + tf.reduce_sum(y, axis=[1]) * 0.01 + tf.reduce_max(y, 1) - \
            tf.reduce_min(y, 1, keepdims=False)
        m = tf.squeeze(tf.expand_dims(tf.matmul(inp, tf.transpose(inp, perm=[0, 2, 1])), -1), axis=-1)
        sl = [inp[:, 0], tf.reshape(x[..., 1:3], (-1, 8)), tf.reshape(inp[:, ::2, tf.newaxis, 1], (-1, 2)),
              -inp[:, -1, :], tf.reshape(m, (-1, 16))]
        each = tf.concat([tf.reshape(y, (-1, len(acts) * 48)), red, *sl], axis=-1)  # every operation's own values
        return k.Model(inp, [L.Dense(3)(red), each]), [r(3, 4, 6, scale=2.0) - 1.0]

    def einsum():  # EinsumDense output shapes holding None (a length the input gives), on variable-length input
        inp = k.Input((None, 4))
        x = L.EinsumDense("abc,cd->abd", output_shape=(None, 6), bias_axes="d")(inp)
        x = L.EinsumDense("abc,cde->abde", output_shape=(None, 2, 3), bias_axes="de")(x)
        x = L.EinsumDense("...b,bc->...c", output_shape=2)(L.Reshape((-1, 6))(x))
        return k.Model(inp, x), [r(2, 5, 4)]

    return {f.__name__: f for f in (sequential, shared, nested, recurrent, masking, attention, convolutional,
                                    mixed, ops, einsum)}


def _large():
    import numpy as np
    import tf_keras as k

    def mobilenet_v2():
        m = k.applications.MobileNetV2(input_shape=(32, 32, 3), alpha=0.35, weights=None, classes=5)
        return m, [np.random.default_rng(1).random((2, 32, 32, 3)).astype("float32")]

    def densenet121():  # tf_keras names layers 'conv1/conv': Keras 3 refuses '/'
        m = k.applications.DenseNet121(input_shape=(32, 32, 3), weights=None, classes=3)
        return m, [np.random.default_rng(2).random((1, 32, 32, 3)).astype("float32")]

    def mobilenet_v3_small():  # hard_sigmoid is x + 3.0 and * (1 / 6) on Keras tensors: TF operations
        m = k.applications.MobileNetV3Small(input_shape=(32, 32, 3), alpha=0.75, weights=None, classes=4,
                                            classifier_activation=None)
        return m, [np.random.default_rng(3).random((2, 32, 32, 3)).astype("float32") * 255.0]

    return {"mobilenet_v2": mobilenet_v2, "densenet121": densenet121, "mobilenet_v3_small": mobilenet_v3_small}


MODELS = ("sequential", "shared", "nested", "recurrent", "masking", "attention", "convolutional", "mixed", "ops",
          "einsum")
LARGE = ("mobilenet_v2", "densenet121", "mobilenet_v3_small")


def build(name):
    """The tf_keras model ``name`` (compiled, one training step taken) and its inputs."""
    import numpy as np

    table = {**_models(), **_large()}
    model, xs = table[name]()
    model.compile(optimizer="adam", loss="mse")
    y = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    model.train_on_batch(xs if len(xs) > 1 else xs[0], [np.zeros_like(t) for t in y] if isinstance(y, list)
                         else np.zeros_like(y))
    return model, xs


def save(name, out_dir, full=True):
    """Save model ``name`` as a SavedModel in ``out_dir/name`` (``full``: as tf_keras writes it; else
    only ``keras_metadata.pb`` and ``variables/``) with ``io.npz``; returns the directory."""
    import numpy as np

    model, xs = build(name)
    ys = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    ys = ys if isinstance(ys, list) else [ys]
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    # keras.applications graphs without their traced functions (ckptool reads keras_metadata.pb and
    # variables/, never the traces; the small models keep them): DenseNet121 saves in 21 s, not 52 s
    model.save(d, save_traces=name not in LARGE)
    if not full:
        for item in os.listdir(d):
            if item not in ("keras_metadata.pb", "variables"):
                p = os.path.join(d, item)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    arrays = {f"x{i}": x for i, x in enumerate(xs)}
    arrays.update({f"y{i}": np.asarray(y) for i, y in enumerate(ys)})
    np.savez(os.path.join(d, "io.npz"), **arrays)
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", default=list(MODELS))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.only:
        print(save(name, args.out, full=False))


if __name__ == "__main__":
    sys.exit(main())
