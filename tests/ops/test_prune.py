"""`ckptool prune` and ckptool.ops.retain.prune.prune: decisions, every file of a checkpoint, and each safety rule."""

import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptWarning, MissingError, RefusedError
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.ops.retain import prune as P

T0 = 1_700_000_000.0


from lockholder import lock_held_elsewhere  # noqa: E402

from clirun import run  # noqa: E402


def make(d, steps, *, stamps=True, name="ckpt", gap=60.0):
    d.mkdir(exist_ok=True)
    for i, s in enumerate(steps):
        p = d / f"{name}-{s}"
        ckptool.write(str(p), {"w": np.full(3, s, np.float32)}, sync=False)
        t = T0 + i * gap
        for f in d.glob(f"{name}-{s}.*"):
            os.utime(f, (t, t))
    paths = [f"{name}-{s}" for s in steps]
    ts = [T0 + i * gap for i in range(len(steps))] if stamps else []
    write_state(str(d), CheckpointState(paths[-1], paths, ts, T0 - 1 if stamps else 0.0))
    return d


def indexes(d):
    return sorted(p.name[:-6] for p in d.glob("*.index"))


def snapshot(root):
    return {str(p): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in root.rglob("*")}


def test_keeps_the_newest_and_rewrites_the_state(tmp_path):
    d = make(tmp_path / "run", range(1, 7))
    r = P.prune(str(d), max_to_keep=2, now=T0 + 3600)
    assert indexes(d) == ["ckpt-5", "ckpt-6"]
    assert [os.path.basename(p) for p in r.deleted] == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    st = read_state(str(d))
    assert st.model_checkpoint_path == "ckpt-6" and st.all_model_checkpoint_paths == ["ckpt-5", "ckpt-6"]
    assert st.all_model_checkpoint_timestamps == [T0 + 240, T0 + 300]
    assert r.bytes_freed > 0 and not (d / P.JOURNAL).exists()


def test_deletes_every_file_of_a_checkpoint_but_not_files_being_written(tmp_path):
    d = make(tmp_path / "run", [1, 10, 11])
    (d / "ckpt-1.meta").write_bytes(b"meta")
    (d / "ckpt-1.data-00000-of-00002").write_bytes(b"x")  # a stray shard of another save
    (d / "ckpt-1.json").write_bytes(b"{}")  # a sidecar of that prefix
    (d / "ckpt-1.index.tempstate123").write_bytes(b"t")
    (d / "ckpt-1.data-00000-of-00001.tempstate9").write_bytes(b"t")
    (d / "ckpt-1_temp").mkdir()
    (d / "ckpt-1_temp" / "part-00000-of-00001.index").write_bytes(b"t")
    (d / "other.txt").write_bytes(b"mine")
    (d / "ckpt-1.notes.txt").write_bytes(b"notes")
    (d / "ckpt-1.index.bak").write_bytes(b"bak")
    P.prune(str(d), max_to_keep=2, now=T0 + 3600)
    left = sorted(p.name for p in d.iterdir())
    for gone in ("ckpt-1.index", "ckpt-1.meta", "ckpt-1.data-00000-of-00001", "ckpt-1.data-00000-of-00002"):
        assert gone not in left
    for keep in ("ckpt-1.index.tempstate123", "ckpt-1.data-00000-of-00001.tempstate9", "ckpt-1_temp",
                 "other.txt", "ckpt-10.index", "ckpt-11.index", "ckpt-10.data-00000-of-00001",
                 "ckpt-1.json", "ckpt-1.notes.txt", "ckpt-1.index.bak"):  # sidecars are the user's
        assert keep in left


def test_dry_run_changes_nothing_and_json_shape(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 5))
    before = snapshot(d)
    code, out, err = run(capsys, "prune", str(d), "--max-to-keep", "1", "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kept"] == [str(d / "ckpt-4")] and doc["deleted"] == [str(d / f"ckpt-{i}") for i in (1, 2, 3)]
    assert doc["preserved"] == [] and doc["dry_run"] is True and doc["bytes_freed"] > 0
    assert doc["reasons"][str(d / "ckpt-4")] == ["max_to_keep", "latest"]
    assert snapshot(d) == before


def test_human_table_says_why(tmp_path, capsys):
    d = make(tmp_path / "run", [100, 200, 300, 400, 500], gap=3600.0)
    code, out, err = run(capsys, "prune", str(d), "--max-to-keep", "1", "--keep-steps-every", "200",
                         "--keep", "ckpt-100", "--dry-run")
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines()}
    # kept beyond the newest max_to_keep by a lasting rule: shown where it moves, DIR/kept/
    assert "pinned" in lines[str(d / "kept" / "ckpt-100")] and "steps-every" in lines[str(d / "kept" / "ckpt-200")]
    assert "would delete" in lines[str(d / "ckpt-300")] and "latest" in lines[str(d / "ckpt-500")]
    assert "to delete" in err


def test_every_n_hours_preserves_and_drops_from_the_state(tmp_path):
    d = make(tmp_path / "run", range(1, 6), gap=3600.0)
    r = P.prune(str(d), max_to_keep=1, keep_every_n_hours=2.0, now=T0 + 10 * 3600)
    # lp = T0 - 1: ckpt-1 (T0) is not 2 h later; ckpt-2 (T0+1h) neither; ckpt-3 (T0+2h) is.
    assert [os.path.basename(p) for p in r.preserved] == ["ckpt-3"]
    assert r.preserved == [str(d / "kept" / "ckpt-3")]  # out of a running trainer's reach
    assert indexes(d) == ["ckpt-5"] and indexes(d / "kept") == ["ckpt-3"]
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-5"] and st.last_preserved_timestamp == T0 + 2 * 3600


def test_min_age_keeps_young_checkpoints_in_the_state(tmp_path):
    d = make(tmp_path / "run", range(1, 6), gap=600.0)
    P.prune(str(d), max_to_keep=1, min_age=1000, now=T0 + 2400 + 60)  # ckpt-4 (T0+1800) is 660 s old
    assert indexes(d) == ["ckpt-4", "ckpt-5"]
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-4", "ckpt-5"]
    P.prune(str(d), max_to_keep=1, min_age=1000, now=T0 + 9999)
    assert indexes(d) == ["ckpt-5"]


def test_tf1_state_without_timestamps_uses_mtimes_and_drops_missing(tmp_path):
    d = make(tmp_path / "run", range(1, 5), stamps=False)
    write_state(str(d), CheckpointState("ckpt-4", ["ckpt-0", "ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]))
    r = P.prune(str(d), max_to_keep=2, now=T0 + 9999)
    assert r.missing == ["ckpt-0"] and indexes(d) == ["ckpt-3", "ckpt-4"]
    assert r.already_gone == [str(d / "ckpt-0")] and len(r.deleted) == 2
    st = read_state(str(d))
    # the times used (the index mtimes) are written back, so the next run continues from them (issue 36)
    assert st.all_model_checkpoint_paths == ["ckpt-3", "ckpt-4"]
    assert st.all_model_checkpoint_timestamps == [T0 + 120, T0 + 180] and st.last_preserved_timestamp == T0


def test_scan_considers_orphans(tmp_path):
    d = make(tmp_path / "run", range(1, 7))
    write_state(str(d), CheckpointState("ckpt-6", ["ckpt-6"], [T0 + 300], T0 + 200))
    r = P.prune(str(d), max_to_keep=2, now=T0 + 9999)
    assert indexes(d) == [f"ckpt-{i}" for i in range(1, 7)] and not r.deleted
    r = P.prune(str(d), max_to_keep=2, scan=True, now=T0 + 9999)
    assert indexes(d) == ["ckpt-5", "ckpt-6"]
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-5", "ckpt-6"]


def test_no_state_file_needs_scan(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2, 3])
    os.remove(d / "checkpoint")
    with pytest.raises(MissingError):
        P.prune(str(d))
    code, out, err = run(capsys, "prune", str(d), "--max-to-keep", "1")
    assert code == 1 and err.startswith("ckptool: error:") and "--scan" in err
    code, out, err = run(capsys, "prune", str(d), "--max-to-keep", "1", "--scan")
    assert code == 0, err
    assert indexes(d) == ["ckpt-3"] and read_state(str(d)).model_checkpoint_path == "ckpt-3"


def test_hostile_state_entries_are_left_alone_with_a_warning(tmp_path):
    outside = tmp_path / "outside"
    make(outside, [1, 2])
    d = make(tmp_path / "run", [3, 4, 5])
    os.symlink(outside / "ckpt-1.index", d / "ckpt-9.index")
    os.symlink(outside / "ckpt-1.data-00000-of-00001", d / "ckpt-9.data-00000-of-00001")
    paths = ["../outside/ckpt-1", str(outside / "ckpt-2"), "ckpt-9", "ckpt-3", "ckpt-4", "ckpt-5"]
    write_state(str(d), CheckpointState("ckpt-5", paths, [T0 + i for i in range(6)], T0 - 1))
    before = snapshot(outside)
    with pytest.warns(CkptWarning) as rec:
        r = P.prune(str(d), max_to_keep=1, scan=False, now=T0 + 99)
    msgs = " ".join(str(w.message) for w in rec)
    assert "../outside/ckpt-1" in msgs and "symlink" in msgs
    assert snapshot(outside) == before
    assert (d / "ckpt-9.index").is_symlink() and indexes(d) == ["ckpt-5", "ckpt-9"]
    assert sorted(r.skipped) == sorted(paths[:3])
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == paths[:3] + ["ckpt-5"]


def test_latest_is_never_deleted_and_delete_all_is_refused(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3])
    # The state names ckpt-1 as latest (odd, but TF keeps it): it stays.
    write_state(str(d), CheckpointState("ckpt-1", ["ckpt-2", "ckpt-3", "ckpt-1"], [T0, T0 + 1, T0 + 2], T0 - 1))
    P.prune(str(d), max_to_keep=1, now=T0 + 99)
    assert indexes(d) == ["ckpt-1"]
    # The latest is gone already: the newest intact one is kept too, and the latest named as damaged.
    d = make(tmp_path / "run2", [1, 2, 3])
    for f in d.glob("ckpt-3.*"):
        f.unlink()
    r = P.prune(str(d), max_to_keep=1, now=T0 + 99)
    assert indexes(d) == ["ckpt-2"] and r.preserved == [str(d / "ckpt-2")]
    assert r.reasons[str(d / "ckpt-2")] == ["last intact"] and [x["path"] for x in r.damaged] == [str(d / "ckpt-3")]



def test_entries_a_writer_adds_meanwhile_are_kept(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 5))
    real = P.scan

    def listing_then_writer_saves(handle):
        out = real(handle)
        ckptool.write(str(d / "ckpt-5"), {"w": np.zeros(3, np.float32)}, sync=False)
        st = read_state(str(d))
        write_state(str(d), CheckpointState("ckpt-5", st.all_model_checkpoint_paths + ["ckpt-5"],
                                            st.all_model_checkpoint_timestamps + [T0 + 500], st.last_preserved_timestamp))
        return out

    monkeypatch.setattr(P, "scan", listing_then_writer_saves)
    P.prune(str(d), max_to_keep=2, now=T0 + 999)
    st = read_state(str(d))
    assert st.model_checkpoint_path == "ckpt-5" and st.all_model_checkpoint_paths == ["ckpt-3", "ckpt-4", "ckpt-5"]
    assert indexes(d) == ["ckpt-3", "ckpt-4", "ckpt-5"]


def _writer_saves(d, step):
    ckptool.write(str(d / f"ckpt-{step}"), {"w": np.zeros(3, np.float32)}, sync=False)
    st = read_state(str(d))
    write_state(str(d), CheckpointState(f"ckpt-{step}", st.all_model_checkpoint_paths + [f"ckpt-{step}"],
                                        st.all_model_checkpoint_timestamps + [T0 + 100 * step],
                                        st.last_preserved_timestamp))


def test_a_save_between_merging_and_writing_the_state_is_merged_again(tmp_path, monkeypatch):
    """The writer saves after prune merged the state but before it replaced it: the
    replacement sees the change and merges again, so the save is not lost."""
    d = make(tmp_path / "run", range(1, 5))
    real, calls = P.merge_state, []

    def merge_then_writer_saves(*args):
        out = real(*args)
        calls.append(1)
        if len(calls) == 1:
            _writer_saves(d, 5)
        return out

    monkeypatch.setattr(P, "merge_state", merge_then_writer_saves)
    P.prune(str(d), max_to_keep=2, now=T0 + 999)
    st = read_state(str(d))
    assert len(calls) == 2
    assert st.model_checkpoint_path == "ckpt-5" and st.all_model_checkpoint_paths == ["ckpt-3", "ckpt-4", "ckpt-5"]
    assert indexes(d) == ["ckpt-3", "ckpt-4", "ckpt-5"]


def test_a_state_that_never_settles_deletes_nothing(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 5))
    real, step = P.merge_state, [5]

    def merge_then_writer_saves(*args):
        out = real(*args)
        _writer_saves(d, step[0])
        step[0] += 1
        return out

    monkeypatch.setattr(P, "merge_state", merge_then_writer_saves)
    with pytest.raises(RefusedError, match="changed 10 times.*nothing deleted"):
        P.prune(str(d), max_to_keep=2, now=T0 + 999)
    assert indexes(d) == sorted(f"ckpt-{s}" for s in range(1, 15))
    assert not (d / P.JOURNAL).exists()
    assert read_state(str(d)).model_checkpoint_path == "ckpt-14"


def test_a_killed_prune_is_finished_from_its_journal(tmp_path):
    d = make(tmp_path / "run", range(1, 5))
    write_state(str(d), CheckpointState("ckpt-4", ["ckpt-3", "ckpt-4"], [T0 + 120, T0 + 180], T0 - 1))
    (d / P.JOURNAL).write_text(json.dumps(["ckpt-1", "ckpt-2", "ckpt-4"]))
    P.prune(str(d), max_to_keep=5, now=T0 + 999)
    assert indexes(d) == ["ckpt-3", "ckpt-4"] and not (d / P.JOURNAL).exists()


def test_lock_keeps_two_prunes_apart(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 4))
    with lock_held_elsewhere(d):
        with pytest.raises(RefusedError, match="lock"):
            P.prune(str(d), max_to_keep=1)
        P.prune(str(d), max_to_keep=1, dry_run=True)  # a dry run takes no lock
        assert indexes(d) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    P.prune(str(d), max_to_keep=1)
    assert indexes(d) == ["ckpt-3"]


def test_corrupt_state_file_is_one_error_line(tmp_path, capsys):
    d = make(tmp_path / "run", [1])
    (d / "checkpoint").write_text("model_checkpoint_path: ")
    code, out, err = run(capsys, "prune", str(d))
    assert code == 1 and err.startswith("ckptool: error:") and "checkpoint" in err and out == ""


def test_usage_and_help(capsys):
    code, out, err = run(capsys, "prune", "--help")
    assert code == 0 and "--max-to-keep" in out and "default: 5" in out.replace("[", "").replace("]", "")
    assert "Default: none" in out
    code, out, err = run(capsys, "prune", "x", "--min-age", "soon")
    assert code == 2 and "duration" in err
    code, out, err = run(capsys, "prune", "x", "--max-to-keep", "-1")
    assert code == 2


def test_max_to_keep_zero_keeps_all(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 5))
    code, out, err = run(capsys, "prune", str(d), "--max-to-keep", "0")
    assert code == 0 and indexes(d) == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]


def test_record_save_follows_checkpoint_manager(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for i in range(1, 5):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.zeros(1, np.float32)}, sync=False)
        r = P.record_save(str(d), str(d / f"ckpt-{i}"), max_to_keep=2, keep_every_n_hours=None,
                               now=T0 + i)
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-3", "ckpt-4"] and st.all_model_checkpoint_timestamps == [T0 + 3, T0 + 4]
    assert st.last_preserved_timestamp == T0 and r.to_json()["deleted"] == [str(d / "ckpt-2")]


def test_pruning_10000_checkpoints_lists_the_directory_once(tmp_path, monkeypatch):
    """Cost linear in the number of files: one directory listing per run, not one per checkpoint."""
    d = tmp_path / "big"
    d.mkdir()
    n = 2000
    ckptool.write(str(tmp_path / "one"), {"w": np.zeros(1, np.float32)}, sync=False)
    index = (tmp_path / "one.index").read_bytes()
    data = (tmp_path / "one.data-00000-of-00001").read_bytes()
    for i in range(1, n + 1):
        (d / f"ckpt-{i}.index").write_bytes(index)
        (d / f"ckpt-{i}.data-00000-of-00001").write_bytes(data)
    write_state(str(d), CheckpointState(f"ckpt-{n}", [f"ckpt-{i}" for i in range(1, n + 1)],
                                        [T0 + i for i in range(1, n + 1)], T0))
    from ckptool.io.safety.dirfd import LocalDir

    calls = []
    real = LocalDir.names
    monkeypatch.setattr(LocalDir, "names", lambda self: calls.append(self.path) or real(self))
    r = P.prune(str(d), max_to_keep=5, now=T0 + n + 1)
    assert len(r.deleted) == n - 5 and len(calls) == 1
