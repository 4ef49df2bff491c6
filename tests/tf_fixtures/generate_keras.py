#!/usr/bin/env python
"""Write the Keras fixtures in tests/data/keras3/ with real tf_keras (Keras 2) and Keras 3.

    /work/tfvenv/bin/python tests/tf_fixtures/generate_keras.py [--out tests/data/keras3] [--only NAME ...]

For each model NAME (functional, sequential, subclassed, mha, embedding) one directory
``<out>/NAME/`` gets:

``tf/ckpt``
    the tf_keras model (built, trained 3 steps with Adam on fixed data), written by
    ``model.save_weights(prefix)`` (TF format: ``layer_with_weights-K`` keys and the
    optimizer under ``optimizer/``).
``savedmodel/``
    (functional and sequential) the same model through tf_keras ``model.save(dir)``: its
    ``variables/`` and ``keras_metadata.pb`` (``saved_model.pb`` is left out: ckptool reads neither
    it nor the rest, and it is most of the size).
``tf_ckpt/ckpt-1``
    (functional only) the same state through ``tf.train.Checkpoint(model=, optimizer=)``
    (a ``model/`` prefix); ``tf_legacy/ckpt`` the same model trained with the legacy Adam
    (slots under ``.OPTIMIZER_SLOT/optimizer/m|v``).
``template.weights.h5`` / ``template.keras``
    the same architecture built in Keras 3, compiled with Adam and the optimizer built,
    untrained (``.keras`` not for the subclassed model, whose class is local to this script).
``truth.weights.h5``
    the template after ``set_weights`` with the tf_keras weights and the Adam state assigned (the
    hand migration): every dataset of a conversion must equal this file's.
``expected.npz``
    what the conversion must give: ``w{i}`` = the tf_keras model's ``get_weights()[i]``
    (the order Keras 3's ``get_weights()`` has too), ``iterations``, and ``opt{j}`` = the
    tf_keras optimizer's slot variables in order (m0, v0, m1, v1, ...; Keras 3's
    ``optimizer.variables[2:]``).

Plus ``<out>/misc/``: ``sharded.weights.json`` and its ``sharded_0000k.weights.h5`` files (Keras
3 ``save_weights(..., max_shard_size=)``) and ``bf16.weights.h5`` (a bfloat16 Dense).
Everything uses fixed seeds, so reruns differ only in the dates Keras records.
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "keras3"))
MODELS = ("functional", "sequential", "subclassed", "mha", "embedding")


def build(k, name):
    """The model NAME in the Keras module ``k`` (tf_keras or keras), with its input data."""
    import numpy as np
    L = k.layers
    rng = np.random.default_rng(7)
    if name == "functional":
        inp = k.Input((3, 4))
        x = L.Dense(8, activation="relu")(inp)
        x = L.BatchNormalization()(x)
        x = L.LSTM(5)(x)
        out = L.Dense(2)(x)
        model = k.Model(inp, out)
        x, y = rng.standard_normal((16, 3, 4)), rng.standard_normal((16, 2))
    elif name == "sequential":
        model = k.Sequential([k.Input((6, 6, 1)), L.Conv2D(3, 3, activation="relu"), L.Flatten(), L.Dense(2)])
        x, y = rng.standard_normal((16, 6, 6, 1)), rng.standard_normal((16, 2))
    elif name == "subclassed":
        model = subclassed(k)
        model(np.zeros((1, 4), np.float32))
        x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 2))
    elif name == "mha":
        inp = k.Input((5, 8))
        att = L.MultiHeadAttention(num_heads=2, key_dim=4)(inp, inp)
        out = L.Dense(1)(L.GlobalAveragePooling1D()(att))
        model = k.Model(inp, out)
        x, y = rng.standard_normal((16, 5, 8)), rng.standard_normal((16, 1))
    elif name == "embedding":
        inp = k.Input((6,), dtype="int32")
        x = L.Embedding(20, 4)(inp)
        out = L.Dense(1)(L.GlobalAveragePooling1D()(x))
        model = k.Model(inp, out)
        x, y = rng.integers(0, 20, (16, 6)).astype(np.int32), rng.standard_normal((16, 1))
    else:
        raise SystemExit(f"unknown model {name}")
    if x.dtype != np.int32:
        x = x.astype(np.float32)
    return model, x, y.astype(np.float32)


def subclassed(k):
    L = k.layers

    class Block(L.Layer):
        def __init__(self, units, **kw):
            super().__init__(**kw)
            self.inner = L.Dense(units, activation="relu")
            self.outer = L.Dense(units)

        def call(self, x):
            return x + self.outer(self.inner(x))

    class Net(k.Model):
        def __init__(self):
            super().__init__()
            self.stem = L.Dense(6)
            self.blocks = [Block(6), Block(6)]
            self.head = L.Dense(2)

        def call(self, x):
            x = self.stem(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return Net()


def make(name, out):
    import keras
    import numpy as np
    import tensorflow as tf
    import tf_keras

    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tf_keras.utils.set_random_seed(1)
    model, x, y = build(tf_keras, name)
    model.compile(optimizer=tf_keras.optimizers.Adam(0.01), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, steps_per_epoch=2, verbose=0)
    model.train_on_batch(x[:8], y[:8])
    model.save_weights(os.path.join(d, "tf", "ckpt"))
    if name in ("functional", "sequential"):
        sm = os.path.join(d, "savedmodel")
        model.save(sm, save_format="tf")
        for extra in ("saved_model.pb", "fingerprint.pb", "assets"):  # ckptool reads variables/ and keras_metadata.pb
            p = os.path.join(sm, extra)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    weights = model.get_weights()
    opt = model.optimizer
    expected = {f"w{i}": w for i, w in enumerate(weights)}
    expected["iterations"] = np.asarray(opt.iterations.numpy())
    for j, v in enumerate(opt.variables[1:]):
        expected[f"opt{j}"] = v.numpy()
    np.savez(os.path.join(d, "expected.npz"), **expected)
    if name == "functional":
        tf.train.Checkpoint(model=model, optimizer=opt).save(os.path.join(d, "tf_ckpt", "ckpt"))
        tf_keras.utils.set_random_seed(1)
        legacy, _, _ = build(tf_keras, name)
        legacy.compile(optimizer=tf_keras.optimizers.legacy.Adam(0.01), loss="mse")
        legacy.fit(x, y, batch_size=8, epochs=1, steps_per_epoch=2, verbose=0)
        legacy.save_weights(os.path.join(d, "tf_legacy", "ckpt"))
        lw = {f"w{i}": w for i, w in enumerate(legacy.get_weights())}
        lopt = legacy.optimizer
        lw["iterations"] = np.asarray(lopt.iterations.numpy())
        slots = [lopt.get_slot(v, s).numpy() for v in legacy.trainable_variables for s in ("m", "v")]
        lw.update({f"opt{j}": s for j, s in enumerate(slots)})
        np.savez(os.path.join(d, "expected_legacy.npz"), **lw)

    keras.utils.set_random_seed(2)
    new, _, _ = build(keras, name)
    new.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    new.optimizer.build(new.trainable_variables)
    new.save_weights(os.path.join(d, "template.weights.h5"))
    if name != "subclassed":
        new.save(os.path.join(d, "template.keras"))
    # the hand migration, done by Keras itself: the answer a conversion must give, byte for byte
    new.set_weights(weights)
    new.optimizer.variables[0].assign(opt.iterations.numpy())
    for dst, v in zip(new.optimizer.variables[2:], opt.variables[1:]):
        dst.assign(v.numpy())
    new.save_weights(os.path.join(d, "truth.weights.h5"))
    for p in ("tf", "tf_ckpt", "tf_legacy"):  # TF's state files record absolute paths: keep them relative
        state = os.path.join(d, p, "checkpoint")
        if os.path.exists(state):
            with open(state) as f:
                text = f.read()
            with open(state, "w") as f:
                f.write(text.replace(os.path.join(d, p) + "/", ""))
    print(f"{name}: {len(weights)} weights, {len(opt.variables)} optimizer variables")


def make_misc(out):
    import keras
    import numpy as np

    d = os.path.join(out, "misc")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    keras.utils.set_random_seed(3)
    model, _, _ = build(keras, "sequential")
    model.save_weights(os.path.join(d, "sharded.weights.json"), max_shard_size=0.0000004)
    L = keras.layers
    bf = keras.Sequential([keras.Input((3,)), L.Dense(4, dtype="bfloat16", name="half")])
    bf.save_weights(os.path.join(d, "bf16.weights.h5"))
    np.savez(os.path.join(d, "bf16_expected.npz"),
             kernel=np.asarray(bf.layers[0].kernel.numpy()).astype(np.float32),
             bias=np.asarray(bf.layers[0].bias.numpy()).astype(np.float32))
    print("misc:", sorted(os.listdir(d)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args(argv)
    names = a.only or list(MODELS) + ["misc"]
    for n in names:
        if n == "misc":
            make_misc(a.out)
        else:
            make(n, a.out)


if __name__ == "__main__":
    sys.exit(main())
