"""Names past a writer's format limits (issue 39, item 5): refused before anything is written,
in one line naming the tensor (shortened), never a struct.error traceback from zipfile."""

from __future__ import annotations

import numpy as np
import pytest

import ckptool
from ckptool.format import safetensors_meta
from clirun import run as run_cli

LONG = "scope/" + "x" * 70_000 + "/kernel"  # over a zip member name's 65,535 bytes; TF reads it


@pytest.fixture
def long_named(tmp_path):
    prefix = tmp_path / "ckpt-1"
    ckptool.write(str(prefix), {LONG: np.arange(3, dtype=np.float32), "short": np.ones(2)})
    with ckptool.open(str(prefix)) as ck:
        assert ck.read(LONG).tolist() == [0, 1, 2]  # a checkpoint may hold it
    return prefix


@pytest.mark.parametrize("how", [("out.npz",), ("out.bin", "--to", "npz")])
def test_npz_refuses_a_name_over_65535_bytes(capsys, tmp_path, long_named, how):
    code, out, err = run_cli(capsys, "convert", long_named, tmp_path / how[0], *how[1:])
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("ckptool: error: ")
    assert "'scope/xxxxx" in err and "/kernel'" in err and "..." in err  # the tensor, shortened
    assert "70,013 bytes" in err and "65,531" in err
    assert len(err) < 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]


def test_npz_takes_a_name_of_exactly_the_limit(tmp_path):
    name = "y" * (65_535 - 4)
    ckptool.write(str(tmp_path / "c"), {name: np.arange(2, dtype=np.int32)})
    ckptool.convert(str(tmp_path / "c"), str(tmp_path / "ok.npz"))
    with np.load(tmp_path / "ok.npz") as z:
        assert z[name].tolist() == [0, 1]


def test_other_writers_hold_the_long_name(capsys, tmp_path, long_named):
    for dst in ("out.safetensors", "tf/ckpt-2"):
        code, _, err = run_cli(capsys, "convert", long_named, tmp_path / dst)
        assert code == 0, err
    with ckptool.open(str(tmp_path / "tf" / "ckpt-2")) as ck:
        assert ck.read(LONG).tolist() == [0, 1, 2]


def test_safetensors_header_over_the_loader_limit_is_refused(capsys, tmp_path, long_named, monkeypatch):
    monkeypatch.setattr(safetensors_meta, "MAX_HEADER", 50_000)  # safetensors' is 100,000,000
    code, out, err = run_cli(capsys, "convert", long_named, tmp_path / "big.safetensors")
    assert code == 1 and err.count("\n") == 1
    assert "big.safetensors: the .safetensors header would be" in err and "over safetensors' limit" in err
    assert not (tmp_path / "big.safetensors").exists()
    assert not [p for p in tmp_path.iterdir() if "tempstate" in p.name or p.name.startswith("big")]
