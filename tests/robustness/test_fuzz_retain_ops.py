"""The fuzzer's average, rm and prune --clean-temp cases (fuzz/retain_ops.py) and their oracles."""

import pytest

from fuzz import ops, pool, retain_ops


def _cases(op, n):
    i = ops.OPS.index(op)
    return [ops.make_case(i + k * len(ops.OPS)) for k in range(n)]


@pytest.mark.parametrize("op", retain_ops.NEW_OPS)
def test_cases_plant_lookalikes_and_say_what_may_go(op):
    cases = _cases(op, 40)
    assert all(c.op == op for c in cases)
    assert any(c.planted for c in cases)
    if op != "average":
        assert all("deletable" in c.meta for c in cases)
        assert any(c.meta["temps"] for c in cases)  # genuine temporaries, aged past the hour
        assert any(any("_temp" in n or ".tmp" in n or "[" in n for n in c.files if n.startswith("run/"))
                   for c in cases)
    else:
        assert all(c.meta["protect"] and c.meta["dst"] for c in cases)
        assert any(c.meta["dst"] in c.meta["protect"] for c in cases)  # -o names an input sometimes


def test_deletion_oracle():
    case = ops.Case(0, "rm", ["rm", "{D}/run/ckpt-1"], {}, meta={"deletable": ["run/ckpt-1.index"]})
    before = {"run/ckpt-1.index": b"i", "run/notes.tmp": b"n", "run/checkpoint": b"s"}
    retain_ops.check(case, None, before, {"run/notes.tmp": b"n", "run/checkpoint": b"t"}, 0, ops.Failure)
    with pytest.raises(ops.Failure, match="deleted-not-ours@rm"):
        retain_ops.check(case, None, before, {"run/checkpoint": b"s"}, 0, ops.Failure)
    with pytest.raises(ops.Failure, match="created-files@rm"):
        retain_ops.check(case, None, before, {**before, "run/x": b""}, 0, ops.Failure)


def test_average_of_identical_inputs_oracle(tmp_path):
    import numpy as np

    import ckptool

    ckptool.write(str(tmp_path / "run" / "a"), {"w": np.array([0.1, 1.7e308])}, sync=False)
    ckptool.write(str(tmp_path / "out"), {"w": np.array([0.1, np.inf])}, sync=False)
    case = ops.Case(0, "average", [], {}, meta={"identical": True, "first_input": "{D}/run/a", "output": "{D}/out"})
    with pytest.raises(ops.Failure, match="average-of-identical-inputs-differs"):
        retain_ops.check(case, tmp_path, {}, {}, 0, ops.Failure)
    ckptool.write(str(tmp_path / "out"), {"w": np.array([0.1, 1.7e308])}, sync=False, force=True)
    retain_ops.check(case, tmp_path, {}, {}, 0, ops.Failure)


def test_a_seeded_run_of_the_new_ops_finds_only_known_classes():
    idx = [ops.OPS.index(o) for o in retain_ops.NEW_OPS]
    summary = pool.run([k * len(ops.OPS) + i for k in range(30) for i in idx], seed=0, workers=1, timeout=3.0,
                       mem_mb=1024)
    new = sorted(k for k in summary.failures if k not in pool.known_classes())
    assert not new, summary.report()
