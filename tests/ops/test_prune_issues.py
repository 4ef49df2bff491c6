"""The defects of issues 17, 18, 20 and 22 in prune / du / state / save, one test each."""

import errno
import json
import os
import shutil

import numpy as np
import pytest
from lockholder import lock_held_elsewhere

import ckptool
from ckptool.errors import CkptError
from ckptool.io.base import ANY
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.io.oserrors import os_error
from ckptool.io.safety import dirfd
from ckptool.ops.retain import prune as P
from ckptool.ops.retain import retention as R
from clirun import run

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
T0 = 1_700_000_000.0


def make(d, steps, *, gap=60.0, state=True):
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(64, s, np.float32)}, sync=False)
        t = T0 + i * gap
        for f in d.glob(f"ckpt-{s}.*"):
            os.utime(f, (t, t))
    if state:
        paths = [f"ckpt-{s}" for s in steps]
        write_state(str(d), CheckpointState(paths[-1], paths, [T0 + i * gap for i in range(len(steps))], T0 - 1))
    return d


def indexes(d):
    """The checkpoints that survive, in DIR or in DIR/kept/ (where prune moves what it keeps beyond
    the newest max_to_keep, out of a running trainer's reach)."""
    return sorted({p.name[:-6] for p in [*d.glob("*.index"), *d.glob("kept/*.index")]})


def tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.name != ".ckptool.lock")


# --------------------------------------------------------------------------- issue 17


def test_sidecars_survive_prune_cli(tmp_path, capsys):
    d = make(tmp_path / "runs", [1, 2])
    for n in ("ckpt-1.notes.txt", "ckpt-1.json", "ckpt-1.index.bak"):
        (d / n).write_text("mine")
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 0, err
    assert indexes(d) == ["ckpt-2"] and not (d / "ckpt-1.data-00000-of-00001").exists()
    for n in ("ckpt-1.notes.txt", "ckpt-1.json", "ckpt-1.index.bak"):
        assert (d / n).read_text() == "mine"


def test_plain_prune_honours_the_policy_file_and_its_pins(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 7))
    (d / ".ckptool.toml").write_text('max_to_keep = 2\nkeep = ["ckpt-1"]\n')
    code, out, err = run(capsys, "prune", d)  # the flag default (5) yields to the file
    assert code == 0, err
    assert indexes(d) == ["ckpt-1", "ckpt-5", "ckpt-6"]


def test_a_broken_policy_file_stops_prune_and_deletes_nothing(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 7))
    (d / ".ckptool.toml").write_text("max_to_keep = = 2\n")
    before = tree(d)
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 1 and err.startswith("ckptool: error:") and ".ckptool.toml" in err
    assert tree(d) == before


def test_a_moved_tf1_directory_is_pruned_without_scan(tmp_path, capsys):
    d = tmp_path / "moved"
    shutil.copytree(os.path.join(DATA, "tf1_saver"), d)  # its state: absolute paths of /tmp/ckptool-fixture-gen
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 0, err
    assert indexes(d) == ["model.ckpt-30"] and not (d / "model.ckpt-10.meta").exists()
    assert "moved directory" in err
    st = read_state(str(d))
    assert st.model_checkpoint_path == "model.ckpt-30" and st.all_model_checkpoint_paths == ["model.ckpt-30"]
    code, out, err = run(capsys, "inspect", d, "--json")
    assert code == 0, err


def _v1_dir(d):
    d.mkdir()
    single = os.path.join(DATA, "v1", "single")
    for i in (1, 2, 3):
        shutil.copy(os.path.join(single, "v1ckpt"), d / f"model.ckpt-{i}")
        shutil.copy(os.path.join(single, "v1ckpt.meta"), d / f"model.ckpt-{i}.meta")
        os.utime(d / f"model.ckpt-{i}", (T0 + i, T0 + i))
    (d / "model.ckpt-3.notes.txt").write_text("mine")
    return d


def test_v1_checkpoints_are_counted_by_du_prune_and_state_rebuild(tmp_path, capsys):
    d = _v1_dir(tmp_path / "v1")
    code, out, err = run(capsys, "state", d, "--rebuild", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["all_model_checkpoint_paths"] == ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
    code, out, err = run(capsys, "state", d, "--rebuild")
    assert code == 0, err
    code, out, err = run(capsys, "du", d, "--json")
    assert code == 0, err
    doc = json.loads(out)["directories"][0]
    assert doc["checkpoints"] == 3 and doc["bytes"] == 3 * (597 + 11342)
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 0, err
    assert tree(d) == ["checkpoint", "model.ckpt-3", "model.ckpt-3.meta", "model.ckpt-3.notes.txt"]
    # a sharded V1 checkpoint: its shards and meta are one checkpoint
    s = tmp_path / "sharded"
    shutil.copytree(os.path.join(DATA, "v1", "sharded"), s)
    code, out, err = run(capsys, "du", s, "--json")
    assert json.loads(out)["directories"][0]["checkpoints"] == 1


def test_state_json_and_rebuild_dry_run_json_have_one_shape(tmp_path, capsys):
    d = make(tmp_path / "run", [1, 2])
    code, shown, err = run(capsys, "state", d, "--json")
    code2, rebuilt, err2 = run(capsys, "state", d, "--rebuild", "--dry-run", "--json")
    code3, rel, err3 = run(capsys, "state", d, "--relative", "--dry-run", "--json")
    assert code == code2 == code3 == 0
    a, b, c = json.loads(shown), json.loads(rebuilt), json.loads(rel)
    assert set(a) == set(b) == set(c)
    assert {k for e in a["entries"] for k in e} == {k for e in b["entries"] for k in e}
    assert a["entries"] == c["entries"]
    assert [e["step"] for e in b["entries"]] == [1, 2] and all(e["exists"] for e in b["entries"])


# --------------------------------------------------------------------------- issue 22


def test_a_text_file_named_index_is_no_checkpoint(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3], state=False)
    for n in ("notes.index", "notes.txt", "notes.md", "notes.data-00000-of-00001"):
        (d / n).write_text("not a checkpoint " * 10)
    P.prune(str(d), max_to_keep=1, scan=True)
    assert sorted(p.name for p in d.glob("notes*")) == ["notes.data-00000-of-00001", "notes.index", "notes.md",
                                                        "notes.txt"]
    assert indexes(d) == ["ckpt-3", "notes"]


@pytest.mark.parametrize("form", ["ckpt-2", "{d}/ckpt-2", "ckpt-2.index", "{abs}/ckpt-2", "{d}/ckpt-2.index",
                                  "{d}/ckpt-2.data-00000-of-00001"])
def test_keep_accepts_every_checkpoint_form(tmp_path, capsys, form):
    d = make(tmp_path / "run", range(1, 6))
    pin = form.format(d=d, abs=os.path.abspath(d))
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--keep", pin)
    assert code == 0, err
    assert indexes(d) == ["ckpt-2", "ckpt-5"]


def test_a_pin_naming_no_checkpoint_of_dir_is_an_error(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 4))
    other = make(tmp_path / "other", [2])
    for pin in ("ckpt-9", str(other / "ckpt-2")):
        code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--keep", pin)
        assert code == 1 and "--keep" in err and pin in err
        assert indexes(d) == ["ckpt-1", "ckpt-2", "ckpt-3"]


def test_a_directory_swapped_for_a_symlink_after_the_walk_redirects_nothing(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 4))
    outside = make(tmp_path / "outside", range(1, 4))
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    real = P.scan

    def scan_then_swap(handle):
        out = real(handle)
        if not (tmp_path / "run.real").exists():
            os.rename(d, tmp_path / "run.real")
            os.symlink(outside, d)
        return out

    monkeypatch.setattr(P, "scan", scan_then_swap)
    P.prune(str(d), max_to_keep=1)
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    assert indexes(tmp_path / "run.real") == ["ckpt-3"]


def test_recursive_one_file_system_and_follow_symlinks(tmp_path, capsys):
    root = tmp_path / "root"
    make(root / "a", range(1, 4))
    target = make(tmp_path / "elsewhere", range(1, 4))
    os.symlink(target, root / "link")
    code, out, err = run(capsys, "prune", root, "-r", "--max-to-keep", "1", "--one-file-system")
    assert code == 0, err
    assert indexes(root / "a") == ["ckpt-3"] and indexes(target) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    code, out, err = run(capsys, "prune", root, "-r", "--max-to-keep", "1", "--follow-symlinks")
    assert code == 0, err
    assert indexes(target) == ["ckpt-3"]
    code, out, err = run(capsys, "prune", root, "--one-file-system")
    assert code == 2


def _undeletable(monkeypatch, name):
    real = dirfd.LocalDir.unlink

    def unlink(self, n):
        if n == name:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real(self, n)

    monkeypatch.setattr(dirfd.LocalDir, "unlink", unlink)


def test_one_undeletable_file_does_not_wedge_the_directory(tmp_path, capsys, monkeypatch):
    d = make(tmp_path / "run", range(1, 6))
    _undeletable(monkeypatch, "ckpt-2.index")
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--json")
    assert code == 1 and "ckpt-2.index" in err and "cannot delete" in err
    doc = json.loads(out)
    assert [f["path"] for f in doc["failed"]] == [str(d / "ckpt-2.index")]
    assert indexes(d) == ["ckpt-2", "ckpt-5"]  # the others went
    assert not (d / "ckpt-3.data-00000-of-00001").exists()
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-5"]  # names only what is there
    assert json.loads((d / P.JOURNAL).read_text()) == ["ckpt-2"]
    # later runs (and saves) go on; the file is retried from the journal
    with pytest.warns(Warning, match="ckpt-2.index"):
        r = P.prune(str(d), max_to_keep=1)
    assert not r.failed
    np.savez(tmp_path / "x.npz", w=np.zeros(2))
    code, out, err = run(capsys, "save", d / "ckpt", "--from", tmp_path / "x.npz", "--global-step", "6")
    assert code == 0, err
    monkeypatch.undo()
    P.prune(str(d), max_to_keep=1)
    assert indexes(d) == ["ckpt-6"] and not (d / P.JOURNAL).exists()


def test_a_full_disk_still_frees_space_and_leaves_a_valid_state(tmp_path, monkeypatch):
    d = make(tmp_path / "run", range(1, 6))
    real_replace, real_unlink = dirfd.LocalDir.replace, dirfd.LocalDir.unlink
    freed = []

    def replace(self, name, data, expect=ANY):
        if not freed:
            try:
                raise OSError(errno.ENOSPC, "No space left on device")
            except OSError as exc:
                raise os_error(self.join(name), exc, "write") from exc
        return real_replace(self, name, data, expect)

    def unlink(self, n):
        real_unlink(self, n)
        freed.append(n)

    monkeypatch.setattr(dirfd.LocalDir, "replace", replace)
    monkeypatch.setattr(dirfd.LocalDir, "unlink", unlink)
    r = P.prune(str(d), max_to_keep=2)
    assert indexes(d) == ["ckpt-4", "ckpt-5"] and r.bytes_freed > 0
    st = read_state(str(d))
    assert st.all_model_checkpoint_paths == ["ckpt-4", "ckpt-5"] and st.model_checkpoint_path == "ckpt-5"
    assert not any(".tmp" in n for n in os.listdir(d))


def test_lock_is_waited_for_and_opened_read_only_with_the_umask(tmp_path, monkeypatch):
    from ckptool.io.control.lock import LOCK_FILENAME, DirLock

    d = make(tmp_path / "run", range(1, 4))
    old = os.umask(0o027)
    try:
        with DirLock(str(d)):
            pass
    finally:
        os.umask(old)
    assert os.stat(d / LOCK_FILENAME).st_mode & 0o777 == 0o640
    os.chmod(d / LOCK_FILENAME, 0o444)  # read-only: another user's lock file
    flags = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, f, *a, **k: flags.append((p, f)) or real_open(p, f, *a, **k))
    with DirLock(str(d)):
        pass
    monkeypatch.undo()
    assert any(p == LOCK_FILENAME or str(p).endswith(LOCK_FILENAME) for p, f in flags)
    assert all(f & (os.O_WRONLY | os.O_RDWR) == 0 for p, f in flags if str(p).endswith(LOCK_FILENAME))
    # a writer waits (bounded) for a prune holding the lock, then proceeds
    with lock_held_elsewhere(d) as release:
        with pytest.raises(CkptError, match="lock"):
            P.prune(str(d), max_to_keep=1, lock_timeout=0.1)
        import threading

        threading.Timer(0.2, release.set).start()
        P.prune(str(d), max_to_keep=1, lock_timeout=30)
    assert indexes(d) == ["ckpt-3"]


def test_hard_linked_files_count_only_when_their_last_link_goes(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 4))
    keep = tmp_path / "other"
    keep.mkdir()
    os.link(d / "ckpt-1.data-00000-of-00001", keep / "shared.data")
    size1 = sum(f.stat().st_size for f in d.glob("ckpt-1.*"))
    data = (d / "ckpt-1.data-00000-of-00001").stat().st_size
    size2 = sum(f.stat().st_size for f in d.glob("ckpt-2.*"))
    dry = P.prune(str(d), max_to_keep=1, dry_run=True)
    assert dry.bytes_freed == size1 - data + size2
    code, out, err = run(capsys, "du", d, "--max-to-keep", "1", "--json")
    assert json.loads(out)["directories"][0]["would_free"] == dry.bytes_freed
    r = P.prune(str(d), max_to_keep=1)
    assert r.bytes_freed == dry.bytes_freed


class _Counted(str):
    ops = [0]

    def __eq__(self, other):
        _Counted.ops[0] += 1
        return str.__eq__(self, other)

    def __hash__(self):
        _Counted.ops[0] += 1
        return str.__hash__(self)


def _retention_ops(n):
    from ckptool.io.layout.listing import DirListing
    from ckptool.ops.retain.prune_plan import make_plan

    names = [_Counted(f"ckpt-{i}") for i in range(1, n + 1)]
    st = CheckpointState(names[-1], names, [T0 + i for i in range(n)], T0 - 1)
    listing = DirListing("d", complete=set(names))
    _Counted.ops[0] = 0
    R.plan([R.Entry(x, T0 + i) for i, x in enumerate(names)], R.Policy(1, 0.001), T0 - 1, T0 + n)
    make_plan(ckptool.io.backends.local.LOCAL, "d", st, listing, R.Policy(1, 0.001), T0 + n, False, None)
    make_plan(ckptool.io.backends.local.LOCAL, "d", st, listing, R.Policy(1), T0 + n, True, None)
    return _Counted.ops[0]


def test_retention_is_linear_in_operations():
    import ckptool.io.backends.local  # noqa: F401

    small, big = _retention_ops(500), _retention_ops(4000)
    assert big <= 8 * small * 1.5, (small, big)  # quadratic would be 64x


# --------------------------------------------------------------------------- issues 18 and 20


def test_prune_with_nothing_to_delete_prints_nothing(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 4))
    code, out, err = run(capsys, "prune", d)
    assert code == 0 and out == "" and err == ""
    code, out, err = run(capsys, "prune", d, "--dry-run")
    assert code == 0 and "ckpt-1" in out
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 0 and "deleted" in out


def test_seven_saves_leave_seven_checkpoints_unless_asked(tmp_path, capsys):
    np.savez(tmp_path / "w.npz", w=np.zeros(3, np.float32))
    out_dir = tmp_path / "out"
    for i in range(1, 8):
        code, out, err = run(capsys, "save", out_dir / "ckpt", "--from", tmp_path / "w.npz", "--global-step", i)
        assert code == 0, err
    assert len(indexes(out_dir)) == 7 and len(read_state(str(out_dir)).all_model_checkpoint_paths) == 7
    (out_dir / ".ckptool.toml").write_text("max_to_keep = 3\n")
    code, out, err = run(capsys, "save", out_dir / "ckpt", "--from", tmp_path / "w.npz", "--global-step", 8)
    assert code == 0, err
    assert indexes(out_dir) == ["ckpt-6", "ckpt-7", "ckpt-8"]


def test_du_shows_temp_files_and_clean_temp_deletes_only_old_ones(tmp_path, capsys):
    d = make(tmp_path / "run", range(1, 3))
    old, young = d / "ckpt-3.data-00000-of-00001.tempstate123", d / "ckpt-3.index.tempstate123"
    old.write_bytes(b"x" * 1000)
    young.write_bytes(b"y" * 10)
    (d / "ckpt-4_temp").mkdir()
    (d / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"z" * 100)
    (d / "checkpoint.tmp0123abcd").write_bytes(b"s")
    now = os.stat(young).st_mtime
    for p in (old, d / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001", d / "ckpt-4_temp",
              d / "checkpoint.tmp0123abcd"):
        os.utime(p, (now - 7200, now - 7200))
    code, out, err = run(capsys, "du", d, "--json")
    doc = json.loads(out)["directories"][0]
    assert doc["temp_files"] == 4 and doc["temp_bytes"] == 1111 and doc["checkpoints"] == 2
    code, out, err = run(capsys, "du", d)
    assert "TEMP" in out
    r = P.prune(str(d), clean_temp=True, dry_run=True, now=now)
    assert sorted(os.path.basename(p) for p in r.temp_deleted) == sorted(
        [old.name, "ckpt-4_temp", "checkpoint.tmp0123abcd"])
    assert old.exists()
    r = P.prune(str(d), clean_temp=True, now=now)
    assert sorted(os.listdir(d)) == sorted([".ckptool.lock", "checkpoint", young.name] + [
        f"ckpt-{i}{s}" for i in (1, 2) for s in (".index", ".data-00000-of-00001")])


def test_a_plan_from_a_state_a_trainer_rewrote_meanwhile_is_refused_as_stale(tmp_path, monkeypatch):
    """prune read the state file, then a trainer saved and rotated out everything it listed:
    the plan would keep nothing on disk. Said as what it is (the state changed: run again),
    not as a policy that deletes every checkpoint; nothing is deleted."""
    from ckptool.errors import RefusedError
    from ckptool.ops.retain import prune as P

    d = tmp_path / "run"
    for step in (1, 2, 3):
        ckptool.write(str(d / f"ckpt-{step}"), {"w": np.zeros(2)})
    (d / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-1"\n'
                                  'all_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-3"\n')
    def refused_after_a_save(*args, **kw):  # the state file rewritten between prune's read and its plan
        (d / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')
        raise RefusedError("refusing a policy that would delete every checkpoint")

    monkeypatch.setattr(P, "make_plan", refused_after_a_save)
    with pytest.raises(RefusedError, match="the state file changed while prune read the directory"):
        P.prune(str(d), max_to_keep=1)
    assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-1.index", "ckpt-2.index", "ckpt-3.index"]


def test_a_checkpoint_a_trainer_is_deleting_is_not_called_damaged(tmp_path, monkeypatch):
    """CheckpointManager.save writes the state file still listing a rotated-out checkpoint,
    then deletes its files one by one: caught in between, it looks damaged. prune looks again
    after a moment; files that changed meanwhile are a sweep, not damage: refused as a stale
    read (run again), nothing deleted, no damage reported."""
    from ckptool.errors import RefusedError
    from ckptool.ops.retain import prune as P

    d = tmp_path / "run"
    for step in (1, 2, 3):
        ckptool.write(str(d / f"ckpt-{step}"), {"w": np.zeros(2)})
    (d / "checkpoint").write_text('model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-1"\n'
                                  'all_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-3"\n')
    (d / "ckpt-2.index").unlink()  # the sweep has begun
    monkeypatch.setattr(P.time, "sleep", lambda s: (d / "ckpt-2.data-00000-of-00001").unlink())  # and ends
    with pytest.raises(RefusedError, match="the state file changed while prune read the directory"):
        P.prune(str(d), max_to_keep=2)
    assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-1.index", "ckpt-3.index"]
