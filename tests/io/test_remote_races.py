"""Object stores, round two (issue 39): the conditional writes behind prune's state update and
the directory's lock object, on S3 (moto's server) and GCS (an emulator), and every remote
operation of the s3 tier on gs:// too: read, verify, save, prune, rm.

Two prunes at once (max 2 and max 8) must not leave a state file naming deleted checkpoints,
and a checkpoint saved while a prune runs keeps its entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from test_remote import DATA, remote_matches_local, same_output, upload

import ckptool
from ckptool.errors import RefusedError
from ckptool.io.backends import remote, remote_cas, remote_lock
from ckptool.io.control.state import read_state

pytest.importorskip("fsspec")


def _make_run(run, root: str, steps, tmp_path) -> str:
    npz = tmp_path / "w.npz"
    np.savez(npz, kernel=np.arange(6, dtype=np.float32), step=np.int64(0))
    for step in steps:
        run("save", f"{root}/run/ckpt", "--from", npz, "--global-step", step)
    return f"{root}/run"


def _listed_exist(url: str) -> tuple[list[str], list[str]]:
    """(the state's checkpoints, those of them whose index is missing)."""
    st = remote.storage_for_url(url)
    state = read_state(url, st)
    names = [p.rsplit("/", 1)[-1] for p in state.all_model_checkpoint_paths]
    files = set(st.listdir(url))
    return names, [n for n in names if n + ".index" not in files]


# --------------------------------------------------------------------------- the conditional write


def test_state_write_is_conditional_on_the_store(store):
    fs, root = store
    st = remote.storage_for_url(root)
    path = f"{root}/c/checkpoint"
    assert st.write_bytes_atomic(path, b"one", expect=None)  # only if absent: it was
    assert not st.write_bytes_atomic(path, b"two", expect=None)  # now it is there
    assert not st.write_bytes_atomic(path, b"two", expect=b"zero")  # not what it holds
    assert st.write_bytes_atomic(path, b"two", expect=b"one")
    raw, token = remote_cas.read(st, path)
    assert raw == b"two" and token is not None
    st.write_bytes_atomic(path, b"three")  # someone else (a trainer) writes meanwhile
    assert remote_cas.put(st, path, b"mine", token) is None  # the store refuses: changed since read
    assert st.read_bytes(path) == b"three"
    assert not remote_cas.delete(st, path, token)
    _, now = remote_cas.read(st, path)
    assert remote_cas.delete(st, path, now) and not st.exists(path)


def test_a_protocol_without_conditional_writes_is_refused_plainly(monkeypatch, tmp_path):
    st = remote.RemoteStorage(None, "ftp")
    with pytest.raises(RefusedError, match="ftp:// offers no conditional write"):
        st.write_bytes_atomic("ftp://h/run/checkpoint", b"x", expect=b"y")
    with pytest.raises(RefusedError, match="offers no conditional write"):
        with st.lock("ftp://h/run"):
            pass


# --------------------------------------------------------------------------- the lock object


def test_lock_object_excludes_names_its_holder_and_is_released(store):
    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/l"
    code = ("import sys, time\nfrom ckptool.io.backends import remote\nst = remote.storage_for_url(sys.argv[1])\n"
            "with st.lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(float(sys.argv[2]))\n")
    holder = subprocess.Popen([sys.executable, "-c", code, d, "4"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RefusedError, match=r"its lock is held by") as err:
            with st.lock(d, timeout=0.5):
                pass
        assert f"PID {holder.pid}" in str(err.value)
        waited = []
        with st.lock(d, timeout=30, on_wait=waited.append):  # waits for the holder to let go
            assert waited and waited[-1] >= 1.0
    finally:
        assert holder.wait(30) == 0
    assert not st.exists(f"{d}/.ckptool.lock")


def test_a_killed_holders_lock_expires_and_is_taken_over(store):
    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/k"
    stale = {"tool": "ckptool", "pid": 1, "host": "gone", "command": "ckptool prune", "expires": time.time() - 1}
    st.write_bytes_atomic(f"{d}/.ckptool.lock", json.dumps(stale).encode())
    with st.lock(d, timeout=0):
        doc = json.loads(st.read_bytes(f"{d}/.ckptool.lock"))
        assert doc["pid"] == os.getpid() and doc["expires"] > time.time() + remote_lock.TTL / 2
    live = dict(stale, expires=time.time() + 60)
    st.write_bytes_atomic(f"{d}/.ckptool.lock", json.dumps(live).encode())
    with pytest.raises(RefusedError, match=r"its lock is held by ckptool prune \(PID 1 on gone\)"):
        with st.lock(d, timeout=0):
            pass


def test_a_live_lock_object_of_another_holder_is_seen_without_taking_it(store):
    """For ``prune --clean-temp --dry-run`` (which says nothing would go while a writer holds
    the lock): ``remote_lock.held_elsewhere``."""
    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/h"
    assert not remote_lock.held_elsewhere(st, d)
    live = {"tool": "ckptool", "pid": 1, "host": "elsewhere", "command": "ckptool save", "expires": time.time() + 60}
    st.write_bytes_atomic(f"{d}/.ckptool.lock", json.dumps(live).encode())
    assert remote_lock.held_elsewhere(st, d)
    live["expires"] = time.time() - 1  # a killed writer's, expired
    st.write_bytes_atomic(f"{d}/.ckptool.lock", json.dumps(live).encode())
    assert not remote_lock.held_elsewhere(st, d)
    st.remove(f"{d}/.ckptool.lock")
    with st.lock(d):
        assert not remote_lock.held_elsewhere(st, d)  # ours


def test_clean_temp_dry_run_on_a_store_says_nothing_goes_while_a_writer_holds_the_lock(store):
    """prune --clean-temp --dry-run asks the store's lock (Storage.lock_held), as it asks
    the local one: a live lock object of another holder means its temporaries are in use."""
    from ckptool.ops.retain import prune as P

    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/ct"
    for step in (1, 2):
        ckptool.write(f"{d}/ckpt-{step}", {"w": np.zeros(2)})
    st.write_bytes_atomic(f"{d}/ckpt-3.index.tempstate77", b"x" * 10)
    now = time.time() + 7200  # the temporary two hours old
    assert P.prune(d, clean_temp=True, dry_run=True, now=now, scan=True).temp_deleted  # no writer: it would go
    live = {"tool": "ckptool", "pid": 1, "host": "elsewhere", "command": "ckptool save", "expires": time.time() + 60}
    st.write_bytes_atomic(f"{d}/.ckptool.lock", json.dumps(live).encode())
    assert P.prune(d, clean_temp=True, dry_run=True, now=now, scan=True).temp_deleted == []


def test_an_emulator_that_ignores_generations_is_refused_plainly(gcs_server, gs):
    fs, root = gs
    honour = gcs_server[2]
    st = remote.storage_for_url(root)
    saved = dict(remote_cas._honoured)
    remote_cas._honoured.clear()
    honour["on"] = False  # the emulator as shipped
    try:
        with pytest.raises(RefusedError, match="does not honour them"):
            with st.lock(f"{root}/x"):
                pass
    finally:
        honour["on"] = True
        remote_cas._honoured.clear()
        remote_cas._honoured.update(saved)
    assert not st.exists(f"{root}/x/.ckptool.lock")


# --------------------------------------------------------------------------- the two races of issue 39


def test_two_prunes_at_once_leave_no_state_entry_without_its_files(run, store, tmp_path):
    fs, root = store
    url = _make_run(run, root, range(1, 13), tmp_path)
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "-m", "ckptool", "prune", url, "--max-to-keep", str(k)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for k in (2, 8)]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = [p.returncode for p in procs]
    assert 0 in codes, outs
    for code, (_, err) in zip(codes, outs):  # the other ran after it, or was refused by the lock
        assert code == 0 or "its lock is held by" in err, err
    names, gone = _listed_exist(url)
    assert not gone, (names, gone, outs)
    assert names[-1] == "ckpt-12" and len(names) in (2, 8)
    files = remote.storage_for_url(url).listdir(url)
    assert sorted(n[:-6] for n in files if n.endswith(".index")) == sorted(names)
    assert ".ckptool.lock" not in files


def test_a_checkpoint_saved_during_a_prune_keeps_its_state_entry(run, store, tmp_path, monkeypatch):
    """A trainer (TF: a plain write of the state file, no lock) saves ckpt-7 between prune's read
    of the state file and its write: the store refuses prune's write, prune reads again and keeps
    the new entry (the old read-compare-then-PUT wrote its stale state over it)."""
    fs, root = store
    url = _make_run(run, root, range(1, 7), tmp_path)
    st = remote.storage_for_url(url)
    real_read = remote_cas.read
    done = []

    def read_then_trainer_saves(storage, path):
        got = real_read(storage, path)
        if path.endswith("/checkpoint") and not done:
            done.append(path)
            ckptool.write(f"{url}/ckpt-7", {"kernel": np.ones(6, np.float32)})
            state = read_state(url, st)
            state.model_checkpoint_path = "ckpt-7"
            state.all_model_checkpoint_paths.append("ckpt-7")
            state.all_model_checkpoint_timestamps.append(time.time())
            st.write_bytes_atomic(f"{url}/checkpoint", state.to_text().encode())
        return got

    monkeypatch.setattr(remote_cas, "read", read_then_trainer_saves)
    _, err = run("prune", url, "--max-to-keep", "3")
    assert done
    names, gone = _listed_exist(url)
    assert "ckpt-7" in names and not gone, (names, err)
    assert read_state(url, st).model_checkpoint_path.endswith("ckpt-7")


# --------------------------------------------------------------------------- gs:// does what s3:// does


@pytest.mark.parametrize("name", ["keras_adam", "tf1_saver", "partitioned", "strings"])
def test_gs_reads_and_verifies_like_local(run, gs, name):
    fs, root = gs
    remote_matches_local(run, fs, root, name)


def test_gs_save_prune_rm_match_local(run, gs, tmp_path):
    fs, root = gs
    npz = tmp_path / "w.npz"
    np.savez(npz, kernel=np.arange(12, dtype=np.float32).reshape(3, 4))
    local = tmp_path / "out"
    for r in (str(local), f"{root}/out"):
        for step in (1, 2, 3, 4):
            run("save", f"{r}/ckpt", "--from", npz, "--global-step", step, "--shards", "2")
    same_output(run, str(local), f"{root}/out", "inspect", "{}", "--json")
    same_output(run, str(local), f"{root}/out", "verify", "{}")
    same_output(run, str(local), f"{root}/out", "prune", "{}", "--max-to-keep", "3", "--json")
    same_output(run, str(local), f"{root}/out", "rm", "{}/ckpt-2", "--json")
    st = remote.storage_for_url(root)
    assert read_state(f"{root}/out", st).all_model_checkpoint_paths == read_state(str(local)).all_model_checkpoint_paths
    assert st.listdir(f"{root}/out") == sorted(n for n in os.listdir(local) if not n.startswith(".ckptool"))
    with ckptool.open(f"{root}/out") as ck:
        assert ck.prefix.endswith("ckpt-4") and ck.read("kernel").sum() == 66


def test_gs_verify_finds_a_flipped_byte_and_a_missing_shard(run, gs):
    fs, root = gs
    upload(fs, DATA / "keras_adam", f"{root}/k")
    data = f"{root}/k/ckpt-1.data-00000-of-00001"
    raw = bytearray(fs.cat_file(data))
    raw[len(raw) // 2] ^= 0x10
    fs.pipe_file(data, bytes(raw))
    run("verify", f"{root}/k", code=1)
    fs.rm_file(data)
    out, _ = run("verify", f"{root}/k", code=1)
    assert "ckpt-1.data-00000-of-00001: missing" in out


def test_the_state_file_is_deleted_only_at_the_version_read(store):
    """update_state removing the state file (rm of every checkpoint) deletes it by the store's
    conditional delete: a state file rewritten since (a trainer's save) stays."""
    fs, root = store
    st = remote.storage_for_url(root)
    path = f"{root}/del/checkpoint"
    st.write_bytes_atomic(path, b'model_checkpoint_path: "ckpt-1"\n')
    assert not st.remove_if(path, b'model_checkpoint_path: "ckpt-0"\n') and st.exists(path)
    assert st.remove_if(path, b'model_checkpoint_path: "ckpt-1"\n') and not st.exists(path)
    assert not st.remove_if(path, b"anything")  # gone: nothing to delete


# --------------------------------------------------------------------------- review (issue 54): fleets at once


def test_two_fleet_prunes_at_once_end_as_one(run, s3, tmp_path):
    """Two ``prune --recursive`` processes over the same S3 fleet, each pruning 16 runs at once:
    no state file names a deleted checkpoint, nothing the policy keeps is deleted, no lock object
    or journal is left, and the fleet ends as one prune leaves it (the local tree, pruned once)."""
    import shutil

    from test_remote import DATA, upload

    fs, root, _ = s3
    local = tmp_path / "fleet"
    local.mkdir()
    (local / ".ckptool.toml").write_text("max_to_keep = 2\n")
    for i in range(24):
        shutil.copytree(DATA / "manager", local / f"team{i % 3}" / f"run{i:02d}",
                        ignore=shutil.ignore_patterns("*.json"))
    (local / "team1" / ".ckptool.toml").write_text("max_to_keep = 1\n")
    url = f"{root}/fleet"
    upload(fs, local, url)
    procs = [subprocess.Popen([sys.executable, "-m", "ckptool", "prune", url, "--recursive"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs):  # a run whose lock the other holds is reported, not waited for
        errors = [ln for ln in err.splitlines() if ln.startswith("ckptool: error:")]
        assert p.returncode == 0 or all("its lock is held by" in ln or "directories failed" in ln
                                        for ln in errors), err
    run("prune", str(local), "--recursive")
    st = remote.storage_for_url(url)
    remote.clear_cache()
    for state in sorted(local.rglob("checkpoint")):
        rel = state.parent.relative_to(local).as_posix()
        names, gone = _listed_exist(f"{url}/{rel}")
        assert not gone, (rel, names, gone)
        assert st.listdir(f"{url}/{rel}") == sorted(p.name for p in state.parent.iterdir()  # no lock object,
                                                    if p.name != ".ckptool.lock"), rel  # no journal either
        assert st.read_bytes(f"{url}/{rel}/checkpoint").decode().splitlines()[:3] == \
            state.read_text().splitlines()[:3]


def test_a_nested_hold_keeps_its_lock_and_still_deletes_in_one_batch(s3):
    """``remove_many(release=)`` where the lock cannot go with the batch (held twice: a caller up
    the stack still needs it): the files still go in one batch request (they went one DELETE each),
    the lock stays held and goes when the outer hold ends."""
    fs, root, counter = s3
    st = remote.storage_for_url(root)
    d = f"{root}/nested"
    for name in ("a", "b", "c"):
        fs.pipe_file(f"{d}/{name}", b"x")
    with st.lock(d, timeout=0.0) as held:
        with st.lock(d, timeout=0.0):
            counter.reset()
            got = st.remove_many([f"{d}/a", f"{d}/b", f"{d}/c"], release=held)
            log = counter.snapshot()
            assert got == {f"{d}/a": None, f"{d}/b": None, f"{d}/c": None}
            assert [r["method"] for r in log if r["method"] in ("POST", "DELETE")] == ["POST"], log
        assert remote_lock.held(st, d) is held and ".ckptool.lock" in st.listdir(d)
    assert remote_lock.held(st, d) is None and not st.exists(f"{d}/.ckptool.lock")


def test_a_lock_taken_over_with_a_journal_is_not_released_along_a_batch(s3):
    """``release_along`` on a lock taken over from a killed holder with its journal (``inherited``):
    the files go in the batch, the lock object stays with the journal it carries (to expire, for the
    next deleting command to finish), neither the batch nor the ``with``'s end deletes it."""
    fs, root, counter = s3
    st = remote.storage_for_url(root)
    d = f"{root}/inh"
    for name in ("a", "b"):
        fs.pipe_file(f"{d}/{name}", b"x")
    dead = {"tool": "ckptool", "pid": 1, "host": "gone", "command": "ckptool prune", "expires": time.time() - 1,
            "note": ["ckpt-3"]}
    fs.pipe_file(f"{d}/.ckptool.lock", json.dumps(dead).encode())
    with st.lock(d, timeout=0.0) as held:
        assert held.inherited == ["ckpt-3"]
        counter.reset()
        assert st.remove_many([f"{d}/a", f"{d}/b"], release=held) == {f"{d}/a": None, f"{d}/b": None}
        assert not [r for r in counter.snapshot() if r["method"] == "DELETE"]
        assert remote_lock.held(st, d) is None
    left = json.loads(st.read_bytes(f"{d}/.ckptool.lock"))
    assert st.listdir(d) == [".ckptool.lock"] and left["note"] == ["ckpt-3"] and left["pid"] == os.getpid()
