"""20,000 operation-fuzz cases (fuzz/ops.py) on two forked workers (slow tier).

Every command (list-variables, inspect and its --tensor/--all-tensors,
--stats, --verify, --tree, diff, convert to tf/npz/safetensors,
rewrite-names, prune plain and --recursive, state show/--rebuild/--relative,
du, save, prune --keep-best over mutated TF-written event files, and the
library's open/variables/read/verify) on trees of mutated
TF-written checkpoints, mutated or hostile ``checkpoint`` state files and
``.ckptool.toml`` policy files, planted files that are not ours, FIFOs,
symlinks out of the tree and sparse 2 GiB files. Per case: a 3 s SIGALRM
deadline, an address-space cap of the worker's mapping + 1 GiB, and the
oracle of fuzz/ops.py. Case N replays with ``python -m fuzz.run --case N``.

A failure of a class already kept under tests/data/fuzz_regressions/ and
still marked xfail there is counted and reported, not failed on (its replay
test tracks it); any other class fails this test: keep it with
``python -m fuzz.run --cases 20000 --keep``.
"""

import pytest

from fuzz import pool

CASES = 20000
RESULT = {}


@pytest.mark.slow
def test_twenty_thousand_cases_only_known_failure_classes():
    summary = pool.run(range(CASES), seed=0, workers=2, timeout=3.0, mem_mb=1024)
    RESULT["summary"] = summary
    assert summary.cases == CASES
    known = pool.known_classes()
    new = {k: v for k, v in summary.failures.items() if k not in known}
    msgs = [f"{k}: {len(v)} cases, e.g. python -m fuzz.run --case {v[0]}\n{summary.tracebacks[k][-1500:]}"
            for k, v in sorted(new.items())]
    assert not new, summary.report() + "\n\n" + "\n".join(msgs)
    # The cases reach every op and both outcomes.
    ops_seen = {op for (op, kind) in summary.by_op}
    assert len(ops_seen) == len(pool.ops.OPS)
    assert sum(v for (op, k), v in summary.by_op.items() if k == "ok") > CASES // 10
    assert sum(v for (op, k), v in summary.by_op.items() if k == "refused") > CASES // 10
