"""The README's "Migrating to Keras 3" runs as written with real Keras 3 and tf_keras (issue 40):
its python blocks and its ckptool lines, in order, in a directory where tf_keras saved old/ckpt
(the same model, trained two steps). Keras 3 must load the weights and the optimizer state
without skipping anything, and tf_keras must load the way back."""

import os
import pathlib
import re
import shlex
import warnings

import numpy as np
import pytest

pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
tf_keras = pytest.importorskip("tf_keras")

from clirun import completed  # noqa: E402

pytestmark = pytest.mark.interop
README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def _blocks():
    section = README.read_text().split("\n## Migrating to Keras 3\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(python|sh)\n(.*?)```", section, re.S)


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype.name, a.shape, a.tobytes()


def test_the_migration_section_runs_as_written(tmp_path, monkeypatch):
    blocks = _blocks()
    first = next(body for lang, body in blocks if lang == "python")
    layers_line = next(line for line in first.splitlines() if "keras.Sequential(" in line)
    tf_keras.utils.set_random_seed(1)
    old = eval(layers_line.split("=", 1)[1].strip(), {"keras": tf_keras})  # noqa: S307 - the README's model
    old.compile(optimizer="adam", loss="mse")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 4)).astype("f4"), rng.standard_normal((8, 2)).astype("f4")
    for _ in range(2):
        old.train_on_batch(x, y)
    monkeypatch.chdir(tmp_path)
    old.save_weights("old/ckpt")
    namespace: dict = {"__name__": "__main__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, (lang, body) in enumerate(blocks):
            if lang == "python":
                exec(compile(body, f"README.md migration block {i + 1}", "exec"), namespace)
                continue
            for line in body.splitlines():
                argv = shlex.split(line, comments=True)
                if argv:
                    assert argv[0] == "ckptool", line
                    r = completed(*argv[1:])
                    assert r.returncode == 0, (line, r.stderr)
                    assert "model.optimizer.build" in r.stderr or "load_model" in r.stderr or "back" in line, r.stderr
    skipped = [str(w.message) for w in caught if "Skipping" in str(w.message) or "mismatch" in str(w.message)]
    assert not skipped, skipped
    model = namespace["model"]
    for a, b in zip(model.get_weights(), old.get_weights()):
        assert _bits(a) == _bits(b)
    opt, tf_opt = model.optimizer, old.optimizer
    assert int(opt.iterations.numpy()) == int(tf_opt.iterations.numpy()) == 2
    for a, b in zip(opt.variables[2:], tf_opt.variables[1:]):
        assert _bits(a.numpy()) == _bits(b.numpy())
    assert len(opt.variables) - 2 == len(tf_opt.variables) - 1 == 8
    # the way back: tf_keras loads what the README's second line wrote, equal to the Keras 3 model
    again = tf_keras.models.clone_model(old)
    again.compile(optimizer="adam", loss="mse")
    again.load_weights(os.path.join(tmp_path, "back", "ckpt")).assert_existing_objects_matched()
    for a, b in zip(again.get_weights(), old.get_weights()):
        assert _bits(a) == _bits(b)
