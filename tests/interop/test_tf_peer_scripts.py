"""Other users of TF's name-based readers, beyond transformers: five scripts in tests/interop/peer_scripts
making the calls of tensor2tensor's checkpoint averaging, OpenNMT-tf's ``onmt-average-checkpoints``,
TF-slim / ``init_from_checkpoint`` fine-tuning, a fairseq-style TF-to-PyTorch converter and an
OpenNMT-py-style converter (minimal scripts written here: their projects' code is not copied),
each run unchanged under real TensorFlow and under ``python -m ckptool.shim`` on checkpoints TF
writes in the test: the same output files, stdout and log lines."""

import os
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(HERE, "peer_scripts")
NOISE = ("ckptool.shim: 'import tensorflow'", "WARNING: All log messages", "I0000", "E0000", "W0000",
         "To enable the following")


def _run(shim, cwd, script, *args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [os.path.join(SCRIPTS, script), *map(str, args)]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return p.returncode, p.stdout, [line for line in p.stderr.splitlines() if not line.startswith(NOISE)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A TF1 Saver directory (three checkpoints, Adam slots, a bfloat16 and a float16 variable), a
    TF2 CheckpointManager directory (three checkpoints) and a vocabulary."""
    d = tmp_path_factory.mktemp("peers")
    g = tf.Graph()
    with g.as_default():
        v1 = tf.compat.v1
        rng = np.random.default_rng(0)
        made = [v1.get_variable("encoder/layer_0/kernel", initializer=rng.standard_normal((4, 3)).astype(np.float32)),
                v1.get_variable("encoder/layer_0/bias", initializer=np.zeros(3, np.float32)),
                v1.get_variable("decoder/embedding", initializer=rng.standard_normal((5, 2)).astype(np.float32)),
                v1.get_variable("decoder/proj/kernel", shape=(2, 5), dtype=tf.bfloat16, initializer=v1.ones_initializer()),
                v1.get_variable("decoder/scale", initializer=np.arange(3, dtype=np.float16)),
                v1.get_variable("decoder/tokens", initializer=np.array([b"a", b"b"]), trainable=False)]
        step = v1.train.get_or_create_global_step()
        slots = [v1.get_variable(f"{v.op.name}/Adam", shape=v.shape, initializer=v1.zeros_initializer())
                 for v in made[:2]]
        bump = [v.assign_add(v * 0 + 1) for v in made[:2]] + [step.assign_add(1)]
        saver = v1.train.Saver(max_to_keep=5)
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            for _ in range(3):
                s.run(bump)
                saver.save(s, str(d / "tf1" / "model.ckpt"), global_step=step)
        del slots
    dense = tf.keras.layers.Dense(3)
    dense.build((None, 4))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=dense), str(d / "tf2"), max_to_keep=5)
    for i in range(3):
        dense.kernel.assign_add(tf.ones_like(dense.kernel) * i)
        manager.save()
    (d / "vocab.txt").write_text("<s>\n</s>\nhello\n", encoding="utf-8")
    return d


def _npz_equal(a, b):
    with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
        assert sorted(x.files) == sorted(y.files) and x.files
        for k in x.files:
            assert x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes(), k


CASES = {
    "t2t": ("t2t_avg_checkpoints.py", ["--prefix", "{d}/tf1", "--num_last_checkpoints", "2", "--output", "{o}.npz"]),
    "opennmt_tf": ("opennmt_average.py", ["{d}/tf2", "{o}", "2"]),
    "slim": ("slim_init_from_checkpoint.py", ["{d}/tf1", "{o}.npz", "decoder/tokens"]),
    "fairseq": ("fairseq_style_convert.py", ["{d}/tf1/model.ckpt-3", "{o}.pt"]),
    "opennmt_py": ("opennmt_py_tf_convert.py", ["{d}/tf1", "{d}/vocab.txt", "{o}.npz"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_peer_script_runs_as_under_tf(runs, case, tmp_path):
    script, args = CASES[case]
    if case == "fairseq":
        pytest.importorskip("torch")  # the converter saves with torch (CI's tier 2 installs it)
    got = {}
    for shim in (False, True):
        out = tmp_path / ("shim" if shim else "tf")
        rc, stdout, log = _run(shim, tmp_path, script, *[a.format(d=runs, o=out) for a in args])
        got[shim] = rc, stdout.replace(str(out), "OUT"), [line.replace(str(out), "OUT") for line in log]
    assert got[False][0] == 0, got[False][2]
    assert got[True] == got[False]  # exit status, stdout, TF's log lines
    if case == "fairseq":
        import torch

        a, b = (torch.load(tmp_path / f"{n}.pt", weights_only=True) for n in ("tf", "shim"))
        assert list(a) == list(b) and all(a[k].numpy().tobytes() == b[k].numpy().tobytes() for k in a)
    elif case == "opennmt_tf":
        (a,) = (tmp_path / "tf").glob("*.npz")
        _npz_equal(a, tmp_path / "shim" / a.name)
    else:
        _npz_equal(tmp_path / "tf.npz", tmp_path / "shim.npz")
    if case == "t2t":
        assert any("is deprecated" in line for line in got[False][2])
