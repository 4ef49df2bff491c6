"""rewrite-names: dropping variables compacts by default; --link links anyway, and says what that costs
(issue 32: a stripped checkpoint used to save no disk)."""

import json
import os
import pathlib

import numpy as np
import pytest

import ckptool
from ckptool.errors import UsageError
from ckptool.ops.transform.rename.rewrite import rewrite_names
from ckptool.ops.transform.rename.rules import parse_rule
from clirun import run as run_cli

DATA = pathlib.Path(__file__).parents[1] / "data"


@pytest.fixture
def run(capsys):
    def go(*argv, code=0):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == code, (rc, out, err)
        return out, err
    return go


@pytest.fixture
def tf1(tmp_path):
    p = str(tmp_path / "src" / "model.ckpt-5")
    ckptool.write(p, {"dense/kernel": np.arange(120, dtype=np.float32).reshape(40, 3),
                      "dense/kernel/Adam": np.zeros((40, 3), np.float32),
                      "dense/kernel/Adam_1": np.ones((40, 3), np.float32),
                      "beta1_power": np.float32(0.9), "global_step": np.int64(5)}, sync=False)
    return p


def _data(prefix) -> str:
    return str(prefix) + ".data-00000-of-00001"


def test_strip_optimizer_writes_a_smaller_checkpoint(run, tf1, tmp_path):
    dst = tmp_path / "small" / "model.ckpt-5"
    out, err = run("rewrite-names", tf1, dst, "--strip-optimizer", "--json")
    plan = json.loads(out)
    assert not plan["fast_path"] and len(plan["dropped"]) == 3
    assert os.stat(_data(dst)).st_nlink == 1
    assert os.path.getsize(_data(dst)) == 120 * 4 + 8 < os.path.getsize(_data(tf1))
    with ckptool.open(tf1) as a, ckptool.open(str(dst)) as b:
        assert b.names() == ["dense/kernel", "global_step"]
        assert b.read("dense/kernel").tobytes() == a.read("dense/kernel").tobytes()
        assert all(e is None for _, e in b.verify())


def test_drop_compacts_too_and_a_pure_rename_still_links(run, tf1, tmp_path):
    run("rewrite-names", tf1, tmp_path / "d", "--drop", "*/Adam*")
    assert os.stat(_data(tmp_path / "d")).st_nlink == 1
    _, err = run("rewrite-names", tf1, tmp_path / "r", "--rule", "dense/=model/dense/")
    assert os.path.samefile(_data(tmp_path / "r"), _data(tf1))
    assert "data files linked, index rebuilt" in err


def test_link_links_anyway_and_warns_that_nothing_is_saved(run, tf1, tmp_path):
    dst = tmp_path / "l"
    _, err = run("rewrite-names", tf1, dst, "--strip-optimizer", "--link")
    assert os.path.samefile(_data(dst), _data(tf1))
    assert "ckptool: warning: --link: the bytes of the 3 dropped variables stay" in err
    with ckptool.open(str(dst)) as ck:
        assert ck.names() == ["dense/kernel", "global_step"]


def test_link_refused_where_it_cannot_apply(run, tf1, tmp_path):
    _, err = run("rewrite-names", tf1, tmp_path / "x", "--drop", "beta*", "--link", "--compact", code=2)
    assert "--compact and --link exclude each other" in err
    v1 = DATA / "v1" / "single" / "v1ckpt"
    _, err = run("rewrite-names", v1, tmp_path / "y", "--rule", "a=b", "--allow-unused", "--link", code=2)
    assert "not a V2 bundle" in err
    with pytest.raises(UsageError, match="--template"):
        rewrite_names(tf1, str(tmp_path / "z"), [parse_rule("a=b")], template=tf1, link=True)
    assert not list(tmp_path.glob("[xyz]*"))


def test_dry_run_says_which_way(run, tf1, tmp_path):
    out, _ = run("rewrite-names", tf1, tmp_path / "n", "--strip-optimizer", "--dry-run", "--json")
    assert json.loads(out)["fast_path"] is False
    out, _ = run("rewrite-names", tf1, tmp_path / "n", "--strip-optimizer", "--link", "--dry-run", "--json")
    assert json.loads(out)["fast_path"] is True


def test_link_says_so_when_the_files_had_to_be_copied(run, tf1, tmp_path, monkeypatch):
    import errno

    def no_link(src, dst, *a, **k):
        raise OSError(errno.EXDEV, "Invalid cross-device link")
    monkeypatch.setattr(os, "link", no_link)
    dst = tmp_path / "c"
    _, err = run("rewrite-names", tf1, dst, "--rule", "dense/=model/dense/", "--link")
    assert "could not be hard-linked (another file system?); copied whole" in err
    assert "data files copied whole, index rebuilt" in err
    assert os.stat(_data(dst)).st_nlink == 1
