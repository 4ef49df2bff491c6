"""bench/fleet.py runs end to end on a toy fleet (8 runs): the modelled store serves the local tree,
the requests a run are counted, and local and store answer alike; the deleting prune leaves both
trees alike (slow: 6 ckptool processes)."""

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
    # the deleting prune: beside its deletions, the state file, the 2 indexes it keeps, the lock's PUT
    # and the state's conditional PUT (shared: the above, and the store's conditions probed: 2 PUTs)
    ceiling = {"du": 1, "prune --dry-run": 3, "prune": 5}
    assert all(r["requests"] - r["deletes"] <= ceiling[r["command"]] * 8 + 6 for r in rows), rows
    prune = rows[-1]
    assert prune["trees_same"] and prune["files_left"] == 8 * 5 + 2  # 2 of 3 checkpoints a run, the toml, .done
    assert 0 < prune["deletes"] <= 2 * 8 and prune["deleted"] >= 2 * 8  # each run's index and data file went
    assert all(r["deletes"] == 0 for r in rows[:-1])
    assert "| 8 | `du` |" in fleet.table(rows, 0.0, "0")
