#!/usr/bin/env python
"""Write the Keras fixtures of issue 37 in tests/data/keras3/ with real tf_keras and Keras 3.

    /work/tfvenv/bin/python tests/tf_fixtures/generate_keras_more.py [--out tests/data/keras3] [--only NAME ...]

``stack/``
    200 Dense(8) layers created in another order than the model uses them (as after deleting and
    re-adding layers): ``tf/ckpt`` (tf_keras ``save_weights``, one Adam step) and, gzipped (HDF5's
    per-group overhead makes them ~0.6 MB), the Keras 3 template ``template.weights.h5.gz``
    (compiled, optimizer unbuilt: the README's flow) and ``template.json.gz`` (``model.to_json()``).
    In this file the object-header addresses of ``layers/dense_178`` come before ``layers/dense_90``:
    an order taken from addresses puts 89 layers in the wrong places.
``normalization/``, ``mixed/``
    the layout of generate_keras.py (``tf/ckpt``, ``template.weights.h5``, ``template.keras``,
    ``truth.weights.h5``: the hand migration done by Keras) for a model with an adapted
    ``Normalization`` layer (its object graph names ``mean``/``adapt_mean`` one node) and for the
    functional model under ``mixed_float16`` (a ``LossScaleOptimizer``: its loss scale goes to
    ``optimizer/vars/2,3``, the inner Adam to ``optimizer/inner_optimizer/vars``); ``mixed/`` also
    gets ``unbuilt.weights.h5``, the template saved before its optimizer was built.
``ema/``
    the functional model trained with ``Adam(use_ema=True)`` by ``train_on_batch`` (so its weights
    are not its averages: ``fit`` would finalize them): ``tf/ckpt`` (tf_keras; ``savedmodel/`` the same
    model through ``model.save``, its ``variables/`` and ``keras_metadata.pb``), ``template.keras``
    (Keras 3, untrained), ``truth.weights.h5`` (Keras 3 holding the tf_keras model's averages as
    weights: what ``--ema`` must write), ``k3.keras``, ``k3.weights.h5`` and ``k3.json`` (a Keras 3
    model trained the same way, its config) and ``back/ckpt`` (tf_keras holding the Keras 3
    averages as weights: the way back).
"""

import argparse
import gzip
import os
import shutil
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "keras3"))
NAMES = ("stack", "normalization", "mixed", "ema")


def _relative_state(d):
    state = os.path.join(d, "tf", "checkpoint")
    with open(state) as f:
        text = f.read()
    with open(state, "w") as f:
        f.write(text.replace(os.path.join(d, "tf") + "/", ""))


def _gzip(path):
    with open(path, "rb") as f, gzip.GzipFile(path + ".gz", "wb", mtime=0) as g:
        shutil.copyfileobj(f, g)
    os.remove(path)


def make(name, out):
    import generate_keras_real as real
    import keras
    import tf_keras

    d = os.path.join(out, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if name == "ema":
        return make_ema(d)
    spec = real.specs()["dense200" if name == "stack" else name]
    old = real.built(tf_keras, spec, 1, train=1)
    old.save_weights(os.path.join(d, "tf", "ckpt"))
    _relative_state(d)
    new = real.built(keras, spec, 2, train=0, build_optimizer=False)
    if name == "stack":
        new.save_weights(os.path.join(d, "template.weights.h5"))
        with open(os.path.join(d, "template.json"), "w") as f:
            f.write(new.to_json())
        for p in ("template.weights.h5", "template.json"):
            _gzip(os.path.join(d, p))
        print(f"{name}: {len(old.layers) - 1} layers")
        return
    with real.policy(spec):
        if name == "mixed":
            new.save_weights(os.path.join(d, "unbuilt.weights.h5"))
        new.optimizer.build(new.trainable_variables)
        new.save_weights(os.path.join(d, "template.weights.h5"))
        new.save(os.path.join(d, "template.keras"))
        # the hand migration, done by Keras itself: what a conversion must give, byte for byte
        new.set_weights(old.get_weights())
        o2, o3 = old.optimizer, new.optimizer
        inner2 = getattr(o2, "inner_optimizer", o2)
        inner3 = getattr(o3, "inner_optimizer", o3)
        inner3.iterations.assign(inner2.iterations.numpy())
        for dst, v in zip(inner3.variables[2:], inner2.variables[1:]):
            dst.assign(v.numpy())
        if name == "mixed":
            o3.step_counter.assign(o2.dynamic_counter.numpy())
            o3.dynamic_scale.assign(o2.loss_scale.numpy())
        new.save_weights(os.path.join(d, "truth.weights.h5"))
    print(f"{name}: {len(old.get_weights())} weights, {len(o2.variables)} optimizer variables")


def make_ema(d):
    import generate_keras_real as real
    import keras
    import tf_keras

    spec = real.specs()["opt_ema"]
    old = real.built(tf_keras, spec, 1, train=2)
    old.save_weights(os.path.join(d, "tf", "ckpt"))
    _relative_state(d)
    sm = os.path.join(d, "savedmodel")
    old.save(sm, save_format="tf")
    for extra in ("saved_model.pb", "fingerprint.pb", "assets"):  # ckptool reads variables/ and keras_metadata.pb
        p = os.path.join(sm, extra)
        if os.path.isdir(p):
            shutil.rmtree(p)
        elif os.path.exists(p):
            os.remove(p)
    real.built(keras, spec, 2, train=0, build_optimizer=False).save(os.path.join(d, "template.keras"))
    truth = real.built(keras, spec, 3, train=0)
    truth.set_weights(real._averaged(old).get_weights())
    truth.save_weights(os.path.join(d, "truth.weights.h5"))
    new = real.built(keras, spec, 4, train=3)
    new.save(os.path.join(d, "k3.keras"))
    new.save_weights(os.path.join(d, "k3.weights.h5"))
    with open(os.path.join(d, "k3.json"), "w") as f:
        f.write(new.to_json())
    back = real.built(tf_keras, spec, 5, train=0)
    back.set_weights(real._averaged(new).get_weights())
    back.save_weights(os.path.join(d, "back", "ckpt"))
    state = os.path.join(d, "back", "checkpoint")
    with open(state) as f:
        text = f.read()
    with open(state, "w") as f:
        f.write(text.replace(os.path.join(d, "back") + "/", ""))
    print(f"ema: {len(old.trainable_variables)} averages")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args(argv)
    for n in a.only or NAMES:
        make(n, a.out)


if __name__ == "__main__":
    sys.exit(main())
