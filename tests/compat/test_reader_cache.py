"""The reader cache of ckptool.compat's load_variable/list_variables (compat/train.py): an index is
reused only while its file is the same one, by (device, inode, size, mtime), and, while that mtime
is within the racy window, by its bytes too. Each rule has a case only it catches (issue 49, item 5:
bench/mutate.py's mutants of either survive no longer)."""

import os
import time

import numpy as np

import ckptool
from ckptool.compat import train


def _write(prefix, value):
    ckptool.write(str(prefix), {"w": np.full(8, value, np.float32)}, sync=False)


def _files(d):
    return sorted(p for p in d.iterdir() if p.name.startswith("ckpt."))


def test_a_checkpoint_replaced_by_files_of_the_same_size_and_time_is_read_anew(tmp_path):
    """Renamed over the old names (new inodes), with the same sizes and mtimes, outside the racy
    window (so its bytes are not compared): only the inode tells the index is another one."""
    d, new = tmp_path / "run", tmp_path / "new"
    _write(d / "ckpt", 1.0)
    _write(new / "ckpt", 2.0)
    old_ns = 1_600_000_000 * 10**9  # long ago: no racy re-read
    for f in _files(d) + _files(new):
        os.utime(f, ns=(old_ns, old_ns))
    assert train.load_variable(str(d / "ckpt"), "w").tolist() == [1.0] * 8
    for f in _files(new):
        assert f.stat().st_size == (d / f.name).stat().st_size
        os.replace(f, d / f.name)
    assert [f.stat().st_mtime_ns for f in _files(d)] == [old_ns] * 2
    assert train.load_variable(str(d / "ckpt"), "w").tolist() == [2.0] * 8


def test_a_checkpoint_rewritten_in_place_within_the_racy_window_is_read_anew(tmp_path):
    """Rewritten in place (the same inodes and sizes) and given back its mtime, as a clock coarser
    than the writes leaves it: only the racy window's comparison of the bytes sees the change."""
    d, new = tmp_path / "run", tmp_path / "new"
    _write(d / "ckpt", 1.0)
    _write(new / "ckpt", 2.0)
    now_ns = time.time_ns()
    for f in _files(d):
        os.utime(f, ns=(now_ns, now_ns))
    assert train.load_variable(str(d / "ckpt"), "w").tolist() == [1.0] * 8
    inodes = [f.stat().st_ino for f in _files(d)]
    for f in _files(new):
        with open(d / f.name, "r+b") as out:
            out.write(f.read_bytes())
        os.utime(d / f.name, ns=(now_ns, now_ns))
    assert [f.stat().st_ino for f in _files(d)] == inodes and time.time_ns() - now_ns < train.RACY_SECONDS * 1e9
    assert train.load_variable(str(d / "ckpt"), "w").tolist() == [2.0] * 8
