#!/usr/bin/env python
"""Write the Keras 3 layer-order fixtures of issue 50 in tests/data/keras3/order/ with real Keras 3
(TF backend), each model trained by ``train_on_batch`` with ``Adam(use_ema=True)`` so that a weight
and its average differ (``fit`` would finalize them):

    /root/v/tf/bin/python tests/tf_fixtures/generate_keras_order.py [--out tests/data/keras3/order] [--only NAME ...]

``nested12``
    a Functional model whose nested Sequential block holds 12 ``Dense(3)`` layers (one shape, so only
    the order tells them apart: Keras names them ``dense`` .. ``dense_11`` in the block's ``layers``
    list, ``dense_10`` sorting before ``dense_2`` as text), then a ``Dense(2)`` head.
``mixed22``
    a Functional model whose nested Sequential block holds 11 ``Dense(3)`` and 11
    ``LayerNormalization`` interleaved (Keras counts each class on its own: ``dense_3`` and
    ``layer_normalization_3``; only the config says how the two chains interleave).
``nadam``
    a block of 3 ``Dense(3)`` under ``Nadam(use_ema=True)``, which keeps its running product after the
    slots (``optimizer/vars``: iterations, learning rate, averages, slots, product).
``plain``
    the ``nested12`` model compiled with a plain ``Adam`` (no ``use_ema``), one step.

For each NAME: ``NAME.keras.gz`` (``model.save``), ``NAME.weights.h5.gz`` (``model.save_weights``) and
``NAME.json.gz`` (``model.to_json()``); for the ``use_ema`` ones ``NAME.truth.npz``: every model dataset
after Keras's own ``finalize_variable_values`` (each trainable variable holding its average, as
``fit`` leaves it), by its dataset name in the file: what ``convert --ema`` must write. The ``.keras``
``.weights.h5`` and ``.json`` files are gzipped (HDF5's per-group overhead; tests unzip them into tmp).
"""

import argparse
import gzip
import os
import shutil
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "keras3", "order"))
NAMES = ("nested12", "mixed22", "nadam", "plain")


def model(keras, name, ema=True):
    keras.utils.set_random_seed(7)
    if name == "mixed22":
        block = []
        for _ in range(11):
            block += [keras.layers.Dense(3, activation="tanh"), keras.layers.LayerNormalization()]
    else:
        block = [keras.layers.Dense(3, activation="tanh") for _ in range(3 if name == "nadam" else 12)]
    x = keras.Input((3,))
    h = keras.Sequential(block, name="block")(x)
    m = keras.Model(x, keras.layers.Dense(2, name="head")(h))
    opt = keras.optimizers.Nadam if name == "nadam" else keras.optimizers.Adam
    m.compile(optimizer=opt(0.05, use_ema=ema, ema_momentum=0.5), loss="mse")
    return m


def _gzip(path):
    with open(path, "rb") as f, gzip.GzipFile(path + ".gz", "wb", mtime=0) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def make(keras, name, out):
    import h5py
    import numpy as np

    ema = name != "plain"
    m = model(keras, "nested12" if name == "plain" else name, ema)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(16, 3)).astype("float32")
    y = rng.normal(size=(16, 2)).astype("float32")
    for _ in range(1 if name == "plain" else 4):
        m.train_on_batch(x, y)
    m.save(os.path.join(out, f"{name}.keras"))
    m.save_weights(os.path.join(out, f"{name}.weights.h5"))
    with open(os.path.join(out, f"{name}.json"), "w") as f:
        f.write(m.to_json())
    if ema:
        m.optimizer.finalize_variable_values(m.trainable_variables)
        truth = os.path.join(out, "truth.weights.h5")
        m.save_weights(truth)
        found = {}
        with h5py.File(truth, "r") as h5:
            h5.visititems(lambda n, o: found.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset)
                          and n.startswith("layers/") else None)
        os.remove(truth)
        np.savez_compressed(os.path.join(out, f"{name}.truth.npz"), **found)
    for p in (f"{name}.keras", f"{name}.weights.h5", f"{name}.json"):
        _gzip(os.path.join(out, p))
    print(f"{name}: {len(m.trainable_variables)} trainable variables")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", choices=NAMES, help="write these only, the others left as they are")
    a = ap.parse_args(argv)
    import keras

    if not a.only:
        shutil.rmtree(a.out, ignore_errors=True)
    os.makedirs(a.out, exist_ok=True)
    for name in a.only or NAMES:
        make(keras, name, a.out)


if __name__ == "__main__":
    sys.exit(main())
