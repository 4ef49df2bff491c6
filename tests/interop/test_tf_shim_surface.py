"""ckptool.compat.tf beyond the readers, against TensorFlow 2.21: two probe scripts run under real TF
and under ``python -m ckptool.shim``, compared field by field and, for logging, line by line:

- surface_probe.py: DType for every enum value, as_dtype and == on numpy/ml_dtypes/Python types,
  tf.cast over a grid of values and dtypes, tf.version, every tf.errors class, tf.io.gfile and
  tf.compat.v1.gfile on a tree, TF's logger and deprecation notices (stderr compared);
- damage_probe.py: a TF-written bundle (a >1 MiB tensor, strings, a partitioned variable)
  truncated, bit-flipped and deleted at many offsets, then changed under one process between
  calls: replaced, deleted, restored, truncated and repaired (load_variable sees each state as
  TF does; a reader opened before keeps its shard, as TF's does).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _run(shim, cwd, *args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [str(a) for a in args]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _differences(a, b, where=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only in {'TF' if k in a else 'ckptool'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _differences(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: TF {json.dumps(a)[:300]} != ckptool {json.dumps(b)[:300]}"]


def _tf_lines(stderr):
    """The lines a script's own logging wrote (TF's C++ start-up chatter and the shim's one
    announcement left out)."""
    return [line for line in stderr.splitlines()
            if not line.startswith(("ckptool.shim: 'import tensorflow'", "WARNING: All log messages", "I0000", "E0000",
                                    "W0000", "To enable the following"))]


def test_dtypes_cast_errors_gfile_and_logging_are_tfs(tmp_path):
    real = _run(False, tmp_path, os.path.join(HERE, "surface_probe.py"), tmp_path / "tf.json", tmp_path / "w1")
    shim = _run(True, tmp_path, os.path.join(HERE, "surface_probe.py"), tmp_path / "shim.json", tmp_path / "w2")
    theirs, ours = (json.loads((tmp_path / n).read_text()) for n in ("tf.json", "shim.json"))
    diff = _differences(theirs, ours)
    assert not diff, f"{len(diff)} differences:\n" + "\n".join(diff[:60])
    assert _tf_lines(shim.stderr) == _tf_lines(real.stderr)
    # the probe saw what it claims to
    assert theirs["dtypes"]["1"]["name"] == {"ok": "'float32'"} and theirs["version"][0] == "2.21.0"
    assert len(theirs["cast"]) > 150 and "UnimplementedError" in json.dumps(theirs["cast"])
    assert any(line.startswith("WARNING:tensorflow:From ") for line in _tf_lines(real.stderr))
    assert "INFO:tensorflow:info after set_verbosity 3" in _tf_lines(real.stderr)


def _write_fixture(prefix):
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        v1 = tf.compat.v1
        v1.get_variable("big", initializer=np.arange(300_000, dtype=np.float32), use_resource=False)  # > 1 MiB
        v1.get_variable("small", initializer=np.arange(10, dtype=np.float32), use_resource=False)
        v1.get_variable("strs", initializer=np.array([b"hello", b"world!!", b""]), use_resource=False)
        v1.get_variable("s0", initializer=np.array(b"scalar-string"), use_resource=False)
        v1.get_variable("part", shape=[10, 4], initializer=v1.random_normal_initializer(seed=1),
                        partitioner=v1.fixed_size_partitioner(3), use_resource=False)
        v1.get_variable("zz", initializer=np.arange(6, dtype=np.int64), use_resource=False)
        v1.get_variable("h", initializer=np.arange(3, dtype=np.float16), use_resource=False)
        saver = v1.train.Saver()
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            return saver.save(s, prefix)


def test_damaged_and_changing_data_files_fail_as_in_tf(tmp_path):
    prefix = _write_fixture(str(tmp_path / "ckpt" / "m"))
    _run(False, tmp_path, os.path.join(HERE, "damage_probe.py"), tmp_path / "tf.json", prefix, tmp_path / "w1")
    _run(True, tmp_path, os.path.join(HERE, "damage_probe.py"), tmp_path / "shim.json", prefix, tmp_path / "w2")
    theirs, ours = (json.loads((tmp_path / n).read_text()) for n in ("tf.json", "shim.json"))
    diff = _differences(theirs, ours)
    assert not diff, f"{len(diff)} differences:\n" + "\n".join(diff[:60])
    seen = json.dumps(theirs)
    for what in ("Read less bytes than requested", "No such file or directory", "Checksum does not match",
                 "The length checksum does not match"):
        assert what in seen, what
    live = dict(theirs["live"])
    names = list(live["fresh"])
    assert any(live["replaced"][n][0] != live["fresh"][n][0] for n in names)  # a new call sees the new shard
    assert all(live["replaced"][n][1] == live["fresh"][n][1] for n in names)  # a reader held keeps its old one
    assert all(live["deleted"][n][0]["raised"] == "OpError" for n in names)
    assert all(live["repaired_in_place"][n][0] == live["fresh"][n][0] for n in names)


V1_DAMAGE = """\
import os, shutil, sys
import tensorflow as tf
src, work = sys.argv[1], sys.argv[2]
for cut in (0, 20, 47, 48, 100, 300, -10, -50):
    d = os.path.join(work, f"c{cut}")
    shutil.copytree(os.path.dirname(src), d)
    p = os.path.join(d, os.path.basename(src))
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[:cut] if cut >= 0 else raw[:len(raw) + cut])
    for f in (lambda: tf.train.list_variables(p), lambda: tf.train.load_variable(p, "f32")):
        try:
            print(cut, "ok", repr(f())[:60])
        except Exception as e:
            print(cut, type(e).__name__, str(e).replace(work, "<W>"))
"""


def test_damaged_v1_tables_fail_as_in_tf(tmp_path):
    script = tmp_path / "v1_damage.py"
    script.write_text(V1_DAMAGE)
    src = os.path.join(REPO, "tests", "data", "v1", "single", "v1ckpt")
    outs = [_run(shim, tmp_path, script, src, tmp_path / ("s" if shim else "t")).stdout for shim in (False, True)]
    assert outs[1] == outs[0] and "too short to be an sstable" in outs[0] and "bad magic number" in outs[0]
