"""Races with TensorFlow itself: a TF process saves continuously with tf.train.CheckpointManager
(which deletes old checkpoints on its own) while ``ckptool prune`` runs again and again on the same
directory and a reader polls the state file and ``ckptool.open(DIR)``. Both TF and prune delete the
same files: prune must take files vanishing underneath it in its stride.

One TF process (one import, about 5 s) drives two directories, saved alternately: plain
max_to_keep, and max_to_keep with keep_checkpoint_every_n_hours of one second. TF saves until the
test has seen at least 3.5 s and MIN_PRUNES prunes (on a loaded machine a prune's start-up takes
longer: the race is counted in prunes, not seconds), at most 120 s; the figures are printed at the
end of the module.
"""

import hashlib
import importlib.util
import json
import os
import queue
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.io.control.state import read_state, resolve
from ckptool.io.layout.checkpoints import step_of

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow"),
]

VAR = "v/.ATTRIBUTES/VARIABLE_VALUE"
SECONDS = 3.5
MIN_PRUNES = 8  # prunes (both directories together) while TF saves, however slow the machine
LIMIT = 120  # seconds TF saves at the most
TF_KEEP = 4  # CheckpointManager(max_to_keep=4)
PRUNE_KEEP = 2  # prune --max-to-keep 2: prune deletes what TF would still keep
HOURS = 1 / 3600  # keep_checkpoint_every_n_hours: one preserved a second
RACES = {"saves": 0, "prunes": 0, "prune_refused": 0, "pruned": 0, "polls": 0, "reads": 0, "rotated": 0,
         "tf_preserved": 0, "vanished": 0}
REFUSALS = []  # prune's one-line errors (exit 1), for the figures
FREED = {}  # directory -> [checkpoints prune deleted, bytes it freed itself]

# Saves to both directories alternately until a line on stdin says stop (at most LIMIT seconds);
# prints "ready" before the first save and the last paths after the last one; then waits for another
# line on stdin and reports what TF itself reads.
WRITER = textwrap.dedent("""
    import json, os, sys, threading, time
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)  # leave a CPU to prune
    tf.config.threading.set_inter_op_parallelism_threads(1)
    dirs, limit, keep, hours = sys.argv[1:3], float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    runs = []
    for d, h in zip(dirs, (None, hours)):
        v = tf.Variable(0, dtype=tf.int64)
        runs.append((v, tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=keep,
                                                   keep_checkpoint_every_n_hours=h)))
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    step, last = 0, [None, None]
    end = time.monotonic() + limit
    while not stop.is_set() and time.monotonic() < end:
        step += 1
        for i, (v, mgr) in enumerate(runs):
            v.assign(step)
            last[i] = mgr.save()
    print(json.dumps({"saves": step, "last": last}), flush=True)
    stop.wait()  # the stop line is the thread's (sent even when the limit ended the saves)
    sys.stdin.readline()
    out = []
    for d in dirs:
        latest = tf.train.latest_checkpoint(d)
        on_disk = {}
        for n in sorted(os.listdir(d)):
            if n.endswith(".index"):
                r = tf.train.load_checkpoint(os.path.join(d, n[:-len(".index")]))
                on_disk[n[:-len(".index")]] = int(r.get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE"))
        value = int(tf.train.load_checkpoint(latest).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE"))
        out.append({"latest": latest, "value": value, "on_disk": on_disk})
    print(json.dumps(out), flush=True)
""")


@pytest.fixture(scope="module", autouse=True)
def _figures(request):
    yield
    line = (f"tf races: {RACES['saves']} CheckpointManager saves (x2 directories), {RACES['prunes']} prunes "
            f"({RACES['prune_refused']} refused, {RACES['pruned']} checkpoints deleted by prune), "
            f"{RACES['polls']} state polls, {RACES['reads']} reads through open(DIR), "
            f"{RACES['rotated']} polls raced a rotation, {RACES['tf_preserved']} kept by every_n_hours; "
            f"TF deleted {RACES['vanished']:.1f} checkpoints' worth of files underneath prune")
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is None or capture is None:  # pragma: no cover
        print(line)
        return
    with capture.global_and_fixture_disabled():
        tr.write_line("")
        tr.write_line(line)
        for msg in sorted(set(REFUSALS)):
            tr.write_line(f"  refused: {msg}")


def _snapshot(root, skip):
    """Every file under ``root`` outside the directories in ``skip``: name -> (size, mtime, sha256)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [n for n in dirnames if os.path.join(dirpath, n) not in skip]
        out[dirpath] = "dir"
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            with open(p, "rb") as f:
                out[p] = (st.st_size, st.st_mtime_ns, hashlib.sha256(f.read()).hexdigest())
    return out


def _latest(d):
    st = read_state(d)
    return None if st is None else st.model_checkpoint_path


def _check_latest_exists(d, failures):
    """The state's latest checkpoint has its .index. If it does not, it must have been rotated out
    (TF saved past it) between the read and the check: the state names another latest by now."""
    st = read_state(d)
    if st is None:
        return None
    latest = resolve(d, st.model_checkpoint_path)
    if os.path.isfile(latest + ".index"):
        return st
    if _latest(d) == st.model_checkpoint_path:
        failures.append(f"the state names {latest} as latest and {latest}.index is gone")
    else:
        RACES["rotated"] += 1
    return None


def _poll(dirs, stop, failures):
    while not stop.wait(0.002):  # leave the CPUs to TF and prune
        for d in dirs:
            try:
                st = _check_latest_exists(d, failures)
            except CkptError as exc:  # a torn state file would land here
                failures.append(f"state file did not parse mid-write: {exc}")
                continue
            RACES["polls"] += 1
            if st is None:
                continue
            try:
                with ckptool.open(d) as ck:
                    prefix, value = ck.prefix, int(ck.read(VAR))
            except CkptError as exc:
                try:
                    moved = _latest(d) != st.model_checkpoint_path
                except CkptError as exc2:
                    failures.append(f"state file did not parse mid-write: {exc2}")
                    continue
                if moved:  # open() saw a newer state whose checkpoint rotated out meanwhile
                    RACES["rotated"] += 1
                else:
                    failures.append(f"open({d}) failed while the state named {st.model_checkpoint_path}: {exc}")
                continue
            RACES["reads"] += 1
            if value != step_of(os.path.basename(prefix)):
                failures.append(f"{prefix}: value {value}, not its step")


def _prune(d, extra=()):
    r = subprocess.run([sys.executable, "-m", "ckptool", "prune", d, "--max-to-keep", str(PRUNE_KEEP),
                        "--json", *extra], capture_output=True, text=True, timeout=60)
    RACES["prunes"] += 1
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 1), (r.returncode, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ckptool: error:")]
    others = [ln for ln in r.stderr.splitlines() if not ln.startswith(("ckptool: error:", "ckptool: warning:"))]
    assert not others, r.stderr
    if r.returncode == 0:
        assert not errors, r.stderr
        out = json.loads(r.stdout)
        RACES["pruned"] += len(out["deleted"])
        tally = FREED.setdefault(d, [0, 0])
        tally[0] += len(out["deleted"])
        tally[1] += out["bytes_freed"]
    else:
        # One line, and only the refusals prune documents for a busy directory: a vanished file
        # ("No such file or directory") would mean prune did not tolerate TF's deletions.
        assert len(errors) == 1 and r.stderr.count("\n") == 1, r.stderr
        assert ("the state file changed" in errors[0] or "no 'checkpoint' state file" in errors[0]
                or "lock" in errors[0]), r.stderr
        RACES["prune_refused"] += 1
        REFUSALS.append(errors[0])
    return r


def test_prune_and_poll_while_tensorflow_saves(tmp_path):
    dirs = [str(tmp_path / "run"), str(tmp_path / "hourly")]
    prune_args = [(), ("--keep-every-n-hours", repr(HOURS))]
    for d in dirs:
        os.mkdir(d)
    # Neighbours that must not be touched: a checkpoint, a state file and look-alike names.
    outside = tmp_path / "outside"
    outside.mkdir()
    import numpy as np

    ckptool.write(str(outside / "ckpt-1"), {"v": np.zeros(3, np.float32)})
    (outside / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n')
    (tmp_path / "run-ckpt-1.index").write_bytes(b"not a checkpoint")
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "run/ckpt-1"\n')
    before = _snapshot(str(tmp_path), set(dirs))

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    with tempfile.TemporaryFile() as tf_log:
        p = subprocess.Popen([sys.executable, "-c", WRITER, *dirs, str(LIMIT), str(TF_KEEP), repr(HOURS)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=tf_log, text=True, env=env)
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(ln) for ln in p.stdout], daemon=True).start()

        def next_line(timeout=60):
            try:
                return lines.get(timeout=timeout)
            except queue.Empty:
                p.kill()
                tf_log.seek(0)
                pytest.fail(f"the TF writer said nothing for {timeout} s: {tf_log.read()[-2000:]!r}")

        def writer_failed():
            p.wait(timeout=60)
            tf_log.seek(0)
            return f"the TF writer failed ({p.returncode}): {tf_log.read()[-3000:].decode(errors='replace')}"

        try:
            ready = next_line()
            assert ready == "ready\n", writer_failed()
            failures = []
            stop = threading.Event()
            poller = threading.Thread(target=_poll, args=(dirs, stop, failures), daemon=True)
            poller.start()
            prunes, start = RACES["prunes"], time.monotonic()
            try:
                while lines.empty() and p.poll() is None:
                    if RACES["prunes"] - prunes >= MIN_PRUNES and time.monotonic() - start >= SECONDS:
                        break
                    for d, extra in zip(dirs, prune_args):
                        _prune(d, extra)
                        _check_latest_exists(d, failures)
                p.stdin.write("stop\n")  # always one line: the writer's stop thread reads exactly one
                p.stdin.flush()
            finally:
                stop.set()
                poller.join(timeout=30)
            assert not failures, failures[:5]
            done = next_line()
            assert done.startswith("{"), writer_failed()
            done = json.loads(done)
            RACES["saves"] += done["saves"]
            # TF has stopped: one more prune each, then TF and ckptool must agree on what is left.
            for d, extra in zip(dirs, prune_args):
                assert _prune(d, extra).returncode == 0
            p.stdin.write("verify\n")
            p.stdin.flush()
            seen = next_line()
            assert seen.startswith("["), writer_failed()
            seen = json.loads(seen)
            p.wait(timeout=30)
            assert p.returncode == 0, writer_failed()
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    last_step = done["saves"]
    for d, last, tf_view in zip(dirs, done["last"], seen):
        # The newest checkpoint TF saved exists; TF and ckptool both name it and read its value.
        assert last == os.path.join(d, f"ckpt-{last_step}")
        assert os.path.isfile(last + ".index")
        assert tf_view["latest"] == last, tf_view
        assert tf_view["value"] == last_step
        assert resolve(d, read_state(d).model_checkpoint_path) == last
        with ckptool.open(d) as ck:
            assert ck.prefix == last
            assert int(ck.read(VAR)) == last_step
        # Every checkpoint left is whole (TF loads it, ckptool verifies it) and holds its step.
        assert tf_view["on_disk"] == {b: step_of(b) for b in tf_view["on_disk"]}
        for base in tf_view["on_disk"]:
            with ckptool.open(os.path.join(d, base)) as ck:
                assert all(err is None for _, err in ck.verify()), base
                assert int(ck.read(VAR)) == step_of(base)
        # No orphans: every file left belongs to a complete checkpoint (no half-deleted one).
        names = set(os.listdir(d)) - {"checkpoint", ".ckptool.lock", "kept"}  # kept/: what prune keeps (issue 36)
        kept = os.path.join(d, "kept")
        for n in (os.listdir(kept) if os.path.isdir(kept) else []):
            if n.endswith(".index"):
                with ckptool.open(os.path.join(kept, n[:-6])) as ck:
                    assert all(err is None for _, err in ck.verify()) and int(ck.read(VAR)) == step_of(n[:-6])
        owners = {n.split(".", 1)[0] for n in names}
        assert owners == set(tf_view["on_disk"]), sorted(names)
        assert all(n.endswith(".index") or ".data-" in n for n in names), sorted(names)
        state = read_state(d)
        listed = {os.path.basename(x) for x in state.all_model_checkpoint_paths}
        assert listed <= set(tf_view["on_disk"]), (listed, sorted(tf_view["on_disk"]))
        size = sum(os.path.getsize(os.path.join(d, n)) for n in names if n.split(".", 1)[0] == f"ckpt-{last_step}")
        n_deleted, freed = FREED.get(d, (0, 0))
        RACES["vanished"] += (n_deleted * size - freed) / size  # files prune planned to delete, found gone
        if d == dirs[1]:
            RACES["tf_preserved"] += len(set(tf_view["on_disk"]) - listed)
        else:  # plain max_to_keep: only the state's checkpoints are left
            assert set(tf_view["on_disk"]) == listed, (sorted(tf_view["on_disk"]), listed)
            assert len(listed) == PRUNE_KEEP
    assert _snapshot(str(tmp_path), set(dirs)) == before, "a file outside DIR changed"
    assert RACES["prunes"] >= MIN_PRUNES and RACES["polls"] > 10 and RACES["pruned"] > 0
