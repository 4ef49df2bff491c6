"""Hostile sizes of prune's own files: a journal (DIR/.ckptool-prune-pending) or a TF1 clock
(DIR/kept/.ckptool-clock) larger than its bound is never read into memory (a 3 GB sparse journal
cost 6 GB of RSS and 24 s before): the journal is one warning and goes, the clock is taken as
absent (the clock starts again, as on a first run)."""

import os
import tracemalloc

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptWarning
from ckptool.io.backends.local import LocalStorage
from ckptool.io.control.state import CheckpointState, write_state
from ckptool.io.layout import keptdir
from ckptool.io.safety.dirfd import LocalDir
from ckptool.ops.retain import journal
from ckptool.ops.retain import prune as P

T0 = 1_700_000_000.0


def _run(d, steps=(1, 2, 3)):
    d.mkdir(parents=True, exist_ok=True)
    for s in steps:
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(4, s, np.float32)}, sync=False)
    names = [f"ckpt-{s}" for s in steps]
    write_state(str(d), CheckpointState(names[-1], names, [T0 + 60 * i for i in range(len(steps))], T0 - 1))
    return d


def _peak(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_journal_over_its_bound_is_not_read(tmp_path):
    d = _run(tmp_path / "run")
    with open(d / ".ckptool-prune-pending", "wb") as f:
        f.truncate(journal.JOURNAL_MAX_BYTES + 1)  # sparse: costs no disk, would cost 64 MB read
    with pytest.warns(CkptWarning, match="unreadable journal \\(over 67108864 bytes"):
        r, peak = _peak(lambda: P.prune(str(d), max_to_keep=1, now=T0 + 9999))
    assert peak < 16 << 20, peak
    assert not (d / ".ckptool-prune-pending").exists()
    assert sorted(os.path.basename(p) for p in r.deleted) == ["ckpt-1", "ckpt-2"]


def test_a_clock_over_its_bound_is_not_read(tmp_path):
    d = _run(tmp_path / "run")
    (d / "kept").mkdir()
    with open(d / "kept" / keptdir.CLOCK_FILENAME, "wb") as f:
        f.truncate(64 << 20)
    with LocalDir(str(d)) as dd:
        got, peak = _peak(lambda: keptdir.read_clock(LocalStorage(), dd))
    assert got is None and peak < 16 << 20, peak
    (d / "kept" / keptdir.CLOCK_FILENAME).write_text('{"tf1_last_preserved_timestamp": 5.0, "latest": "ckpt-3"}')
    with LocalDir(str(d)) as dd:
        assert keptdir.read_clock(LocalStorage(), dd) == (5.0, "ckpt-3")
