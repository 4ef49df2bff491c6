"""`ckptool state`: show, --rebuild (from disk, by step then mtime), --relative."""

import json
import os

import numpy as np

import ckptool
from ckptool.io.control.state import CheckpointState, read_state, write_state
from clirun import run  # noqa: E402


def make(d, steps):
    d.mkdir()
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(2, s, np.float32)}, sync=False)
        t = 1_700_000_000 + 10 * i
        for f in d.glob(f"ckpt-{s}.*"):
            os.utime(f, (t, t))
    return d


def test_show_json_and_text(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    write_state(str(d), CheckpointState("ckpt-2", ["ckpt-0", "ckpt-1", "ckpt-2"], [1.0, 2.0, 3.0], 0.5))
    code, out, err = run(capsys, "state", str(d), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["model_checkpoint_path"] == "ckpt-2" and doc["last_preserved_timestamp"] == 0.5
    assert [e["exists"] for e in doc["entries"]] == [False, True, True]
    code, out, err = run(capsys, "state", str(d))
    assert "latest: ckpt-2" in out and "ckpt-0" in out and "(missing)" in out


def test_rebuild_orders_by_step_then_mtime(tmp_path, capsys):
    d = make(tmp_path / "run", [10, 2, 1])  # written newest-step first: mtimes disagree with steps
    (d / "ckpt-3.index.tempstate1").write_bytes(b"")
    code, out, err = run(capsys, "state", str(d), "--rebuild")
    assert code == 0, err
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-1", "ckpt-2", "ckpt-10"] and st.model_checkpoint_path == "ckpt-10"
    assert st.all_model_checkpoint_timestamps == [1_700_000_020, 1_700_000_010, 1_700_000_000]


def test_rebuild_max_to_keep_lists_the_newest_and_keeps_the_rest_on_disk(tmp_path, capsys):
    # a rebuild that listed all five would hand the three older ones to the trainer's
    # CheckpointManager(max_to_keep=2), which deletes them at its next save
    d = make(tmp_path / "run", [1, 2, 3, 4, 5])
    code, out, err = run(capsys, "state", str(d), "--rebuild", "--max-to-keep", "2")
    assert code == 0, err
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-4", "ckpt-5"] and st.model_checkpoint_path == "ckpt-5"
    assert all((d / f"ckpt-{s}.index").exists() for s in range(1, 6))
    code, out, err = run(capsys, "state", str(d), "--max-to-keep", "2")
    assert code == 2 and "--rebuild" in err


def test_rebuild_dry_run_writes_nothing_and_empty_dir_fails(tmp_path, capsys):
    d = make(tmp_path / "run", [1])
    code, out, err = run(capsys, "state", str(d), "--rebuild", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["model_checkpoint_path"] == "ckpt-1"
    assert not (d / "checkpoint").exists()
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, "state", str(tmp_path / "empty"), "--rebuild")
    assert code == 1 and err.startswith("ckptool: error:")


def test_relative_rewrites_inside_and_moved_paths_keeps_outside(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    paths = [str(d / "ckpt-1"), "/old/place/run/ckpt-2", "/elsewhere/ckpt-9"]
    write_state(str(d), CheckpointState("/old/place/run/ckpt-2", paths))
    code, out, err = run(capsys, "state", str(d), "--relative")
    assert code == 0 and "/elsewhere/ckpt-9" in err
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-1", "ckpt-2", "/elsewhere/ckpt-9"]
    assert st.model_checkpoint_path == "ckpt-2"


def test_no_state_and_usage(tmp_path, capsys):
    (tmp_path / "e").mkdir()
    code, out, err = run(capsys, "state", str(tmp_path / "e"))
    assert code == 1 and "no 'checkpoint' state file" in err
    code, out, err = run(capsys, "state", str(tmp_path / "e"), "--rebuild", "--relative")
    assert code == 2
