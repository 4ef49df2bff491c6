"""verify --recursive, hostile: V1 checkpoints, unreadable directories, trees without checkpoints."""

import json
import os
import shutil

import numpy as np
import pytest

import ckptool
from clirun import completed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1 = os.path.join(ROOT, "tests", "data", "v1")
RUN = os.path.join(ROOT, "tests", "data", "ckpt_save")


def test_v1_only_tree_is_verified_not_damaged(tmp_path):
    shutil.copytree(V1, tmp_path / "t" / "v1")
    (tmp_path / "t" / "v1" / "single" / "ckpt").write_text("a text file named like a checkpoint\n")
    # the fixtures' state files hold TF1 Saver's absolute paths of where they were made: TF finds no latest
    r = completed("verify", "-r", tmp_path / "t")
    assert r.returncode == 1 and r.stdout.count("STATE ") == 2 and "state --relative" in r.stdout, r.stdout
    for d in ("single", "sharded"):
        assert completed("state", tmp_path / "t" / "v1" / d, "--relative").returncode == 0
    r = completed("verify", "-r", tmp_path / "t")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "DAMAGED" not in r.stdout
    assert r.stdout.count("ok ") == 2
    assert f"{tmp_path}/t/v1/single/v1ckpt " in r.stdout and "v1sharded-?????-of-00003" in r.stdout
    doc = json.loads(completed("verify", "-r", tmp_path / "t", "--json").stdout)
    assert doc["ok"] is True and doc["checkpoints"] == 2 and doc["unreadable"] == [] and doc["state_files"] == []


def test_v1_beside_v2_both_verified(tmp_path):
    shutil.copytree(RUN, tmp_path / "run")
    for f in os.listdir(os.path.join(V1, "single")):
        if f != "checkpoint":  # the run's own state file stays
            shutil.copy(os.path.join(V1, "single", f), tmp_path / "run" / f)
    r = completed("verify", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ok ") == 4 and "v1ckpt" in r.stdout


def test_damaged_v1_is_damaged(tmp_path):
    shutil.copytree(V1, tmp_path / "t")
    path = tmp_path / "t" / "single" / "v1ckpt"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0xFF
    path.write_bytes(bytes(raw))
    r = completed("verify", "-r", tmp_path / "t")
    assert r.returncode == 1 and "DAMAGED" in r.stdout and "v1ckpt" in r.stderr


@pytest.mark.parametrize("content", ["empty", "files"])
def test_tree_without_checkpoints_says_so_and_exits_as_prune_does(tmp_path, content):
    root = tmp_path / "tree"
    (root / "a" / "b").mkdir(parents=True)
    if content == "files":
        (root / "a" / "ckpt").write_text("not a checkpoint")
        (root / "a" / "b" / "notes.index").write_bytes(b"junk" * 20)
    r = completed("verify", "-r", root)
    assert "DAMAGED" not in r.stdout
    assert r.stdout.strip() == f"no checkpoints found under {root}"
    assert r.returncode == 0 and r.stderr == ""
    assert completed("prune", "-r", root).returncode == r.returncode  # the same answer for cron
    doc = json.loads(completed("verify", "-r", root, "--json").stdout)
    assert doc == {"ok": True, "checkpoints": 0, "damaged": 0, "results": [], "unreadable": [], "missing": [],
                   "state_files": []}


def test_a_state_file_naming_nothing_is_reported_as_tf_reads_it(tmp_path):
    """Issue 36: TF's latest_checkpoint is None for it (a trainer would start from scratch)."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "checkpoint").write_text('model_checkpoint_path: "gone-1"\n')
    r = completed("verify", "-r", root)
    assert r.returncode == 1 and "STATE" in r.stdout and "'gone-1', does not exist" in r.stdout
    assert "DAMAGED" not in r.stdout


def test_missing_path_is_still_an_error(tmp_path):
    r = completed("verify", "-r", tmp_path / "nope")
    assert r.returncode == 1


def _deny(monkeypatch, denied):
    """Make directories in ``denied`` unlistable (tests run as root, where chmod 000 does not stop reads)."""
    scandir, access = os.scandir, os.access

    def fake_scandir(path="."):
        if os.fspath(path) in denied:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    def fake_access(path, mode, **kw):
        return os.fspath(path) not in denied and access(path, mode, **kw)

    monkeypatch.setattr(os, "scandir", fake_scandir)
    monkeypatch.setattr(os, "access", fake_access)


def test_unreadable_directory_exits_1_naming_it(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(RUN, root / "ok")
    shutil.copytree(RUN, root / "secret")
    _deny(monkeypatch, {str(root / "secret")})
    r = completed("verify", "-r", root)
    assert r.returncode == 1
    assert r.stdout.count("ok ") == 3  # the readable run is still checked
    assert f"UNREADABLE  {root}/secret: Permission denied" in r.stdout
    assert r.stderr.startswith("ckptool: error: ") and f"{root}/secret" in r.stderr
    doc = json.loads(completed("verify", "-r", root, "--json").stdout)
    assert doc["ok"] is False and doc["unreadable"] == [{"path": f"{root}/secret", "error": "Permission denied"}]


def test_unreadable_top_with_nothing_else(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    root.mkdir()
    _deny(monkeypatch, {str(root)})
    r = completed("verify", "-r", root)
    assert r.returncode == 1 and "no checkpoints found" not in r.stdout and str(root) in r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory of mode 000")
def test_chmod_000_directory(tmp_path):
    root = tmp_path / "runs"
    ckptool.write(str(root / "a" / "ckpt-1"), {"w": np.zeros(2, np.float32)}, sync=False)
    (root / "b").mkdir()
    os.chmod(root / "b", 0)
    try:
        r = completed("verify", "-r", root)
    finally:
        os.chmod(root / "b", 0o755)
    assert r.returncode == 1 and f"{root}/b" in r.stderr
