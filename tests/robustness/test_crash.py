"""Crash safety: `ckptool save` (and prune / rewrite-names / convert once they land) killed with
SIGKILL at every point where it changes the disk, and at random moments.

ckptool/_faults.py wraps every call that changes the disk (open for writing,
fsync, rename/replace, remove/unlink, link) in the child; ``CKPTOOL_CRASH_AT=fs:N``
kills it just before the N-th such event and ``fs+:N`` just after. A first,
clean run counts the events; then every event is killed before and after.
After each kill:

- every checkpoint whose ``.index`` exists opens and verifies (all CRCs);
- the checkpoints that were there before are untouched (same values);
- the state file, when there is one, parses and names only complete checkpoints;
- a rerun of the same command (``--force`` when the index made it) succeeds and
  the new checkpoint holds exactly the saved values.
"""

import importlib.util
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import ckptool
from ckptool.state import read_state, resolve

HAS_MANAGE = importlib.util.find_spec("ckptool.manage") is not None
VALUES = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([b"x", b""], dtype=object),
          "step": np.int64(3)}
KILLS = {"event": 0, "random": 0}


def _run(args, env_extra=None, wait=True):
    env = dict(os.environ)
    env.pop("CKPTOOL_CRASH_AT", None)
    env.pop("CKPTOOL_FAULT_LOG", None)
    env.update(env_extra or {})
    cmd = [sys.executable, "-m", "ckptool._faults", *args]
    if not wait:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _setup(d):
    d.mkdir()
    for s in (1, 2):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
    src = d.parent / f"{d.name}-src.npz"
    np.savez(src, w=VALUES["w"], b=np.array([b"x", b""]), step=VALUES["step"])
    return src


def _save_args(d, src):
    args = ["save", str(d / "ckpt"), "--from", str(src), "--global-step", "3", "--shards", "2"]
    return args + (["--max-to-keep", "5"] if HAS_MANAGE else ["--no-state"])


def _check_dir(d):
    """The invariants that must hold after any kill."""
    for index in sorted(d.glob("*.index")):
        prefix = str(index)[: -len(".index")]
        with ckptool.open(prefix) as ck:
            bad = [(n, e) for n, e in ck.verify() if e]
            assert not bad, f"{index.name} exists but the checkpoint does not verify: {bad}"
    for s in (1, 2):
        with ckptool.open(str(d / f"ckpt-{s}")) as ck:
            assert ck.read("w").tolist() == [float(s)] * 3
    st = read_state(str(d)) if (d / "checkpoint").exists() else None
    if st is not None:
        for p in [st.model_checkpoint_path, *st.all_model_checkpoint_paths]:
            assert os.path.isfile(resolve(str(d), p) + ".index"), f"state names incomplete {p}"


def _check_saved(d):
    with ckptool.open(str(d / "ckpt-3")) as ck:
        assert ck.read("w").tobytes() == VALUES["w"].tobytes()
        assert list(ck.read("b")) == [b"x", b""]
        assert ck.read("step") == 3
        assert all(e is None for _, e in ck.verify())


def _rerun(d, args):
    extra = ["--force"] if (d / "ckpt-3.index").exists() else []
    r = _run(args + extra)
    assert r.returncode == 0, r.stderr
    _check_saved(d)
    _check_dir(d)


def _count_events(tmp_path, args_for):
    d = tmp_path / "count"
    src = _setup(d)
    log = tmp_path / "events.log"
    r = _run(args_for(d, src), {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    _check_saved(d)
    events = [line for line in log.read_text().splitlines() if " fs " in line]
    return events


def test_save_killed_at_every_disk_event(tmp_path):
    events = _count_events(tmp_path, _save_args)
    assert len(events) >= 8, events  # 2 shards + index: open, fsync, rename each
    for k in range(1, len(events) + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"kill-{mode.replace('+', 'p')}-{k}"
            src = _setup(d)
            args = _save_args(d, src)
            r = _run(args, {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, (mode, k, r.returncode, r.stderr)
            KILLS["event"] += 1
            _check_dir(d)
            _rerun(d, args)
    assert KILLS["event"] == 2 * len(events)


def test_save_killed_at_random_moments(tmp_path):
    d0 = tmp_path / "timing"
    src = _setup(d0)
    t0 = time.perf_counter()
    assert _run(_save_args(d0, src)).returncode == 0
    span = time.perf_counter() - t0
    rng = random.Random(11)
    for i in range(8):
        d = tmp_path / f"rand-{i}"
        src = _setup(d)
        args = _save_args(d, src)
        p = _run(args, wait=False)
        time.sleep(rng.uniform(0.3, 1.0) * span)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
        KILLS["random"] += 1
        _check_dir(d)
        _rerun(d, args)


def test_crash_point_named(tmp_path, monkeypatch):
    """crash_point(NAME) kills only at the COUNT-th hit of NAME, and is a no-op without the variable."""
    code = ("import ckptool._faults as f\nfor i in range(5):\n    f.crash_point('x')\n    print(i, flush=True)\n")
    env = dict(os.environ, CKPTOOL_CRASH_AT="x:3")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == -signal.SIGKILL and r.stdout.split() == ["0", "1"]
    env.pop("CKPTOOL_CRASH_AT")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["0", "1", "2", "3", "4"]


@pytest.mark.skipif(not importlib.util.find_spec("ckptool.cli.commands.prune"), reason="prune not in the tree yet")
def test_prune_killed_at_every_disk_event(tmp_path):
    def setup(d):
        d.mkdir()
        for s in range(1, 7):
            ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
        from ckptool.state import CheckpointState, write_state

        write_state(str(d), CheckpointState("ckpt-6", [f"ckpt-{s}" for s in range(1, 7)]))

    d = tmp_path / "count"
    setup(d)
    log = tmp_path / "prune.log"
    r = _run(["prune", str(d), "--max-to-keep", "2"], {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"p-{mode.replace('+', 'p')}-{k}"
            setup(d)
            r = _run(["prune", str(d), "--max-to-keep", "2"], {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, r.stderr
            KILLS["event"] += 1
            for index in d.glob("*.index"):
                with ckptool.open(str(index)[:-6]) as ck:
                    assert all(e is None for _, e in ck.verify()), index
            for keep in ("ckpt-5", "ckpt-6"):
                assert (d / f"{keep}.index").exists(), f"kept {keep} is gone after kill {mode}:{k}"
            st = read_state(str(d))
            for p in st.all_model_checkpoint_paths:
                assert os.path.isfile(resolve(str(d), p) + ".index"), p
            r = _run(["prune", str(d), "--max-to-keep", "2"])
            assert r.returncode == 0, r.stderr
            assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-5.index", "ckpt-6.index"]


def _rename_setup(d):
    d.mkdir()
    src = d / "src" / "ckpt-3"
    ckptool.write(str(src), VALUES, num_shards=2, sync=False)
    return src


def _check_renamed(dst):
    with ckptool.open(str(dst)) as ck:
        assert ck.names() == ["b", "step", "weights"]
        assert ck.read("weights").tobytes() == VALUES["w"].tobytes()
        assert all(e is None for _, e in ck.verify())


@pytest.mark.parametrize("compact", [False, True], ids=["linked", "compact"])
def test_rewrite_names_killed_at_every_disk_event(tmp_path, compact):
    """After any kill: SRC is intact; DST has no index, or is complete and verifies; a rerun
    (with --force when the index made it) finishes the job."""
    def args(d):
        return ["rewrite-names", str(d / "src" / "ckpt-3"), str(d / "dst" / "ckpt-3"), "--rule", "w=weights",
                *(["--compact"] if compact else [])]

    d = tmp_path / "count"
    _rename_setup(d)
    log = tmp_path / "events.log"
    r = _run(args(d), {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    _check_renamed(d / "dst" / "ckpt-3")
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    assert n >= 3
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"r-{mode.replace('+', 'p')}-{k}"
            src = _rename_setup(d)
            before = {p.name: p.read_bytes() for p in src.parent.iterdir()}
            r = _run(args(d), {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, (mode, k, r.stderr)
            KILLS["event"] += 1
            assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == before, "SRC changed"
            dst = d / "dst" / "ckpt-3"
            if (d / "dst" / "ckpt-3.index").exists():
                _check_renamed(dst)
            r = _run(args(d) + (["--force"] if (d / "dst" / "ckpt-3.index").exists() else []))
            assert r.returncode == 0, r.stderr
            _check_renamed(dst)
