#!/usr/bin/env python
"""tf_keras 2.21 whole-model ``.h5`` files for issue 52 (``ckptool convert model.h5 model.keras``).

    /root/v/tf/bin/python tests/tf_fixtures/generate_keras_h5.py [--out tests/data/keras_h5] [--only NAME ...]

The models of :mod:`generate_keras_whole` (built, compiled with Adam, one step trained), each
saved with ``model.save("model.h5")`` (HDF5: ``model_config``, ``training_config``,
``model_weights``, ``optimizer_weights``) beside ``io.npz``: the inputs (``x0``, ...) and what
tf_keras predicted for them (``y0``, ...).
"""

import argparse
import os
import shutil
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "keras_h5"))
#: committed models (the h5 format keeps no vocabulary, so no lookup layers)
MODELS = ("sequential", "shared", "nested", "recurrent", "masking", "attention", "convolutional")


def save(name, out_dir):
    """Save model ``name`` as ``out_dir/name/model.h5`` with ``io.npz``; returns the directory."""
    import numpy as np
    from generate_keras_whole import build

    model, xs = build(name)
    ys = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    ys = ys if isinstance(ys, list) else [ys]
    d = os.path.join(out_dir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model.save(os.path.join(d, "model.h5"))
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
        print(save(name, args.out))


if __name__ == "__main__":
    sys.exit(main())
