"""Replay every failing fuzz case kept under tests/data/fuzz_regressions/ (fast tier).

Each JSON file holds one minimized case of fuzz/ops.py: the tree (mutated
bytes, symlinks, FIFOs), the command line, the failure class (``key``: what
went wrong and the innermost ckptool frame) and how to replay the original
(``python -m fuzz.run --case N``). A case must now pass the oracle: exit
0/1/2 or a CkptError, nothing outside touched, no temporary left, no
traceback. A class not fixed yet carries ``"xfail"`` in its file: the replay
is then ``xfail(strict=True)``, so the fix flips it to a failure until the
mark is removed from the JSON file.
"""

import json

import pytest

from fuzz import engine, ops, pool


def _fixtures():
    paths = sorted(pool.FIXTURES.glob("*.json")) if pool.FIXTURES.is_dir() else []
    out = []
    for p in paths:
        doc = json.loads(p.read_text())
        marks = [pytest.mark.xfail(strict=True, reason=doc["xfail"])] if doc.get("xfail") else []
        out.append(pytest.param(p, id=p.stem, marks=marks))
    return out


@pytest.mark.parametrize("path", _fixtures())
def test_kept_fuzz_case_passes(path):
    doc = json.loads(path.read_text())
    case = ops.Case.from_json(doc["case"])
    with engine.memory_cap(1 << 30):
        outcome, failure, tb = ops.replay(case, timeout=2.0)
    assert failure is None, f"{doc['key']} (top frame {doc['top_frame']}); case: {case.desc}\n{tb[-2500:]}"


def test_fixtures_are_well_formed():
    for p in sorted(pool.FIXTURES.glob("*.json")):
        doc = json.loads(p.read_text())
        assert {"key", "top_frame", "op", "case", "replay"} <= set(doc), p
        case = ops.Case.from_json(doc["case"])
        assert case.op in ops.OPS and case.argv, p
        assert ops.Case.from_json(case.to_json()).files == case.files


def test_the_oracle_catches_what_it_should(tmp_path):
    """A case that touches outside/ or leaves a temporary fails; a clean one passes."""
    base = ops.make_case(0)
    good = ops.Case(0, "list", ["list-variables", "{D}/outside/ckpt-1"], dict(base.files))
    assert ops.run_case(good, tmp_path) == "exit 0"
    bad = ops.Case(0, "convert-tf", ["convert", "{D}/outside/ckpt-1", "{D}/outside/ckpt-1x"], dict(base.files))
    with pytest.raises(ops.Failure, match="touched-outside"):
        ops.run_case(bad, tmp_path)
    gone = ops.Case(0, "api", ["{D}/nothing"], dict(base.files), planted=["outside/precious"])
    (tmp_path / "x").mkdir()
    assert ops.run_case(gone, tmp_path / "x") == "MissingError"


def test_cases_are_reproducible():
    for n in (0, 1, 17, 4711):
        assert ops.make_case(n).to_json() == ops.make_case(n).to_json()
    assert ops.make_case(3).to_json() != ops.make_case(3, seed=1).to_json()
