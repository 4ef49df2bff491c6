"""Issue 49, item 1, other cases: a leftover in DIR/kept/ that cannot be replaced (a directory where
a data file or the index of a killed run's copy would be) is neither taken for the checkpoint nor a
wall every later prune stops at: the next name (ckpt.2-N) is used, and that copy verifies."""

import os

import numpy as np
import pytest

import ckptool
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.ops.retain import prune as P
from clirun import run

T0 = 1_700_000_000.0


def _run(d, steps):
    d.mkdir(parents=True)
    for s in steps:
        ckptool.write(str(d / f"ckpt-{s}"), {f"w{i}": np.full(8, s + i, np.float32) for i in range(3)},
                      sync=False, num_shards=2)
    names = [f"ckpt-{s}" for s in steps]
    write_state(str(d), CheckpointState(names[-1], names, [T0 + 60 * i for i in range(len(steps))], T0 - 1))
    return d


@pytest.mark.parametrize("leftover", ["ckpt-2.data-00001-of-00002", "ckpt-2.index"])
def test_a_leftover_that_cannot_be_replaced_gives_the_next_name(tmp_path, capsys, leftover):
    d = _run(tmp_path / "run", range(1, 6))
    (d / "kept").mkdir()
    (d / "kept" / leftover).mkdir()  # no unlink removes it
    r = P.prune(str(d), max_to_keep=2, keep=("ckpt-2",), now=T0 + 9999)
    assert [(m["from"], m["to"]) for m in r.moved] == [(str(d / "ckpt-2"), str(d / "kept" / "ckpt.2-2"))]
    assert not (d / "ckpt-2.index").exists() and (d / "kept" / leftover).is_dir()
    with ckptool.open(str(d / "kept" / "ckpt.2-2")) as ck:
        assert float(ck.read("w1")[0]) == 3.0
    assert read_state(str(d / "kept")).all_model_checkpoint_paths == ["ckpt.2-2"]
    code, out, err = run(capsys, "verify", d / "kept" / "ckpt.2-2")
    assert code == 0, out + err
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep", "ckpt-2")  # the next run: quiet, exit 0
    assert code == 0, err
    assert sorted(p.name for p in (d / "kept").glob("*.index")) == sorted(["ckpt.2-2.index"] + (
        ["ckpt-2.index"] if leftover == "ckpt-2.index" else []))
    assert os.path.isdir(d / "kept" / leftover)
