"""inspect DIR shows an existing V1 checkpoint in the directory's state, never as missing."""

import json
import os
import shutil

import pytest

from clirun import completed

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
V1 = os.path.join(ROOT, "tests", "data", "v1")


def _fix_state(d, name):
    (d / "checkpoint").write_text(f'model_checkpoint_path: "{d / name}"\nall_model_checkpoint_paths: "{d / name}"\n')


@pytest.mark.parametrize("kind, name", [("single", "v1ckpt"), ("sharded", "v1sharded-?????-of-00003")])
@pytest.mark.parametrize("moved", [False, True])
def test_existing_v1_checkpoint_is_latest_not_missing(tmp_path, kind, name, moved):
    d = tmp_path / kind
    shutil.copytree(os.path.join(V1, kind), d)
    if not moved:  # the fixture records /tmp/ckptool-fixture-gen/...: a moved directory
        _fix_state(d, name)
    r = completed("inspect", d, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["state"]["entries"]
    assert [(row["prefix"], row["status"]) for row in rows] == [(f"{d}/{name}", "latest")]
    assert rows[0]["bytes"] and rows[0]["bytes"] > 0
    text = completed("inspect", d).stdout
    assert "missing" not in text and "latest" in text


def test_removed_v1_checkpoint_is_missing_and_untracked_one_is_listed(tmp_path):
    d = tmp_path / "single"
    shutil.copytree(os.path.join(V1, "single"), d)
    _fix_state(d, "v1ckpt")
    shutil.copy(d / "v1ckpt", d / "other")  # an untracked V1 checkpoint beside it
    by_prefix = json.loads(completed("inspect", d / "v1ckpt", "--json").stdout)["state"]["entries"]
    rows = json.loads(completed("inspect", d, "--json").stdout)["state"]["entries"]
    assert by_prefix == rows  # a prefix argument shows the state of the directory holding it (issue 32)
    assert {row["prefix"]: row["status"] for row in rows} == {f"{d}/v1ckpt": "latest", f"{d}/other": "untracked"}
    (d / "checkpoint").write_text(f'model_checkpoint_path: "{d}/other"\nall_model_checkpoint_paths: "{d}/gone"\n'
                                  f'all_model_checkpoint_paths: "{d}/other"\n')
    rows = json.loads(completed("inspect", d, "--json").stdout)["state"]["entries"]
    status = {row["prefix"]: row["status"] for row in rows}
    assert status[f"{d}/gone"] == "missing" and status[f"{d}/other"] == "latest"
