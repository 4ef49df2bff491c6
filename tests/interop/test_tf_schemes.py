"""Issue 53: the shim on a scheme TF has no file system for answers as TF 2.21 does
(UnimplementedError, isdir False, latest_checkpoint None, the reader's ValueError, TF's warnings)
and opens no network connection: schemes_probe.py run under TF and under the shim, compared."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def _run(which):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, os.path.join(HERE, "schemes_probe.py"), which], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.splitlines(), [ln for ln in p.stderr.splitlines() if ln.startswith("WARNING:tensorflow:")]


def test_other_schemes_answer_as_tf_does_and_open_no_connection():
    tf_out, tf_warn = _run("tf")
    shim_out, shim_warn = _run("shim")
    assert shim_out == tf_out
    assert shim_warn == tf_warn
    assert tf_out[-1] == "network: []"
    text = "\n".join(tf_out)  # the probe saw what it claims to
    assert "http://example.com/dir exists !! UnimplementedError | File system scheme 'http' not implemented" in text
    assert "hdfs://nn/dir isdir -> False" in text and "ftp://host/dir latest -> None" in text
    assert "foo://bucket/dir list_variables !! ValueError | Unsuccessful TensorSliceReader constructor" in text
