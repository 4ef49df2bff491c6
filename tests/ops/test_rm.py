"""`ckptool rm` and ckptool.ops.retain.rm: the files of a checkpoint and its state entries, atomically."""

import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import MissingError, RefusedError
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.ops.retain.rm import rm
from clirun import run

T0 = 1_700_000_000.0


def make(d, steps, *, stamps=True, name="ckpt", meta=False):
    d.mkdir(exist_ok=True)
    for s in steps:
        ckptool.write(str(d / f"{name}-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
        if meta:
            (d / f"{name}-{s}.meta").write_bytes(b"meta")
    paths = [f"{name}-{s}" for s in steps]
    ts = [T0 + i for i in range(len(steps))] if stamps else []
    write_state(str(d), CheckpointState(paths[-1], paths, ts, T0 - 1))
    return d


def names(d):
    return sorted(os.listdir(d))


def test_rm_one_removes_its_files_and_its_entry(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3], meta=True)
    (d / "ckpt-10.index.bak").write_bytes(b"not ckpt-1's")
    res = rm([str(d / "ckpt-2")])
    assert [r.checkpoint for r in res.removed] == [str(d / "ckpt-2")]
    assert sorted(os.path.basename(f) for f in res.removed[0].files) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index", "ckpt-2.meta"]
    assert not any(n.startswith("ckpt-2.") for n in names(d))
    assert "ckpt-10.index.bak" in names(d) and "ckpt-1.index" in names(d)
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-1", "ckpt-3"]
    assert st.all_model_checkpoint_timestamps == [T0, T0 + 2]
    assert st.model_checkpoint_path == "ckpt-3" and st.last_preserved_timestamp == T0 - 1
    assert res.directories[0].state_file == "updated" and res.removed[0].in_state


def test_rm_accepts_every_checkpoint_argument_form(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3, 4])
    rm([str(d / "ckpt-1.index"), str(d / "ckpt-2.data-00000-of-00001"), str(d / "ckpt-2")])
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-3", "ckpt-4"]


def test_latest_needs_force_then_the_newest_remaining_is_latest(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3])
    before = {n: (d / n).read_bytes() for n in names(d)}
    for arg in (d / "ckpt-3", d):  # by prefix, and the directory (its latest)
        with pytest.raises(RefusedError, match="latest.*--force"):
            rm([str(d / "ckpt-1"), str(arg)])
    assert {n: (d / n).read_bytes() for n in names(d)} == before  # nothing at all deleted
    res = rm([str(d)], force=True)
    assert res.removed[0].latest
    st = read_state(str(d))
    assert st.model_checkpoint_path == "ckpt-2" and st.all_model_checkpoint_paths == ["ckpt-1", "ckpt-2"]
    assert res.directories[0].latest_after == "ckpt-2"


def test_removing_every_entry_removes_the_state_file(tmp_path):
    d = make(tmp_path / "run", [1, 2])
    res = rm([str(d / "ckpt-1"), str(d / "ckpt-2")], force=True)
    assert res.directories[0].state_file == "removed"
    assert names(d) == [".ckptool.lock"]


def test_dry_run_changes_nothing(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3])
    before = {n: (d / n).read_bytes() for n in names(d)}
    res = rm([str(d / "ckpt-3")], force=True, dry_run=True)
    assert res.dry_run and res.directories[0].state_file == "updated" and res.directories[0].latest_after == "ckpt-2"
    assert res.removed[0].bytes == sum(os.path.getsize(f) for f in res.removed[0].files) > 0
    assert {n: (d / n).read_bytes() for n in names(d)} == before


def test_not_in_the_state_and_no_state(tmp_path):
    d = make(tmp_path / "run", [1, 2])
    ckptool.write(str(d / "orphan-7"), {"w": np.zeros(2, np.float32)}, sync=False)
    text = (d / "checkpoint").read_bytes()
    res = rm([str(d / "orphan-7")])
    assert res.directories[0].state_file == "unchanged" and not res.removed[0].in_state
    assert (d / "checkpoint").read_bytes() == text
    (d / "checkpoint").unlink()
    with pytest.raises(RefusedError, match="newest"):
        rm([str(d / "ckpt-2")])
    rm([str(d / "ckpt-1")])
    assert names(d) == [".ckptool.lock", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]


def test_missing_argument_deletes_nothing(tmp_path):
    d = make(tmp_path / "run", [1, 2])
    with pytest.raises(MissingError):
        rm([str(d / "ckpt-1"), str(d / "ckpt-9")])
    assert "ckpt-1.index" in names(d)


def test_absolute_and_moved_paths(tmp_path):
    d = tmp_path / "run"
    make(d, [1, 2, 3])
    old = "/elsewhere/old-run"
    st = read_state(str(d))
    write_state(str(d), CheckpointState(f"{old}/ckpt-3", [f"{old}/ckpt-1", str(d / "ckpt-2"), f"{old}/ckpt-3"],
                                        st.all_model_checkpoint_timestamps, 0.0))
    rm([str(d / "ckpt-1"), str(d / "ckpt-2")])
    st = read_state(str(d))
    # the moved entry is written back by its name here, as prune writes it (layout.checkpoints.resolve_recorded)
    assert st.all_model_checkpoint_paths == ["ckpt-3"] and st.model_checkpoint_path == "ckpt-3"


def test_cli_json_and_exit_codes(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2, 3])
    code, out, err = run(capsys, "rm", d / "ckpt-3")
    assert code == 1 and err.startswith("ckptool: error:") and "--force" in err
    code, out, err = run(capsys, "rm", "--dry-run", "--json", d / "ckpt-1")
    assert code == 0
    doc = json.loads(out)
    assert doc["dry_run"] and doc["removed"][0]["checkpoint"] == str(d / "ckpt-1")
    assert doc["directories"][0]["state_file"] == "updated" and doc["bytes_freed"] > 0
    code, out, err = run(capsys, "rm", d / "ckpt-1", d / "ckpt-3", "--force")
    assert code == 0 and "removed" in err and out == "" and "latest is now ckpt-2" in err  # status: stderr
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-2"]
    code, out, err = run(capsys, "rm", d / "nope")
    assert code == 1 and "nope" in err
    code, out, err = run(capsys, "rm")
    assert code == 2


def test_lock_held_refuses(tmp_path):
    import subprocess
    import sys

    d = make(tmp_path / "run", [1, 2])
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
        "print('locked', flush=True); sys.stdin.read()"), str(d / ".ckptool.lock")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RefusedError, match="lock"):
            rm([str(d / "ckpt-1")])
    finally:
        holder.stdin.close()
        holder.wait()
    assert "ckpt-1.index" in names(d)
    rm([str(d / "ckpt-1")])
    assert "ckpt-1.index" not in names(d)


def test_tf1_saver_moved_directory(tmp_path, data_dir):
    import shutil

    d = tmp_path / "saver"
    shutil.copytree(data_dir / "tf1_saver", d)
    rm([str(d / "model.ckpt-20")])
    assert not any(n.startswith("model.ckpt-20") for n in names(d))  # .meta too
    st = read_state(str(d))
    assert [os.path.basename(p) for p in st.all_model_checkpoint_paths] == ["model.ckpt-10", "model.ckpt-30"]


@pytest.mark.filterwarnings("ignore::ckptool.errors.CkptWarning")
def test_v1_sharded(tmp_path, data_dir):
    import shutil

    d = tmp_path / "v1"
    shutil.copytree(data_dir / "v1" / "sharded", d)
    res = rm([str(d), str(d / "v1sharded-?????-of-00003")], force=True)
    assert len(res.removed) == 1
    assert names(d) == [".ckptool.lock", "state.json"]


def test_corrupt_state_file_deletes_nothing(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    (d / "checkpoint").write_bytes(b"model_checkpoint_path: \xff\xfe")
    code, _, err = run(capsys, "rm", d / "ckpt-1")
    assert code == 1 and "checkpoint" in err and "Traceback" not in err
    assert "ckpt-1.index" in names(d)


class _Killed(BaseException):
    """SIGKILL, as far as the code under test can tell: nothing after it runs."""


@pytest.mark.parametrize("form", ["ckpt-300", "ckpt-300.index", "ckpt-300.data-00000-of-00001"])
def test_a_rerun_finishes_an_rm_killed_after_the_index_went(tmp_path, monkeypatch, capsys, form):
    """Issue 49, item 4: killed right after the index was unlinked, the same rm rerun completes it
    (the journal names it) instead of saying 'no checkpoint found'."""
    from ckptool.io.safety import dirfd

    d = make(tmp_path / "run", [100, 200, 300, 400], meta=True)
    real = dirfd.LocalDir.unlink

    def unlink(self, name):
        real(self, name)
        if name == "ckpt-300.index":
            raise _Killed

    with monkeypatch.context() as mp:
        mp.setattr(dirfd.LocalDir, "unlink", unlink)
        with pytest.raises(_Killed):
            rm([str(d / "ckpt-300")])
    assert not (d / "ckpt-300.index").exists() and (d / "ckpt-300.data-00000-of-00001").exists()
    assert "ckpt-300" in (d / ".ckptool-prune-pending").read_text()
    code, out, err = run(capsys, "rm", d / form, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [r["checkpoint"] for r in doc["removed"]] == [str(d / "ckpt-300")]
    assert sorted(os.path.basename(f) for f in doc["removed"][0]["files"]) == [
        "ckpt-300.data-00000-of-00001", "ckpt-300.meta"]
    assert not [n for n in names(d) if n.startswith("ckpt-300")] and not (d / ".ckptool-prune-pending").exists()
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-100", "ckpt-200", "ckpt-400"]
    code, out, err = run(capsys, "rm", d / "ckpt-300")  # done now: nothing names it any more
    assert code == 1 and "ckpt-300" in err


def test_a_journal_nested_deep_is_one_warning_not_a_crash(tmp_path, capsys):
    """A journal nested 100,000 deep is read by the bounded JSON reader: every later deleting
    command warns once and goes on (the damaged journal is dropped), never a RecursionError."""
    d = make(tmp_path / "run", [1, 2, 3])
    (d / ".ckptool-prune-pending").write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = run(capsys, "rm", d / "ckpt-1")
    assert code == 0 and err.count("unreadable journal") == 1 and "nested too deep" in err, err
    assert "Traceback" not in err and not (d / ".ckptool-prune-pending").exists()
    (d / ".ckptool-prune-pending").write_text("[" * 100_000 + "]" * 100_000)
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 0 and err.count("unreadable journal") == 1, err
    assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-3.index"]
