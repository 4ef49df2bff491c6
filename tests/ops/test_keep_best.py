"""ckptool.ops.retain.keep_best: the N best, ties to the newer."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptool.errors import CkptError
from ckptool.ops.retain.keep_best import BestSpec, choose_best


def test_min_max_and_ties_to_the_newer():
    c = [("a", 3.0), ("b", 1.0), ("c", None), ("d", 1.0), ("e", 2.0)]
    assert choose_best(c, 2, "min") == [("d", 1.0), ("b", 1.0)]
    assert choose_best(c, 1, "max") == [("a", 3.0)]
    assert choose_best(c, 10, "min") == [("d", 1.0), ("b", 1.0), ("e", 2.0), ("a", 3.0)]
    assert choose_best([("x", float("nan")), ("y", None)], 3, "min") == []
    assert choose_best([("x", -math.inf), ("y", 0.0)], 1, "min") == [("x", -math.inf)]


@pytest.mark.parametrize("kw", [{"n": 0, "metric": "m"}, {"n": True, "metric": "m"}, {"n": 1, "metric": ""},
                                {"n": 1, "metric": "m", "mode": "best"}, {"n": 1, "metric": "m", "metrics": ""}])
def test_spec_refuses_bad_values(kw):
    with pytest.raises(CkptError):
        BestSpec(**kw)


values = st.lists(st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, -1.0]),
                            st.floats(allow_nan=True, allow_infinity=True)), max_size=25)


@given(values, st.integers(1, 8), st.sampled_from(["min", "max"]))
def test_best_is_the_n_best_newest_first_among_equals(vals, n, mode):
    cands = [(f"c{i}", v) for i, v in enumerate(vals)]
    got = choose_best(cands, n, mode)
    valued = [(i, v) for i, v in enumerate(vals) if v is not None and not math.isnan(v)]
    assert len(got) == min(n, len(valued))
    sign = 1 if mode == "min" else -1
    chosen = {name for name, _ in got}
    rank = {f"c{i}": (sign * v, -i) for i, v in valued}
    for name, _ in got:
        for other, key in rank.items():
            if other not in chosen:
                assert rank[name] < key  # better value, or equal and newer
    assert [rank[name] for name, _ in got] == sorted(rank[name] for name, _ in got)


def test_policy_values_and_spec_from_policy():
    from ckptool.ops.retain.keep_best import check_policy_value, spec_from_policy

    assert check_policy_value("keep_best", 2) and check_policy_value("keep_best", 0)
    assert not check_policy_value("keep_best", -1) and not check_policy_value("keep_best", True)
    assert check_policy_value("mode", "max") and not check_policy_value("mode", "median")
    assert check_policy_value("metric", "eval/loss") and not check_policy_value("metric", 3)
    assert spec_from_policy({"keep_best": 0, "metric": "m"}) is None
    assert spec_from_policy({"max_to_keep": 3}) is None
    with pytest.raises(CkptError, match="needs a metric"):
        spec_from_policy({"keep_best": 2})
    s = spec_from_policy({"keep_best": 2, "metric": "m", "metrics": "m.jsonl"}, "/runs/a")
    assert s == BestSpec(2, "m", "min", "/runs/a/m.jsonl")
    assert spec_from_policy({"keep_best": 1, "metric": "m", "metrics": "/x.jsonl", "mode": "max"}, "/r").metrics == "/x.jsonl"
    assert spec_from_policy({"keep_best": 1, "metric": "m", "metrics": "m.jsonl"}, "s3://b/r/").metrics == "s3://b/r/m.jsonl"


def test_mark_best():
    from ckptool.ops.retain.keep_best import mark_best

    reasons = {"a": ["pinned"], "b": ["max_to_keep"], "c": ["pinned"], "d": ["latest", "max_to_keep"]}
    mark_best(reasons, {"a": 1.0, "b": 2.0, "c": 3.0, "gone": 0.0}, user_pinned={"c"})
    assert reasons == {"a": ["best"], "b": ["max_to_keep", "best"], "c": ["pinned", "best"],
                       "d": ["latest", "max_to_keep"]}
