"""The library raises only ckptool's exception family on any input (issue 17): the public
API (ckptool.open in each CHECKPOINT form, names/variables/variable, read with and
without CRCs, verify, object_graph, total_bytes; ckptool.write of what was read) over
mutants of the real fixtures under tests/data (V2 bundles of TF, TF1 Saver, Keras,
DTensor, partitioned, strings, variants, big-endian, V1 tables). Mutations: the fuzz
engine's structure-aware ones (index entries and header rewritten, tables rebuilt, files
dropped, bytes edited) and byte edits / truncations hypothesis draws itself.

Nothing else may escape: no ValueError, KeyError, OSError, RecursionError, IndexError,
struct.error, UnicodeError, TypeError; no MemoryError under a 1 GiB address-space cap
(an allocation a corrupt size asked for); no run past a 2 s deadline.
"""

import dataclasses
import os
import pathlib
import random
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CkptError
from fuzz import engine

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"


def _seeds():
    out, seen = [], set()
    for index in sorted(DATA.rglob("*.index")):
        if "fuzz_regressions" in index.parts:
            continue
        s = engine._load_dir(index.parent, index.name[: -len(".index")], str(index.relative_to(DATA)))
        s.files = {n: b for n, b in s.files.items() if not n.endswith(".meta")}
        key = tuple(sorted((n.replace(s.prefix, "P"), b) for n, b in s.files.items()))
        if key in seen or sum(map(len, s.files.values())) > 64 << 10:
            continue
        seen.add(key)
        out.append(s)
    single = DATA / "v1" / "single" / "v1ckpt"
    out.append(engine.Seed("v1/single", {single.name: single.read_bytes()}, single.name, True))
    shards = sorted((DATA / "v1" / "sharded").glob("v1sharded-*-of-*"))
    out.append(engine.Seed("v1/sharded", {p.name: p.read_bytes() for p in shards}, "v1sharded-?????-of-00003",
                           True))
    return out


SEEDS = _seeds()


@st.composite
def mutants(draw):
    seed = draw(st.sampled_from(SEEDS))
    files = dict(seed.files)
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    how = draw(st.sampled_from(("engine", "engine", "edits", "truncate")))
    if how == "engine":
        table = seed if not seed.v1 or seed.prefix in files else dataclasses.replace(seed, prefix=sorted(files)[0])
        files, _ = engine.mutate_case(rng, table)  # (a sharded V1 seed: its first shard is the table mutated)
    else:
        victim = draw(st.sampled_from(sorted(files)))
        data = bytearray(files[victim])
        if how == "truncate" or not data:
            data = data[: draw(st.integers(0, len(data)))]
        else:
            for _ in range(draw(st.integers(1, 4))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        files[victim] = bytes(data)
    form = draw(st.sampled_from(("prefix", "dir", "index")))
    return seed, files, form


def _exercise(seed, files, form, d: pathlib.Path) -> None:
    for name, data in files.items():
        (d / name).write_bytes(data)
    arg = {"prefix": d / seed.prefix, "dir": d, "index": d / (seed.prefix + ".index")}[form]
    if seed.v1 and form == "index":
        arg = d / seed.prefix
    try:
        with ckptool.open(str(arg)) as ck:
            values = {}
            names = ck.names()
            for v in ck.variables():
                assert ck.variable(v.name) is v or ck.variable(v.name).name == v.name
                for verify in (False, True):
                    try:
                        values[v.name] = ck.read(v.name, verify=verify)
                    except CkptError:
                        pass
            list(ck.verify())
            ck.total_bytes()
            try:
                ck.object_graph()
            except CkptError:
                pass
            try:
                ck.read("no such tensor \0")
            except CkptError:
                pass
            assert set(values) <= set(names)
        if values:
            out = d / "out" / "ckpt-1"
            ckptool.write(str(out), values, sync=False)
            with ckptool.open(str(out)) as back:
                for name, value in values.items():
                    got = back.read(name)
                    assert got.dtype == value.dtype and got.shape == value.shape
    except CkptError:
        pass


#: scratch trees in memory where the machine has a tmpfs (as fuzz/ does): 10,000 of them on a disk
#: cost more in directory creation and removal than in what the library does with them
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _check(seed, files, form):
    with tempfile.TemporaryDirectory(prefix="ckptool-api-", dir=SCRATCH) as tmp:
        with engine.memory_cap(1 << 30), engine.deadline(2.0):
            _exercise(seed, files, form, pathlib.Path(tmp))


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=10000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_seeds_are_the_fixtures():
    names = {s.name.split("/")[0] for s in SEEDS}
    assert {"keras_adam", "partitioned", "strings", "variant", "bigendian", "dtensor", "v1"} <= names
    for s in SEEDS:  # every seed reads cleanly as it is
        with tempfile.TemporaryDirectory() as tmp:
            for n, b in s.files.items():
                (pathlib.Path(tmp) / n).write_bytes(b)
            with ckptool.open(str(pathlib.Path(tmp) / s.prefix)) as ck:
                assert all(err is None for _, err in ck.verify()), s.name


@FAST
@given(mutants())
def test_only_ckpt_errors_escape_the_library(m):
    _check(*m)


@pytest.mark.slow
@SLOW
@given(mutants())
def test_only_ckpt_errors_escape_the_library_many(m):
    _check(*m)


def test_read_values_write_back(tmp_path):
    """The harness's write step is real: what a sound fixture reads writes and reads back."""
    s = next(x for x in SEEDS if x.name.startswith("dtypes"))
    for n, b in s.files.items():
        (tmp_path / n).write_bytes(b)
    with ckptool.open(str(tmp_path / s.prefix)) as ck:
        values = {v.name: ck.read(v.name) for v in ck.variables()}
    ckptool.write(str(tmp_path / "o" / "c"), values, sync=False)
    with ckptool.open(str(tmp_path / "o" / "c")) as ck:
        for k, v in values.items():
            got = ck.read(k)
            assert got.dtype == v.dtype and got.shape == v.shape, k
            assert (got.tolist() == v.tolist()) if v.dtype == object else got.tobytes() == v.tobytes(), k
