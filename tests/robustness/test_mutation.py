"""Mutation fuzzing of real checkpoints (fuzz/engine.py): only ckptool errors escape.

Seeds: TF-written checkpoints (fuzz/corpus/tf: several dtypes, strings, a
partitioned variable, two shards, V1), the bundled Keras example, tests/data
fixtures when present, and checkpoints written here (every dtype family,
slices, three shards, an object graph, many small blocks, Snappy blocks).
Mutations: bytes (truncation, bit flips, overwritten/inserted/deleted
ranges, varint bombs, footer handles, spliced ranges, removed files) and
protobuf level (entries and header re-encoded with extreme dtype, dims, rank,
shard id, offset, size, CRC, slices; keys dropped/added/aliased; tensor bytes
changed with the CRC recomputed; the table rebuilt with valid CRCs, Snappy
compressed, blocks shuffled, duplicated or dropped).

Every case runs under a deadline (SIGALRM) and an address-space cap (the
current mapping + 1 GiB), so a hang or an allocation sized from an
unchecked field fails the case. Counts: 3 x 2,000 checkpoint cases + 1,000
state-file cases + prune cases here; ``python fuzz/run.py --cases N`` runs
any number.
"""

import random

import pytest

from fuzz import engine

pytestmark = pytest.mark.slow  # mutation suites: CI runs them; the inner loop does not

CASES = {"open": 1500, "read": 2000, "verify": 1500, "state": 1000, "prune": 300}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return engine.load_seeds(tmp_path_factory.mktemp("seeds"))


def _report(stats):
    msgs = [f"case {i}: {desc}\n{tb}" for i, desc, tb in stats.failures[:3]]
    return stats.line() + "\n" + "\n".join(msgs)


def test_seeds_are_valid(seeds):
    """Unmutated, every seed opens, lists and verifies clean (else the fuzzing proves little)."""
    import ckptool

    assert len(seeds) >= 10
    scratch = engine.Scratch()
    try:
        for s in seeds:
            d = scratch.reset()
            engine._write_files(d, s.files)
            with ckptool.open(str(d / s.prefix)) as ck:
                assert ck.variables(), s.name
                assert all(err is None for _, err in ck.verify()), s.name
    finally:
        scratch.close()


@pytest.mark.parametrize("target", ["open", "read", "verify"])
def test_mutated_checkpoints_raise_only_ckpt_errors(target, seeds):
    stats = engine.run(target, CASES[target], seed=7, timeout=10, mem_cap=1 << 30, seeds=seeds)
    assert stats.cases == CASES[target]
    assert not stats.failures, _report(stats)
    # The mutations reach every layer: some cases still read, others are refused for each reason.
    for outcome in ("ok", "CorruptError", "ChecksumError", "MissingError", "UnsupportedError"):
        assert stats.outcomes[outcome] > 0, stats.line()


def test_hostile_state_files_raise_only_ckpt_errors():
    stats = engine.run("state", CASES["state"], seed=7, timeout=10)
    assert stats.cases == CASES["state"]
    assert not stats.failures, _report(stats)


def test_prune_on_hostile_directories_raises_only_ckpt_errors_and_stays_inside():
    stats = engine.run("prune", CASES["prune"], seed=7, timeout=20)
    assert not stats.failures, _report(stats)


def test_case_budget():
    """CI runs at least 5,000 fuzz cases in total."""
    assert sum(CASES.values()) >= 5000


def test_proto_mutation_keeps_crcs_valid(seeds):
    """The protobuf-level mutator's tables pass every block CRC, so deeper code is reached."""
    from ckptool.format.table import TableReader

    n = 0
    for i in range(300):
        rng = random.Random(i)
        s = seeds[i % len(seeds)]
        if s.v1:
            continue
        files = dict(s.files)
        engine.mutate_proto(rng, s, files)
        try:
            list(TableReader(files[s.index_name], s.index_name))
        except Exception as exc:  # out-of-order keys from shuffled blocks are the only refusal
            assert "out of order" in str(exc), exc
        n += 1
    assert n > 200


def test_deadline_and_memory_cap_work():
    import time

    import numpy as np

    with pytest.raises(engine.CaseTimeout):
        with engine.deadline(0.05):
            while True:
                time.sleep(0.001)
    with pytest.raises(MemoryError):
        with engine.memory_cap(256 << 20):
            np.ones(1 << 31, np.uint8)
