"""Ctrl-C leaves no empty output directory behind (issue 32): a directory ckptool created for an
output goes again when the write is aborted and it is still empty; any other directory stays."""

import os

import numpy as np
import pytest

import ckptool
from ckptool.io.safety import atomic
from clirun import run as run_cli


@pytest.fixture
def src(tmp_path):
    p = str(tmp_path / "in" / "ckpt-1")
    ckptool.write(p, {"w": np.arange(4000, dtype=np.float32), "opt/w/Adam": np.zeros(4000, np.float32),
                      "step": np.int64(1)}, sync=False)
    ckptool.write(str(tmp_path / "in" / "ckpt-2"), {"w": np.ones(4000, np.float32),
                                                    "opt/w/Adam": np.zeros(4000, np.float32),
                                                    "step": np.int64(2)}, sync=False)
    return p


@pytest.fixture
def interrupt(monkeypatch):
    """Ctrl-C at the first write to any output file (data or index), its temporary created."""
    def boom(self, *data):
        raise KeyboardInterrupt
    monkeypatch.setattr(atomic.AtomicFile, "write", boom)
    monkeypatch.setattr(atomic.AtomicFile, "writer", boom)  # .npz: zipfile writes to the file itself


def _tree(root):
    return sorted(os.path.relpath(os.path.join(r, n), root) for r, ds, fs in os.walk(root) for n in ds + fs)


@pytest.mark.parametrize("argv", [
    ("convert", "{src}", "{out}/a/b/ckpt-1"),
    ("convert", "{src}", "{out}/a/b/model.npz"),
    ("convert", "{src}", "{out}/a/b/model.safetensors"),
    ("save", "{out}/a/b/ckpt", "--from", "{src}"),
    ("rewrite-names", "{src}", "{out}/a/b/ckpt-1", "--rule", "w=v"),  # linked data files, index written
    ("rewrite-names", "{src}", "{out}/a/b/ckpt-1", "--strip-optimizer"),  # compacted
    ("average", "{ins}/ckpt-1", "{ins}/ckpt-2", "-o", "{out}/a/b/avg"),
])
def test_an_interrupted_write_removes_the_directories_it_made(capsys, tmp_path, src, interrupt, argv):
    out = tmp_path / "out"
    out.mkdir()
    before = _tree(tmp_path)
    args = [a.format(src=src, out=out, ins=tmp_path / "in") for a in argv]
    rc, _, err = run_cli(capsys, *args)
    assert rc == 130, err
    assert _tree(tmp_path) == before  # out/a/b and out/a are gone; out (not ours) stays


def test_a_directory_that_was_there_stays_even_empty(capsys, tmp_path, src, interrupt):
    (tmp_path / "out" / "a").mkdir(parents=True)
    rc, _, _ = run_cli(capsys, "convert", src, tmp_path / "out" / "a" / "b" / "ckpt-1")
    assert rc == 130
    assert _tree(tmp_path / "out") == ["a"]


def test_a_directory_holding_something_else_stays(tmp_path, src, monkeypatch):
    """Two writes into one new directory: the aborted one does not take the other's file with it."""
    from ckptool.ops.transform.convert.run import convert

    convert(src, str(tmp_path / "new" / "first.npz"), sync=False)
    monkeypatch.setattr(atomic.AtomicFile, "write", lambda self, data: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        convert(src, str(tmp_path / "new" / "deeper" / "second.safetensors"), sync=False)
    assert _tree(tmp_path / "new") == ["first.npz"]


def test_a_finished_write_keeps_its_directories(tmp_path, src):
    from ckptool.ops.transform.convert.run import convert

    convert(src, str(tmp_path / "x" / "y" / "m.safetensors"), sync=False)
    assert _tree(tmp_path / "x") == ["y", "y/m.safetensors"]
    assert not any(str(tmp_path) in d for d in atomic._MADE_DIRS)


def test_an_interrupted_keras_bridge_removes_the_directories_it_made(capsys, tmp_path, interrupt):
    # the Keras 3 writer makes its output directory through the same make_output_dir
    data = os.path.join(os.path.dirname(__file__), "..", "data", "keras3", "sequential")
    (tmp_path / "out").mkdir()
    before = _tree(tmp_path)
    rc, _, err = run_cli(capsys, "convert", os.path.join(data, "tf", "ckpt"), tmp_path / "out" / "a" / "b" / "new.keras",
                         "--template", os.path.join(data, "template.keras"))
    assert rc == 130, err
    assert _tree(tmp_path) == before
