"""Progress for every long operation (issue 32): the ops functions report through their callback
parameter, and the CLI draws one bar on stderr only on a terminal, never with -q."""

import os
import pathlib
import pty
import subprocess
import sys

import numpy as np
import pytest

import ckptool
from ckptool.cli import progress as P
from ckptool.io.control.state import CheckpointState, write_state
from ckptool.ops.inspect.stats import tensor_stats
from ckptool.ops.retain.prune import prune
from ckptool.ops.transform.average import average
from ckptool.ops.transform.rename.rewrite import rewrite_names
from ckptool.ops.transform.rename.rules import parse_rule
from ckptool.ops.transform.save import save
from clirun import run as run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def ckpts(tmp_path):
    d = tmp_path / "runs"
    paths = []
    for s in range(1, 6):
        p = str(d / f"ckpt-{s}")
        ckptool.write(p, {"w": np.full((64, 64), s, np.float32), "b": np.full(8, s, np.float64),
                          "step": np.int64(s), "s": np.array([b"x" * s], dtype=object)}, sync=False)
        paths.append(f"ckpt-{s}")
    write_state(str(d), CheckpointState(paths[-1], paths, [1000.0 + i for i in range(5)], 999.0))
    return d


def _calls():
    seen = []
    return seen, lambda done, total: seen.append((done, total))


def _check(seen, total=None):
    assert seen, "no progress reported"
    dones = [d for d, _ in seen]
    assert dones == sorted(dones) and all(0 <= d <= t for d, t in seen)
    assert seen[-1][0] == seen[-1][1]
    if total is not None:
        assert seen[-1][1] == total


def test_save_reports_its_bytes(ckpts, tmp_path):
    src = tmp_path / "w.npz"
    np.savez(src, w=np.zeros((100, 10), np.float32), v=np.ones(5))
    seen, cb = _calls()
    save(str(tmp_path / "out" / "ckpt"), [str(src)], progress=cb, sync=False)
    _check(seen, 4000 + 40)


def test_average_reports_its_bytes(ckpts, tmp_path):
    seen, cb = _calls()
    average([str(ckpts)], str(tmp_path / "avg" / "ckpt"), last=3, progress=cb, sync=False)
    with ckptool.open(str(ckpts / "ckpt-5")) as ck:
        _check(seen, ck.total_bytes())


@pytest.mark.parametrize("how", [{"compact": True}, {"link": True}, {}])
def test_rewrite_names_reports_copies_and_links(ckpts, tmp_path, how):
    seen, cb = _calls()
    rewrite_names(str(ckpts / "ckpt-5"), str(tmp_path / "r" / "ckpt-5"), [parse_rule("w=kernel")], progress=cb,
                  sync=False, **how)
    _check(seen)


def test_stats_report_every_chunk(ckpts):
    got = []
    with ckptool.open(str(ckpts / "ckpt-5")) as ck:
        tensor_stats(ck, "w", chunk_bytes=1000, on_bytes=got.append)
        assert sum(got) == ck.variable("w").nbytes and len(got) == 17


def test_prune_counts_checkpoints_deleted(ckpts):
    seen, cb = _calls()
    r = prune(str(ckpts), max_to_keep=1, progress=cb, now=5000.0)
    assert len(r.deleted) == 4
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_no_bar_off_a_terminal_or_with_quiet(monkeypatch, capsys, ckpts, tmp_path):
    assert P.progress_bar.__wrapped__  # a context manager
    with P.progress_bar("x") as bar:  # pytest's stderr is no terminal
        assert bar is P._nothing
    monkeypatch.setattr(P, "stderr_is_terminal", lambda: True)
    with P.progress_bar("x") as bar:
        assert isinstance(bar.__self__, P._Bar) and bar.__self__.progress is None  # drawn at the first call
    rc, out, err = run_cli(capsys, "inspect", ckpts / "ckpt-5", "--stats")  # in-process: no terminal
    assert rc == 0 and "\x1b" not in err and "━" not in err


def test_increments_sum_up():
    seen, cb = _calls()
    add = P.increments(cb, 10)
    add(4)
    add(6)
    assert seen == [(4, 10), (10, 10)]


def _on_a_terminal(*argv, cwd):
    """``ckptool ARGV`` with stderr on a pseudo-terminal: (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="100")
    try:
        p = subprocess.run([sys.executable, "-m", "ckptool", *map(str, argv)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=slave, cwd=cwd, env=env, timeout=120)
    finally:
        os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other end is closed and drained
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    return p.returncode, got.decode("utf-8", "replace")


@pytest.mark.parametrize("argv", [
    ("save", "out/ckpt", "--from", "runs/ckpt-5"),
    ("average", "runs", "--last", "2", "-o", "avg/ckpt"),
    ("rewrite-names", "runs/ckpt-5", "small/ckpt-5", "--drop", "s"),
    ("inspect", "runs/ckpt-5", "--stats"),
    ("prune", "runs", "--max-to-keep", "2"),
])
def test_a_terminal_gets_a_bar(ckpts, argv):
    cwd = ckpts.parent
    rc, seen = _on_a_terminal(*argv, cwd=cwd)
    assert rc == 0, seen
    word = {"inspect": "statistics"}.get(argv[0], argv[0])
    assert "━" in seen and word in seen, seen  # the bar and its description


def test_quiet_on_a_terminal_draws_nothing(ckpts):
    rc, seen = _on_a_terminal("-q", "save", "out/ckpt", "--from", "runs/ckpt-5", cwd=ckpts.parent)
    assert rc == 0 and "━" not in seen and seen.strip() == ""
