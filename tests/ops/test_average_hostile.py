"""average, hostile: never its own input, exact for identical inputs, finite for finite ones."""

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import RefusedError
from ckptool.ops.transform.average import average
from clirun import completed


def _two(tmp_path):
    a, b = str(tmp_path / "run" / "ckpt-1"), str(tmp_path / "run" / "ckpt-2")
    ckptool.write(a, {"w": np.full(4, 1.0, np.float32)}, sync=False)
    ckptool.write(b, {"w": np.full(4, 3.0, np.float32)}, sync=False)
    return a, b


def _files(d):
    return {os.path.join(r, f): open(os.path.join(r, f), "rb").read() for r, _, fs in os.walk(d) for f in fs}


def _read_w(prefix):
    with ckptool.open(prefix) as ck:
        return ck.read("w").tolist()


@pytest.mark.parametrize("how", ["same", "index", "data", "dir", "symlink_dir", "hardlink"])
def test_average_refuses_its_own_input_even_with_force(tmp_path, how):
    a, b = _two(tmp_path)
    out, inputs = b, [a, b]
    if how == "index":
        inputs = [a, b + ".index"]
    elif how == "data":
        inputs = [a, b + ".data-00000-of-00001"]
    elif how == "dir":  # the directory's latest is b (no state file: the newest by step)
        inputs = [a, str(tmp_path / "run")]
    elif how == "symlink_dir":
        os.symlink(tmp_path / "run", tmp_path / "link")
        out = str(tmp_path / "link" / "ckpt-2")
    elif how == "hardlink":  # a prefix whose .index is b's .index by a hard link
        os.link(b + ".index", str(tmp_path / "other.index"))
        out = str(tmp_path / "other")
    before = _files(tmp_path / "run")
    if how == "dir":
        inputs = [a, b]
        r = completed("average", str(tmp_path / "run"), "--last", "2", "-o", out, "--force")
    else:
        r = completed("average", *inputs, "-o", out, "--force")
    assert r.returncode == 1, r
    assert r.stderr.startswith("ckptool: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert "source itself" in r.stderr
    assert _files(tmp_path / "run") == before
    with pytest.raises(RefusedError):
        average(inputs, out, force=True, dry_run=True)


def test_average_to_an_unrelated_existing_checkpoint_with_force_still_works(tmp_path):
    a, b = _two(tmp_path)
    out = str(tmp_path / "avg")
    ckptool.write(out, {"w": np.zeros(4, np.float32)}, sync=False)
    assert completed("average", a, b, "-o", out).returncode == 1
    assert completed("average", a, b, "-o", out, "--force").returncode == 0
    assert _read_w(out) == [2.0] * 4
