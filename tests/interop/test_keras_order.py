"""Keras 3's own order (issue 50), with Keras writing the files here (tests/tf_fixtures/
generate_keras_order.py, Keras 3 on the TF backend, ``Adam(use_ema=True)``, a few ``train_on_batch``
steps) and Keras as the judge: ``convert --ema`` of a model whose nested block holds 12 Dense layers,
and of one whose block interleaves 11 Dense and 11 LayerNormalization, writes every weight with the
value Keras's own ``finalize_variable_values`` gives it, from the ``.keras`` file and from the
``.weights.h5`` with ``--template-config`` (and under Nadam, which keeps its product after the
slots); a model without ``use_ema`` has no averages to show."""

import gzip
import json
import os
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytest.importorskip("h5py")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "tf_fixtures"))
import generate_keras_order as gen  # noqa: E402

from clirun import completed  # noqa: E402

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("order"))
    for name in gen.NAMES:
        gen.make(keras, name, out)
        for suffix in (".keras", ".weights.h5", ".json"):
            with gzip.open(os.path.join(out, name + suffix + ".gz"), "rb") as f, \
                    open(os.path.join(out, name + suffix), "wb") as g:
                shutil.copyfileobj(f, g)
    return out


@pytest.mark.parametrize("name", ["nested12", "mixed22", "nadam"])
def test_every_weight_takes_its_own_layers_average(written, tmp_path, name):
    with np.load(os.path.join(written, f"{name}.truth.npz")) as t:
        truth = {n: t[n] for n in t.files}
    assert len(truth) == {"nested12": 26, "mixed22": 46, "nadam": 8}[name]
    for src, extra in ((f"{name}.keras", []), (f"{name}.weights.h5", ["--template-config",
                                                                     os.path.join(written, f"{name}.json")])):
        dst = tmp_path / (src + ".npz")
        r = completed("convert", os.path.join(written, src), dst, "--ema", *extra)
        assert r.returncode == 0, r.stderr
        with np.load(dst) as got:
            bad = [n for n in truth if not np.array_equal(got[n], truth[n])]
        assert not bad, (src, bad)


def test_a_model_without_use_ema_shows_no_averages(written):
    r = completed("inspect", os.path.join(written, "plain.weights.h5"), "--json")
    assert r.returncode == 0 and "ema" not in json.loads(r.stdout), r.stderr
    r = completed("convert", os.path.join(written, "plain.keras"), os.path.join(written, "p.npz"), "--ema")
    assert r.returncode == 1 and "no moving averages" in r.stderr
