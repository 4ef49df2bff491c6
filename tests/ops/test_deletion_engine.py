"""Issue 27, one deletion engine: prune and rm share deletion (index first), the journal,
the state file's compare-and-swap and the refusal of non-regular files."""

import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.io.control.state import read_state
from ckptool.io.safety.dirfd import LocalDir
from ckptool.ops.retain import deletion
from ckptool.ops.retain import prune as P
from ckptool.ops.retain.rm import rm
from ckptool.ops.retain.state import rebuild_state
from clirun import run

T0 = 1_700_000_000.0


def make(d, steps):
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(64, s, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"ckpt-{s}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
    return d


def names(d):
    return sorted(os.listdir(d))


@pytest.mark.parametrize("where", [".ckptool.lock", "checkpoint", "ckpt-2.index"])
def test_a_fifo_is_refused_at_once_by_prune_and_rm(tmp_path, capsys, where):
    d = make(tmp_path / "run", [1, 2, 3])
    if where == "ckpt-2.index":
        os.unlink(d / where)
    elif (d / where).exists():
        os.unlink(d / where)
    os.mkfifo(d / where)
    before = names(d)
    for argv in (["prune", d, "--max-to-keep", "1"], ["rm", d / "ckpt-1"], ["state", d, "--rebuild"]):
        code, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1 and lines[0].startswith("ckptool: error:"), (argv, err)
        assert where in lines[0] and "Traceback" not in err
    assert names(d) == before


def test_a_link_to_a_device_as_an_index_is_refused(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2, 3])
    os.unlink(d / "ckpt-1.index")
    os.symlink("/dev/zero", d / "ckpt-1.index")
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 1 and "ckpt-1.index" in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "rm", d / "ckpt-2")
    assert code == 1 and "ckpt-1.index" in err
    assert (d / "ckpt-2.index").exists() and (d / "ckpt-3.index").exists()


def test_a_fifo_lock_does_not_hang_save(tmp_path, capsys):
    d = make(tmp_path / "run", [1])
    os.unlink(d / ".ckptool.lock")
    os.mkfifo(d / ".ckptool.lock")
    np.save(tmp_path / "w.npy", np.ones(3, np.float32))
    code, out, err = run(capsys, "save", "--from", tmp_path / "w.npy", d / "ckpt-2", "--max-to-keep", "2")
    assert code == 1 and ".ckptool.lock" in err and "Traceback" not in err


def _failing_unlink(monkeypatch, victim):
    real = LocalDir.unlink

    def unlink(self, name):
        if name == victim:
            raise PermissionError(13, "Permission denied")
        return real(self, name)

    monkeypatch.setattr(LocalDir, "unlink", unlink)


def test_an_index_that_cannot_go_leaves_its_checkpoint_whole_and_not_deleted(tmp_path, monkeypatch):
    d = make(tmp_path / "run", [1, 2, 3])
    two = sum(os.path.getsize(d / n) for n in ("ckpt-2.index", "ckpt-2.data-00000-of-00001"))
    _failing_unlink(monkeypatch, "ckpt-1.index")
    r = P.prune(str(d), max_to_keep=1, now=T0 + 10)
    assert r.deleted == [str(d / "ckpt-2")]
    assert [f["path"] for f in r.failed] == [str(d / "ckpt-1.index")]
    assert r.bytes_freed == two  # nothing of ckpt-1 is claimed freed
    assert (d / "ckpt-1.index").exists() and (d / "ckpt-1.data-00000-of-00001").exists()  # whole
    assert json.loads((d / deletion.JOURNAL).read_text()) == ["ckpt-1"]
    monkeypatch.undo()
    P.prune(str(d), max_to_keep=1, now=T0 + 11)  # the journal is finished
    assert not (d / "ckpt-1.index").exists() and not (d / deletion.JOURNAL).exists()


def test_rm_reports_a_checkpoint_it_could_not_delete(tmp_path, monkeypatch, capsys):
    d = make(tmp_path / "run", [1, 2, 3])
    _failing_unlink(monkeypatch, "ckpt-1.data-00000-of-00001")
    res = rm([str(d / "ckpt-1"), str(d / "ckpt-2")])
    assert [r.checkpoint for r in res.removed] == [str(d / "ckpt-2")]
    assert res.not_removed == [str(d / "ckpt-1")] and res.failed[0]["path"].endswith("ckpt-1.data-00000-of-00001")
    assert res.bytes_freed == sum(r.bytes for r in res.removed)
    code, out, err = run(capsys, "rm", d / "ckpt-3", "--force")
    assert code == 0  # the earlier rm's leftover is finished through the journal, under the next rm


def test_an_interrupted_rm_is_finished_by_the_next_prune(tmp_path, monkeypatch):
    d = make(tmp_path / "run", [1, 2, 3, 4])

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("ckptool.ops.retain.rm.delete_checkpoint", killed)
    with pytest.raises(KeyboardInterrupt):
        rm([str(d / "ckpt-1")])
    monkeypatch.undo()
    assert (d / "ckpt-1.index").exists() and "ckpt-1" not in read_state(str(d)).all_model_checkpoint_paths
    assert json.loads((d / deletion.JOURNAL).read_text()) == ["ckpt-1"]
    P.prune(str(d), max_to_keep=10, now=T0 + 10)
    assert not any(n.startswith("ckpt-1.") for n in names(d)) and not (d / deletion.JOURNAL).exists()


def test_an_interrupted_rm_is_not_recorded_again_by_rebuild(tmp_path, monkeypatch):
    d = make(tmp_path / "run", [1, 2])
    monkeypatch.setattr("ckptool.ops.retain.rm.delete_checkpoint", lambda *a, **k: (_ for _ in ()).throw(
        KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        rm([str(d / "ckpt-1")])
    monkeypatch.undo()
    st = rebuild_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-2"] and not (d / "ckpt-1.index").exists()


def test_update_state_is_one_compare_and_swap(tmp_path):
    d = make(tmp_path / "run", [1, 2])
    calls = []
    with LocalDir(str(d)) as h:
        def compute(raw, st):
            calls.append(raw)
            if len(calls) == 1:  # another writer changes the file between our read and replace
                (d / "checkpoint").write_text((d / "checkpoint").read_text() + "\n")
            return st
        deletion.update_state(h, compute, "test")
    assert len(calls) == 2 and calls[0] != calls[1]
    with LocalDir(str(d)) as h:
        def always(raw, st):
            (d / "checkpoint").write_text((d / "checkpoint").read_text() + " ")
            return st
        with pytest.raises(CkptError, match="changed 10 times"):
            deletion.update_state(h, always, "test")


def test_prune_and_rm_share_one_engine():
    import inspect

    from ckptool.ops.retain import rm as rm_mod
    from ckptool.ops.retain import state as state_mod

    for mod in (P, rm_mod, state_mod):
        src = inspect.getsource(mod)
        assert "STATE_ATTEMPTS = " not in src and "def _norm" not in src and "def delete_checkpoint" not in src
        assert "storage is LOCAL" not in src


@pytest.mark.parametrize("extra", [dict(keep=("ckpt-2",)), dict(keep_steps_every=2)])
def test_kept_beyond_max_to_keep_moves_into_kept_and_leaves_the_state_list(tmp_path, extra):
    d = make(tmp_path / "run", [1, 2, 3, 4, 5])
    ino = os.stat(d / "ckpt-2.data-00000-of-00001").st_ino
    r = P.prune(str(d), max_to_keep=2, now=T0 + 10, **extra)
    assert str(d / "kept" / "ckpt-2") in r.kept and not (d / "ckpt-2.index").exists()
    assert r.moved == [{"from": str(d / "ckpt-2"), "to": str(d / "kept" / "ckpt-2"), "how": "hard link", "bytes_copied": 0}]
    assert os.stat(d / "kept" / "ckpt-2.data-00000-of-00001").st_ino == ino  # a hard link: nothing copied
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-4", "ckpt-5"] and st.model_checkpoint_path == "ckpt-5"
    assert len(st.all_model_checkpoint_timestamps) == 2
    kept = read_state(str(d / "kept"))
    assert "ckpt-2" in kept.all_model_checkpoint_paths and kept.all_model_checkpoint_timestamps[0] == T0 + 1
    if "keep_steps_every" in extra:  # ckpt-4 is one of the newest 2: linked, and stays in DIR and its state
        assert r.linked == [{"from": str(d / "ckpt-4"), "to": str(d / "kept" / "ckpt-4"), "how": "hard link", "bytes_copied": 0}]
        assert (d / "ckpt-4.index").exists() and kept.model_checkpoint_path == "ckpt-4"
    r = P.prune(str(d), max_to_keep=1, now=T0 + 20, scan=True, **extra)  # a later prune: kept/ is not DIR's
    assert (d / "kept" / "ckpt-2.index").exists()
    if "keep_steps_every" in extra:  # ckpt-4 rotated out: kept/ holds it already, so only its DIR names go
        assert [m["from"] for m in r.moved] == [str(d / "ckpt-4")] and not (d / "ckpt-4.index").exists()
        assert (d / "kept" / "ckpt-4.index").exists() and r.bytes_freed == 0
    else:
        assert not r.moved
    assert ckptool.open(str(d / "kept" / "ckpt-2")).read("w")[0] == 2


def test_every_command_refuses_a_fifo_index_with_one_line(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    os.unlink(d / "ckpt-2.index")
    os.mkfifo(d / "ckpt-2.index")
    for argv in (["inspect", d / "ckpt-2"], ["inspect", d], ["list-variables", d / "ckpt-2"], ["rm", d / "ckpt-1"],
                 ["verify", d / "ckpt-2"], ["prune", d, "--dry-run"]):
        code, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1 and "ckpt-2" in lines[0] and "Traceback" not in err, (argv, err)
        assert "ckpt-2.index" in out + err


def test_rm_never_deletes_a_text_file_named_like_the_checkpoint(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    (d / "ckpt-1").write_text("my notes about ckpt-1\n")
    (d / "ckpt-1.notes.txt").write_text("n")
    res = rm([str(d / "ckpt-1")])
    assert sorted(os.path.basename(f) for f in res.removed[0].files) == ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    assert (d / "ckpt-1").read_text() == "my notes about ckpt-1\n" and (d / "ckpt-1.notes.txt").exists()
    (d / "notes").write_text("not a checkpoint")
    code, out, err = run(capsys, "rm", d / "notes")
    assert code == 1 and (d / "notes").exists()
