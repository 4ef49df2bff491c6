"""bench/fleet.py runs end to end on a toy fleet (8 runs): the modelled store serves the local tree,
the requests a run are counted, and local and store answer alike (slow: 8 ckptool processes)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("s3fs")
BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")


@pytest.mark.slow
def test_fleet_bench_rows_on_a_toy_fleet(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    import fleet

    rows = fleet.measure([8], latency=0.0, repeat=1, work=str(tmp_path))
    assert [r["command"] for r in rows] == list(fleet.COMMANDS)
    assert all(r["same"] for r in rows)
    # issue 54: du its state file a run (no index), prune --dry-run the state file and the indexes of the
    # 2 checkpoints it keeps (never the one it deletes); shared: the listing, the root's policy, the
    # lookups of .ckptool.toml above ROOT (once a command)
    assert all(r["requests"] <= (1 if r["command"] == "du" else 3) * 8 + 6 for r in rows), rows
    assert "| 8 | `du` |" in fleet.table(rows, 0.0, "0")
