"""The operation fuzzer's event-file op (fuzz/events.py: prune --keep-best over mutated
TF-written event files) and the flags that make an op what it is (ops.OP_FLAGS), which
neither the generator nor the minimizer may lose."""

import json
import random

import pytest

from ckptool.errors import CkptError, MissingError
from ckptool.format import events as ev
from ckptool.format.protos.event_pb2 import Event
from ckptool.ops.retain.metrics import select_series
from clirun import run
from fuzz import events as fe
from fuzz import ops, pool


def _cases(op, n):
    i = ops.OPS.index(op)
    return [ops.make_case(i + k * len(ops.OPS)) for k in range(n)]


@pytest.mark.parametrize("op", sorted(ops.OP_FLAGS))
def test_generated_cases_carry_their_op_flags(op):
    for case in _cases(op, 25):
        assert case.op == op
        for flag in ops.OP_FLAGS[op]:
            if op == "read":
                assert {"--all-tensors", "--tensor"} & set(case.argv), case.argv
            elif op.startswith("convert") and flag == "--to":
                assert "--to" in case.argv
            else:
                assert flag in case.argv, (op, case.argv)


def test_kept_fixtures_of_recursive_and_keep_best_ops_keep_their_flags():
    seen = set()
    for p in sorted(pool.FIXTURES.glob("*.json")):
        case = json.loads(p.read_text())["case"]
        if case["op"] in ("prune-recursive", "prune-best"):
            seen.add(case["op"])
            assert all(f in case["argv"] for f in ops.OP_FLAGS[case["op"]]), (p.name, case["argv"])
    assert seen == {"prune-recursive", "prune-best"}


def test_the_minimizer_never_drops_an_op_flag(monkeypatch):
    monkeypatch.setattr(pool, "_fails_same", lambda case, key, timeout: True)  # everything "still fails"
    for op in ("prune-recursive", "prune-best"):
        case = _cases(op, 1)[0]
        small = pool.minimize(case, "k", budget=500)
        assert all(f in small.argv for f in ops.OP_FLAGS[op]), small.argv
        assert len(small.argv) < len(case.argv) or not small.files  # it did minimize


def test_event_cases_use_the_tf_written_event_files():
    runs = fe.event_runs()
    assert sorted(runs) == ["tf1", "tf2"] and all(any(r.startswith("eval/") for r in f) for f in runs.values())
    cases = _cases("prune-best", 40)
    assert all(any("events.out.tfevents" in k for k in c.files) for c in cases)
    assert any("--metrics" in c.argv for c in cases) and any("--metrics" not in c.argv for c in cases)


def test_event_mutants_reach_the_event_parser():
    rng = random.Random(7)
    data = fe.event_runs()["tf2"]["eval/events.out.tfevents.1796339028.vm.13550.1.v2"]
    framed_ok = 0
    for _ in range(200):
        mutant, desc = fe.mutate_events(rng, data)
        recs, problem = ev.read_records(mutant)
        scalars, _ = ev.scalars(mutant)  # never raises
        if problem is None and recs and mutant != data:
            framed_ok += 1  # valid framing, changed content: the Event/Summary parser sees it
    assert framed_ok > 40


def test_some_event_cases_pass_the_oracle():
    outcomes = [ops.replay(c, 3.0)[0] for c in _cases("prune-best", 12)]
    assert not [o for o in outcomes if o.startswith("FAIL") and "forged" not in o], outcomes
    assert "exit 0" in outcomes


def test_a_tag_with_a_newline_is_escaped_in_the_metric_error():
    series = {"\nckptool: error: forged": {1: 0.5}, "eval/loss": {1: 0.2}}
    with pytest.raises(MissingError) as exc:
        select_series(series, "nope", "run")
    assert "\n" not in str(exc.value) and "'\\nckptool: error: forged'" in str(exc.value)
    with pytest.raises(CkptError) as exc:
        select_series({"a/x\n": {}, "b/x\n": {}}, "x\n", "run")
    assert "\n" not in str(exc.value).replace(repr("x\n"), "")


def test_prune_keep_best_over_an_event_file_with_a_forged_tag(tmp_path, capsys):
    import numpy as np

    import ckptool
    from ckptool.io.control.state import CheckpointState, write_state

    d = tmp_path / "run"
    d.mkdir()
    for s in (100, 200):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.zeros(2, np.float32)}, sync=False)
    write_state(str(d), CheckpointState("ckpt-200", ["ckpt-100", "ckpt-200"], [1.0, 2.0], 0.0))
    e = Event(step=100, wall_time=1.0)
    e.summary.value.add(tag="\nckptool: error: forged", simple_value=0.5)
    (d / "events.out.tfevents.1.host").write_bytes(ev.encode_record(e.SerializeToString()))
    before = sorted(p.name for p in d.iterdir())
    code, out, err = run(capsys, "prune", d, "--keep-best", "1", "--metric", "loss", "--dry-run")
    assert code == 1 and err.startswith("ckptool: error:")
    assert not any(line.startswith("ckptool: error: forged") for line in (out + err).splitlines()), err
    assert sorted(p.name for p in d.iterdir()) == before
