"""Kept means kept, beside a trainer that is still running (issue 36): what prune keeps beyond the
newest max_to_keep by a lasting rule gets a second name in DIR/kept/ (a checkpoint directory of its
own) and leaves DIR; crash safety through the one engine's journal; collisions; other devices and
object stores; kept/ as part of the run; kept/ pruned only by a policy of its own."""

import errno
import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.io.layout import keptdir
from ckptool.ops.retain import deletion
from ckptool.ops.retain import fleet as F
from ckptool.ops.retain import prune as P
from ckptool.ops.retain.du import du
from clirun import run

T0 = 1_700_000_000.0


def make(d, steps, gap=60.0):
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(16, s, np.float32)}, sync=False)
        for f in d.glob(f"ckpt-{s}.*"):
            os.utime(f, (T0 + i * gap, T0 + i * gap))
    names = [f"ckpt-{s}" for s in steps]
    write_state(str(d), CheckpointState(names[-1], names, [T0 + i * gap for i in range(len(steps))], T0 - 1))
    return d


def idx(d):
    return sorted(p.name[:-6] for p in d.glob("*.index"))


def value(prefix):
    with ckptool.open(str(prefix)) as ck:
        return float(ck.read("w")[0])


def test_a_pin_beyond_max_to_keep_moves_by_hard_link_and_the_kept_dir_is_a_checkpoint_dir(tmp_path):
    d = make(tmp_path / "run", range(1, 7))
    inode = (d / "ckpt-2.data-00000-of-00001").stat().st_ino
    r = P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert idx(d) == ["ckpt-5", "ckpt-6"] and idx(d / "kept") == ["ckpt-2"]
    assert (d / "kept" / "ckpt-2.data-00000-of-00001").stat().st_ino == inode
    assert r.moved == [{"from": str(d / "ckpt-2"), "to": str(d / "kept" / "ckpt-2"), "how": "hard link",
                        "bytes_copied": 0}] and r.bytes_freed > 0
    assert r.reasons[str(d / "kept" / "ckpt-2")] == ["pinned"] and str(d / "kept" / "ckpt-2") in r.kept
    st = read_state(str(d / "kept"))
    assert st.model_checkpoint_path == "ckpt-2" and st.all_model_checkpoint_timestamps == [T0 + 60]
    assert read_state(str(d)).all_model_checkpoint_paths == ["ckpt-5", "ckpt-6"]
    assert value(d / "kept" / "ckpt-2") == 2.0 and not (d / ".ckptool-prune-pending").exists()
    # the pin keeps naming it where it is now; nothing changes on the next run
    r = P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert not r.deleted and not r.moved and idx(d / "kept") == ["ckpt-2"]


def test_min_age_keeps_stay_in_place_and_listed(tmp_path):
    d = make(tmp_path / "run", range(1, 5), gap=600.0)
    r = P.prune(str(d), max_to_keep=1, min_age=1000, now=T0 + 1800 + 60)
    assert idx(d) == ["ckpt-3", "ckpt-4"] and not (d / "kept").exists() and not r.moved


def test_a_damaged_pin_stays_where_it_is(tmp_path):
    d = make(tmp_path / "run", range(1, 6))
    os.truncate(d / "ckpt-2.data-00000-of-00001", 3)
    r = P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert "ckpt-2" in idx(d) and not r.moved and [x["path"] for x in r.damaged] == [str(d / "ckpt-2")]
    assert not r.linked and not list((d / "kept").glob("ckpt-2*"))  # never into kept/: not moved, nor linked


def test_a_name_taken_in_kept_by_another_checkpoint_is_never_overwritten(tmp_path):
    d = make(tmp_path / "run", range(1, 6))
    other = d / "kept" / "ckpt-2"
    ckptool.write(str(other), {"w": np.full(16, 99.0, np.float32)}, sync=False)  # e.g. an earlier run's ckpt-2
    r = P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert value(other) == 99.0 and value(d / "kept" / "ckpt.2-2") == 2.0
    assert [(m["from"], m["to"]) for m in r.moved] == [(str(d / "ckpt-2"), str(d / "kept" / "ckpt.2-2"))]
    assert sorted(read_state(str(d / "kept")).all_model_checkpoint_paths) == ["ckpt-2", "ckpt.2-2"]


def test_across_devices_the_files_are_copied(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 6))
    real = os.link

    def link(src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        if src_dir_fd != dst_dir_fd:  # DIR -> kept/: another file system
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(keptdir.os, "link", link)
    inode = (d / "ckpt-2.index").stat().st_ino
    P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert (d / "kept" / "ckpt-2.index").stat().st_ino != inode and value(d / "kept" / "ckpt-2") == 2.0
    assert idx(d) == ["ckpt-4", "ckpt-5"] and not [p for p in (d / "kept").iterdir() if "tempstate" in p.name]


class Killed(BaseException):
    """SIGKILL, as far as the code under test can tell: nothing after it runs."""


@pytest.mark.parametrize("where", ["place_file:index", "write_journal", "update_state", "release", "delete"])
def test_a_prune_killed_at_each_step_is_finished_by_the_next(tmp_path, monkeypatch, where):
    d = make(tmp_path / "run", range(1, 9))
    args = dict(max_to_keep=2, keep=("ckpt-2",), keep_steps_every=4, now=T0 + 9999)
    with monkeypatch.context() as mp:
        if where == "place_file:index":
            real_place = keptdir.place_file

            def place(d_, kept, name, kept_name, **kw):
                if kept_name.endswith(".index") and kept_name.startswith("ckpt-4"):
                    raise Killed
                return real_place(d_, kept, name, kept_name, **kw)

            mp.setattr(deletion, "place_file", place)
        elif where == "delete":
            mp.setattr(P, "delete_checkpoints", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        else:
            mp.setattr(P, where, lambda *a, **k: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            P.prune(str(d), **args)
    for name in ("ckpt-2", "ckpt-4", "ckpt-7", "ckpt-8"):  # never lost at any point
        assert (d / f"{name}.index").exists() or (d / "kept" / f"{name}.index").exists(), (where, name)
    P.prune(str(d), **args)
    assert idx(d) == ["ckpt-7", "ckpt-8"] and idx(d / "kept") == ["ckpt-2", "ckpt-4", "ckpt-8"], where
    assert (d / "kept" / "ckpt-8.index").stat().st_ino == (d / "ckpt-8.index").stat().st_ino  # linked: in window
    assert not (d / ".ckptool-prune-pending").exists()
    assert read_state(str(d / "kept")).all_model_checkpoint_paths == ["ckpt-2", "ckpt-4", "ckpt-8"]
    for name in ("ckpt-2", "ckpt-4"):
        assert value(d / "kept" / name) == float(name[-1])


def test_a_journaled_move_is_finished_by_rm_too(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 6))
    with monkeypatch.context() as mp:
        mp.setattr(P, "release", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert (d / "ckpt-2.index").exists() and json.loads((d / ".ckptool-prune-pending").read_text())["move"]
    from ckptool.ops.retain.rm import rm

    rm([str(d / "ckpt-4")])
    assert not (d / "ckpt-2.index").exists() and value(d / "kept" / "ckpt-2") == 2.0


def test_kept_is_pruned_only_by_a_policy_given_for_it(tmp_path, capsys):
    d = make(tmp_path / "root" / "run", range(1, 9))
    (tmp_path / "root" / ".ckptool.toml").write_text("max_to_keep = 1\nkeep_steps_every = 2\n")
    res = F.prune_tree(str(tmp_path / "root"), now=T0 + 9999)  # the inherited policy moves 2, 4, 6 there
    assert idx(d / "kept") == ["ckpt-2", "ckpt-4", "ckpt-6", "ckpt-8"] and str(d) in res.runs
    res = F.prune_tree(str(tmp_path / "root"), now=T0 + 9999)  # ... and never prunes kept/ as a run
    assert res.kept_dirs == [str(d / "kept")] and idx(d / "kept") == ["ckpt-2", "ckpt-4", "ckpt-6", "ckpt-8"]
    res = F.prune_tree(str(tmp_path / "root"), max_to_keep=1, now=T0 + 9999)  # a flag is no policy on it either
    assert idx(d / "kept") == ["ckpt-2", "ckpt-4", "ckpt-6", "ckpt-8"]
    code, out, err = run(capsys, "prune", d / "kept")  # no flag: the default 5 is no policy for kept/
    assert code == 0 and idx(d / "kept") == ["ckpt-2", "ckpt-4", "ckpt-6", "ckpt-8"]
    code, out, err = run(capsys, "prune", d / "kept", "--max-to-keep", "2")
    assert code == 0, err
    assert idx(d / "kept") == ["ckpt-6", "ckpt-8"] and not (d / "kept" / "kept").exists()
    (d / "kept" / ".ckptool.toml").write_text("max_to_keep = 1\n")
    res = F.prune_tree(str(tmp_path / "root"), now=T0 + 9999)
    assert idx(d / "kept") == ["ckpt-8"] and str(d / "kept") in res.runs


def test_kept_is_part_of_the_run_for_verify_du_inspect_and_pins(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 6))
    P.prune(str(d), max_to_keep=2, keep=("ckpt-1",), now=T0 + 9999)
    code, out, err = run(capsys, "verify", d)
    assert code == 0 and str(d / "kept" / "ckpt-1") in out and out.count("ok ") == 3
    os.truncate(d / "kept" / "ckpt-1.data-00000-of-00001", 5)
    code, out, err = run(capsys, "verify", d)
    assert code == 1 and f"DAMAGED  {d / 'kept' / 'ckpt-1'}" in out
    (rows,) = du(str(tmp_path))
    assert rows.directory == str(d) and rows.checkpoints == 3 and rows.kept_checkpoints == 1
    code, out, err = run(capsys, "inspect", d, "--json")
    entries = json.loads(out)["state"]["entries"]
    assert [e["path"] for e in entries if e["status"] == "in kept/"] == ["kept/ckpt-1"]
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep", "ckpt-1")  # still names it
    assert code == 0, err


def test_keep_best_counts_what_kept_holds(tmp_path):
    from ckptool.ops.retain.keep_best import BestSpec

    d = make(tmp_path / "run", range(1, 6))
    m = tmp_path / "m.jsonl"
    m.write_text("".join(json.dumps({"step": s, "loss": float(s)}) + "\n" for s in range(1, 20)))
    P.prune(str(d), max_to_keep=1, best=BestSpec(1, "loss", "min", str(m)), now=T0 + 9999)
    assert idx(d / "kept") == ["ckpt-1"]
    for s in (6, 7, 8):  # worse than ckpt-1 in kept/: none of them is kept as best
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(16, s, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"ckpt-{s}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + s)
    r = P.prune(str(d), max_to_keep=1, best=BestSpec(1, "loss", "min", str(m)), now=T0 + 9999)
    assert r.best["best"][0]["checkpoint"] == "kept/ckpt-1" and idx(d) == ["ckpt-8"]
    assert idx(d / "kept") == ["ckpt-1"]


def test_on_an_object_store_kept_checkpoints_are_copied_then_the_originals_deleted():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    root = "memory://trust-kept/run"
    for s in range(1, 6):
        ckptool.write(f"{root}/ckpt-{s}", {"w": np.full(16, s, np.float32)})
    names = [f"ckpt-{s}" for s in range(1, 6)]
    fs.pipe_file("/trust-kept/run/checkpoint", CheckpointState(names[-1], names, [T0 + s for s in range(5)],
                                                                T0 - 1).to_text().encode())
    try:
        r = P.prune(root, max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
        assert [(m["from"], m["to"], m["how"]) for m in r.moved] == [(f"{root}/ckpt-2", f"{root}/kept/ckpt-2", "copy")]
        assert not fs.exists("/trust-kept/run/ckpt-2.index") and fs.exists("/trust-kept/run/kept/ckpt-2.index")
        assert value(f"{root}/kept/ckpt-2") == 2.0
        assert read_state(root + "/kept", P.storage_for(root)[0]).all_model_checkpoint_paths == ["ckpt-2"]
    finally:
        fs.rm("/trust-kept", recursive=True)


def test_a_refused_prune_leaves_no_lock_file(tmp_path, capsys):
    """Issue 40: validated before the lock is taken."""
    d = tmp_path / "nostate"
    d.mkdir()
    ckptool.write(str(d / "ckpt-1"), {"w": np.zeros(2, np.float32)}, sync=False)
    code, out, err = run(capsys, "prune", d)
    assert code == 1 and "no 'checkpoint' state file" in err and not (d / ".ckptool.lock").exists()
    d = make(tmp_path / "run", [1, 2])
    for argv in (["--keep", "ckpt-9"], ["--keep-best", "1", "--metric", "loss", "--metrics", str(tmp_path / "no")]):
        code, out, err = run(capsys, "prune", d, *argv)
        assert code == 1, err
    (d / ".ckptool.toml").write_text("keep_best = 2\n")
    code, out, err = run(capsys, "prune", d)
    assert code == 1 and "metric" in err
    (d / ".ckptool.toml").write_text("max_to_keep = 'x'\n")
    code, out, err = run(capsys, "prune", d)
    assert code == 1
    assert not (d / ".ckptool.lock").exists()


def test_a_journaled_move_goes_only_once_kept_holds_it(tmp_path, monkeypatch):
    """Killed after the journal and the state file, before DIR's names went; then kept/ lost its
    copy (someone removed it): the next prune links it there again before DIR's names go."""
    d = make(tmp_path / "run", range(1, 6))
    with monkeypatch.context() as mp:
        mp.setattr(P, "release", lambda *a, **k: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    for f in (d / "kept").glob("ckpt-2.*"):
        f.unlink()
    P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert value(d / "kept" / "ckpt-2") == 2.0 and not (d / "ckpt-2.index").exists()


def test_a_cron_run_that_changes_nothing_says_nothing(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 7))
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep-steps-every", "3")
    assert code == 0 and "moved" in err and "ckpt-6" in err  # ckpt-3 moved, ckpt-6 linked (still among the 2)
    state = (d / "kept" / "checkpoint").read_bytes()
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep-steps-every", "3")
    assert code == 0 and out == "" and err == ""  # kept/ holds them already: nothing to say
    assert (d / "kept" / "checkpoint").read_bytes() == state  # nor rewritten
    r = P.prune(str(d), max_to_keep=2, keep_steps_every=3, dry_run=True)
    assert not r.linked and not r.moved


def _cross_device(mp):
    """kept/ on another file system: os.link from DIR into kept/ fails with EXDEV (the copy path)."""
    real = os.link

    def link(src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        if src_dir_fd != dst_dir_fd:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)

    mp.setattr(keptdir.os, "link", link)


def _resave(d, step, value):
    """A restarted trainer saves checkpoint ``step`` again, with other values (same sizes): new
    files renamed over the old names, as TF does."""
    tmp = d.parent / f"resave-{step}"
    ckptool.write(str(tmp / f"ckpt-{step}"), {"w": np.full(16, value, np.float32)}, sync=False)
    for f in sorted(tmp.iterdir(), key=lambda p: p.name.endswith(".index")):  # data first, the index last
        os.replace(f, d / f.name)
    tmp.rmdir()


@pytest.mark.parametrize("how", ["copy", "hard link"])
def test_a_leftover_of_a_killed_copy_is_never_taken_for_a_resaved_checkpoint(tmp_path, monkeypatch, capsys, how):
    """Issue 49, item 1: killed after ckpt-2's data reached kept/ but before its index; the trainer
    saves ckpt-2 again with other values; the next prune must not pair the old data with the new
    index: kept/ckpt-2 verifies and holds the new values before DIR's ckpt-2 goes."""
    d = make(tmp_path / "run", range(1, 6))
    with monkeypatch.context() as mp:
        if how == "copy":
            _cross_device(mp)
        real_place = keptdir.place_file

        def place(d_, kept, name, kept_name, **kw):
            if kept_name == "ckpt-2.index":
                raise Killed
            return real_place(d_, kept, name, kept_name, **kw)

        mp.setattr(deletion, "place_file", place)
        with pytest.raises(Killed):
            P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert (d / "kept" / "ckpt-2.data-00000-of-00001").exists() and not (d / "kept" / "ckpt-2.index").exists()
    _resave(d, 2, 42.0)
    with monkeypatch.context() as mp:
        if how == "copy":
            _cross_device(mp)
        code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep", "ckpt-2", "--json")
    assert code == 0, err
    doc = json.loads(out)
    size = sum(f.stat().st_size for f in (d / "kept").glob("ckpt-2.*"))
    assert doc["moved"] == [{"from": str(d / "ckpt-2"), "to": str(d / "kept" / "ckpt-2"), "how": how,
                             "bytes_copied": size if how == "copy" else 0}]
    assert idx(d / "kept") == ["ckpt-2"] and value(d / "kept" / "ckpt-2") == 42.0
    code, out, err = run(capsys, "verify", d / "kept" / "ckpt-2")
    assert code == 0, out + err
    assert not (d / "ckpt-2.index").exists() and idx(d) == ["ckpt-4", "ckpt-5"]


def test_a_copy_in_kept_whose_data_is_not_its_index_is_repaired_before_the_original_goes(tmp_path, monkeypatch,
                                                                                          capsys):
    """What the old rule made of the case above (old data beside the new index in kept/, a complete
    checkpoint there that fails verify): taken as this checkpoint's by its index and sizes, it is
    proven byte for byte first; the data that differs is replaced (its index first), then DIR's go.
    The table says how it was placed: a copy, and its size."""
    d = make(tmp_path / "run", range(1, 6))
    (d / "kept").mkdir()
    os.link(d / "ckpt-2.data-00000-of-00001", d / "kept" / "ckpt-2.data-00000-of-00001")  # the old values
    _resave(d, 2, 42.0)
    os.link(d / "ckpt-2.index", d / "kept" / "ckpt-2.index")
    with monkeypatch.context() as mp:
        _cross_device(mp)
        code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep", "ckpt-2")
    assert code == 0, err
    size = sum(f.stat().st_size for f in (d / "kept").glob("ckpt-2.*"))  # placed again whole: index and data
    assert f"{d / 'kept' / 'ckpt-2'} (kept out of the trainer's reach, copy, {size:,} bytes)" in err
    assert "hard link" not in out + err
    assert value(d / "kept" / "ckpt-2") == 42.0 and not (d / "ckpt-2.index").exists()
    code, out, err = run(capsys, "verify", d / "kept" / "ckpt-2")
    assert code == 0, out + err


def test_a_kill_between_the_links_never_leaves_an_index_without_its_data_in_kept(tmp_path, monkeypatch):
    """The data files get their names in kept/ first, the index last: killed after the first name
    was made, kept/ holds no index (nothing there claims to be a checkpoint it is not)."""
    d = make(tmp_path / "run", range(1, 6))
    real_place = keptdir.place_file
    made = []

    def place(d_, kept, name, kept_name, **kw):
        if made:
            raise Killed
        made.append(kept_name)
        return real_place(d_, kept, name, kept_name, **kw)

    with monkeypatch.context() as mp:
        mp.setattr(deletion, "place_file", place)
        with pytest.raises(Killed):
            P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert made == ["ckpt-2.data-00000-of-00001"] and not list((d / "kept").glob("*.index"))
    P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert idx(d / "kept") == ["ckpt-2"] and value(d / "kept" / "ckpt-2") == 2.0 and "ckpt-2" not in idx(d)


def _tf1_keeps(times, start, k, n):
    """TF1 Saver(max_to_keep=k, keep_checkpoint_every_n_hours=n/3600) started at ``start``, saving at
    ``times``: the indices it leaves (tensorflow/python/training/saver.py, _MaybeDeleteOldCheckpoints:
    one popped per save beyond k, kept when its time is after the next keep time, which then moves N on)."""
    next_keep, kept, window = start + n, [], []
    for i, t in enumerate(times):
        window.append((i, t))
        if len(window) > k:
            j, tj = window.pop(0)
            if tj > next_keep:
                next_keep += n
                kept.append(j)
    return sorted(kept + [j for j, _ in window])


@pytest.mark.parametrize("every", [1, 2, 3])
def test_tf1_every_n_hours_clock_is_carried_across_runs(tmp_path, every):
    """A TF1 Saver's state file (no timestamps, rewritten at every save, listing its newest 50)
    pruned after every ``every`` saves: the every-N-hours clock lives in DIR/kept/ between runs,
    so what survives (DIR and kept/) is what TF's own arithmetic keeps."""
    d = tmp_path / "run"
    d.mkdir()
    k, n, gap = 2, 3.0, 1.2
    times = [T0 + 0.05 + i * gap for i in range(20)]
    for i, t in enumerate(times):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.full(16, i, np.float32)}, sync=False)
        for f in d.glob(f"ckpt-{i}.*"):
            os.utime(f, (t, t))
        names = [str(d / f"ckpt-{j}") for j in range(max(0, i - 49), i + 1)]  # absolute, as TF1 writes
        (d / "checkpoint").write_text(f'model_checkpoint_path: "{names[-1]}"\n'
                                      + "".join(f'all_model_checkpoint_paths: "{p}"\n' for p in names))
        if i % every == every - 1 or i == len(times) - 1:
            P.prune(str(d), max_to_keep=k, keep_every_n_hours=n / 3600, now=t + 0.1)
    want = [f"ckpt-{i}" for i in _tf1_keeps(times, T0 + 0.05, k, n)]
    assert len(want) > k + 4
    assert sorted(idx(d) + idx(d / "kept")) == sorted(want)


def _saver_run(d, steps, times, k, n, listed=50):
    """A TF1 Saver saving ``steps`` at ``times`` (its state file: no timestamps, its own checkpoints
    only), pruned after every save with max_to_keep ``k`` and every ``n`` seconds."""
    for j, (i, t) in enumerate(zip(steps, times)):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.full(16, i, np.float32)}, sync=False)
        for f in d.glob(f"ckpt-{i}.*"):
            os.utime(f, (t, t))
        names = [str(d / f"ckpt-{s}") for s in steps[max(0, j - listed + 1):j + 1]]
        (d / "checkpoint").write_text(f'model_checkpoint_path: "{names[-1]}"\n'
                                      + "".join(f'all_model_checkpoint_paths: "{p}"\n' for p in names))
        P.prune(str(d), max_to_keep=k, keep_every_n_hours=n / 3600, now=t + 0.1)


def test_a_saver_started_again_starts_its_clock_again(tmp_path):
    """A new Saver (a restarted trainer) lists only its own checkpoints and starts its every-N-hours
    clock at its construction: the clock carried from the last run (a day old) is dropped once the
    state file no longer names the latest that run saw, still on disk; the new run's keeps are
    TF's arithmetic from its first checkpoint (not one preserved at every save until the old
    clock catches up)."""
    d = tmp_path / "run"
    d.mkdir()
    k, n = 2, 3.0
    first = [T0 + 0.05 + i * 1.2 for i in range(8)]
    _saver_run(d, list(range(8)), first, k, n)
    assert sorted(idx(d) + idx(d / "kept")) == sorted(f"ckpt-{i}" for i in _tf1_keeps(first, T0 + 0.05, k, n))
    later = [T0 + 86400 + 0.05 + i * 1.2 for i in range(12)]
    _saver_run(d, list(range(100, 112)), later, k, n)
    new = sorted(b for b in idx(d) + idx(d / "kept") if int(b.split("-")[1]) >= 100)
    assert new == sorted(f"ckpt-{100 + i}" for i in _tf1_keeps(later, T0 + 86400 + 0.05, k, n))
    assert "ckpt-7" in idx(d)  # the first run's latest: unlisted now, never deleted


def test_a_damaged_clock_file_starts_the_clock_again(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 4))
    (d / "kept").mkdir()
    (d / "kept" / ".ckptool-clock").write_text("[" * 100_000 + "]" * 100_000)
    assert keptdir.read_clock(P.storage_for(str(d))[0], engine_dir(d)) is None
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--keep-every-n-hours", "1")
    assert code == 0, err


def engine_dir(d):
    from ckptool.io.safety.dirfd import LocalDir

    return LocalDir(str(d))
