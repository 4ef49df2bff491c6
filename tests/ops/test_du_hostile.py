"""du: the age retention sees, and hard-linked bytes counted once."""

import json
import os
import time

import numpy as np
import pytest

import ckptool
from ckptool.ops.retain.du import du
from clirun import completed

DAY = 86400.0


def _run(d, steps, n=1000):
    for s in steps:
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(n, s, np.float32)}, sync=False)


def _state(d, steps, stamps=None):
    lines = [f'model_checkpoint_path: "ckpt-{steps[-1]}"']
    lines += [f'all_model_checkpoint_paths: "ckpt-{s}"' for s in steps]
    if stamps is not None:
        lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in stamps]
        lines.append(f"last_preserved_timestamp: {stamps[0] - 1.0!r}")
    (d / "checkpoint").write_text("\n".join(lines) + "\n")


def test_age_follows_the_state_files_timestamps(tmp_path):
    now = time.time()
    d = tmp_path / "runs" / "a"
    _run(d, [1, 2, 3])
    _state(d, [1, 2, 3], [now - 5 * DAY, now - 4 * DAY, now - 3 * DAY])  # files are fresh, the state says days
    [row] = du(str(tmp_path / "runs"), now=now)
    assert row.latest_step == 3
    assert row.latest_age == pytest.approx(3 * DAY, abs=1.0)
    r = completed("du", tmp_path / "runs", "--json")
    assert json.loads(r.stdout)["directories"][0]["latest_age_seconds"] == pytest.approx(3 * DAY, abs=60)
    assert " 3.0d " in completed("du", tmp_path / "runs").stdout


def test_age_without_timestamps_is_the_files_time(tmp_path):
    now = time.time()
    d = tmp_path / "runs" / "a"
    _run(d, [1, 2])
    _state(d, [1, 2])
    for f in os.listdir(d):
        os.utime(d / f, (now - 2 * DAY, now - 2 * DAY))
    [row] = du(str(tmp_path / "runs"), now=now)
    assert row.latest_age == pytest.approx(2 * DAY, abs=1.0)


def test_hostile_timestamps_give_no_age_not_a_crash(tmp_path):
    d = tmp_path / "runs" / "a"
    _run(d, [1])
    (d / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-1"\n'
                                  "all_model_checkpoint_timestamps: nan\n")
    r = completed("du", tmp_path / "runs", "--json")
    assert r.returncode == 0, r.stderr
    age = json.loads(r.stdout)["directories"][0]["latest_age_seconds"]
    assert age is None or age >= 0


def _inodes_bytes(root):
    seen, total = set(), 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f == "checkpoint":
                continue
            st = os.stat(os.path.join(dirpath, f))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def test_hard_linked_data_counted_once(tmp_path):
    """rewrite-names links the data files: the copies add only their indexes, in a row and in the total."""
    root = tmp_path / "runs"
    _run(root / "a", [1], n=250_000)
    for dst in (root / "a" / "ckpt-2", root / "b" / "ckpt-3"):
        r = completed("rewrite-names", root / "a" / "ckpt-1", dst, "--rule", "w=v")
        assert r.returncode == 0, r.stderr
    assert os.stat(root / "b" / "ckpt-3.data-00000-of-00001").st_nlink == 3
    rows = du(str(root))
    assert sum(r.checkpoints for r in rows) == 3
    assert sum(r.bytes for r in rows) == _inodes_bytes(root) < 2 * 1_000_000
    doc = json.loads(completed("du", root, "--json").stdout)
    assert doc["total"]["bytes"] == _inodes_bytes(root)
    assert doc["total"]["would_free"] == 0
