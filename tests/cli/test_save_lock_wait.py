"""save and a held lock: one line saying who holds it once the wait passes a second, --wait SECONDS,
--wait 0 failing at once naming the holder (issue 32)."""

import contextlib
import multiprocessing
import os

import numpy as np
import pytest

import ckptool
from ckptool.cli.commands import save as save_cmd
from ckptool.io.control.lock import describe_holder, lock_holder
from ckptool.ops.transform.save import save
from clirun import run as run_cli


def _hold(d, ready, release):
    from ckptool.io.control.lock import DirLock

    with DirLock(str(d)):
        ready.set()
        release.wait(30)


@contextlib.contextmanager
def held(d):
    """A forked child holds ``d``'s lock; yields (its pid, the Event that lets it go)."""
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(d, ready, release))
    child.start()
    try:
        assert ready.wait(30), "the child did not take the lock"
        yield child.pid, release
    finally:
        release.set()
        child.join(30)


@pytest.fixture
def setup(tmp_path):
    src = tmp_path / "w.npz"
    np.savez(src, w=np.arange(4, dtype=np.float32))
    runs = tmp_path / "runs"
    runs.mkdir()
    return src, runs


needs_proc_locks = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="no /proc/locks: holder unknown")


@needs_proc_locks
def test_the_holder_is_found(tmp_path):
    with held(tmp_path) as (pid, _):
        assert lock_holder(str(tmp_path)) == pid
        assert describe_holder(str(tmp_path)).startswith(f"PID {pid}")
    assert lock_holder(str(tmp_path)) is None
    assert describe_holder(str(tmp_path / "none")) == "another process"


@needs_proc_locks
def test_wait_0_fails_at_once_naming_the_holder(capsys, setup):
    src, runs = setup
    with held(runs) as (pid, _):
        rc, out, err = run_cli(capsys, "save", runs / "ckpt", "--from", src, "--wait", "0")
    assert rc == 1 and out == ""
    assert err.startswith("ckptool: error: ") and len(err.splitlines()) == 1
    assert f"its lock is held by PID {pid}" in err and "not waiting" in err
    assert "waiting for the lock" not in err
    assert not list(runs.glob("ckpt*"))


@needs_proc_locks
def test_a_wait_says_once_who_holds_the_lock(capsys, setup, monkeypatch):
    src, runs = setup
    monkeypatch.setattr(save_cmd, "NOTICE_AFTER", 0.0)  # no real second in a test
    with held(runs) as (pid, _):
        rc, out, err = run_cli(capsys, "save", runs / "ckpt", "--from", src, "--wait", "0.3")
    lines = err.splitlines()
    assert rc == 1
    assert lines[0] == f"waiting for the lock held by PID {pid} ({lines[0].split('(', 1)[1]}"
    assert lines[0].endswith(f") on {runs}")
    assert sum("waiting for the lock" in ln for ln in lines) == 1
    assert "gave up after waiting 0.3 s" in lines[-1]


def test_save_goes_on_once_the_lock_is_released(setup):
    src, runs = setup
    calls = []
    with held(runs) as (pid, release):
        def on_wait(directory, waited):
            calls.append((directory, waited))
            release.set()  # the holder lets go: save goes on
        result = save(str(runs / "ckpt"), [str(src)], global_step=1, lock_timeout=None, on_lock_wait=on_wait)
    assert calls and calls[0][0] == str(runs)
    with ckptool.open(result.prefix) as ck:
        assert ck.read("w").tolist() == [0, 1, 2, 3]


def test_wait_is_refused_below_zero(capsys, setup):
    src, runs = setup
    rc, _, err = run_cli(capsys, "save", runs / "ckpt", "--from", src, "--wait", "-1")
    assert rc == 2 and "--wait" in err
