"""``du`` reads no index (issue 54): the listing says which checkpoints are whole (an ``.index``
there, at least a table's footer long) and their sizes; prune's plan behind its WOULD FREE column
takes those as intact. What changes against reading every index: a checkpoint whose index is
garbled (yet footer-long) or whose data file is short is counted, its bytes too, and WOULD FREE is
what prune frees once it is intact (``prune --dry-run`` says it is damaged and keeps one more);
damage the listing shows (an index missing or shorter than a footer) is judged as ever."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from ckptool.io.layout import checkpoints as L
from ckptool.ops.retain import du as D
from ckptool.ops.retain import health as H

DATA = pathlib.Path(__file__).parents[1] / "data"


@pytest.fixture
def damaged(tmp_path):
    root = tmp_path / "fleet"
    for name in ("ok", "garbled", "empty", "short"):
        shutil.copytree(DATA / "manager", root / name, ignore=shutil.ignore_patterns("*.json"))
    (root / "garbled" / "ckpt-5.index").write_bytes(bytes(range(100)))  # footer-long, not a table
    (root / "empty" / "ckpt-5.index").write_bytes(b"")
    with open(root / "short" / "ckpt-5.data-00000-of-00001", "r+b") as f:
        f.truncate(3)
    return root


def test_du_reads_no_index_and_counts_what_the_listing_shows(damaged, monkeypatch):
    read: list[str] = []
    real_is_index, real_damage = L.is_index, H.damage
    monkeypatch.setattr(L, "is_index", lambda st, p: (read.append(p), real_is_index(st, p))[1])
    monkeypatch.setattr(H, "damage", lambda st, p, **k: (read.append(p), real_damage(st, p, **k))[1])
    with pytest.warns(Warning, match=r"empty/ckpt-5: damaged: .*too short"):
        rows = {pathlib.Path(r.directory).name: r for r in D.du(str(damaged), max_to_keep=1)}
    assert read == [str(damaged / "empty" / "ckpt-5")]  # only the checkpoint the listing shows damaged
    ok = rows["ok"]
    assert (ok.checkpoints, ok.latest_step) == (3, 5) and ok.would_free == 2 * (ok.bytes // 3)
    for name in ("garbled", "short"):  # counted as whole: WOULD FREE as if intact
        r = rows[name]
        assert (r.checkpoints, r.latest_step, r.would_free, r.error) == (3, 5, ok.would_free, None), r
    for name in ("ok", "garbled", "short"):  # every file of the 3 checkpoints, as they are on disk
        assert rows[name].bytes == sum(p.stat().st_size for p in (damaged / name).iterdir() if p.name != "checkpoint")
    e = rows["empty"]  # as when every index was read: not whole; prune keeps ckpt-4 as the last intact
    assert (e.checkpoints, e.latest_step, e.would_free, e.error) == (2, 4, ok.would_free // 2, None), e


def test_prune_dry_run_still_reads_them(damaged):
    from ckptool.ops.retain.fleet import prune_tree

    with pytest.warns(Warning, match="damaged"):
        tree = prune_tree(str(damaged), max_to_keep=1, dry_run=True)
    damaged_runs = sorted(pathlib.Path(d).name for d, r in tree.runs.items() if r.damaged)
    assert damaged_runs == ["empty", "garbled", "short"]
    assert json.dumps(tree.to_json())  # serialisable
