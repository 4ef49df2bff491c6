"""Files that lie (issue 22, items 11-16): each case crafted as an attacker or a broken
disk would make it, read through the library and the CLI."""

import json
import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError, CorruptError
from ckptool.format import bundle, dtypes
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.json_numbers import json_timestamp
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, Node, ObjectGraph
from ckptool.format.slices import tiling_problem
from ckptool.format.table import first_entry, footer_of
from ckptool.format.table_build import TableBuilder
from ckptool.io.backends.local import LOCAL, RangeReader
from ckptool.ops.inspect import summary as summary_ops
from ckptool.ops.inspect.stats import tensor_stats
from ckptool.ops.inspect.tree import tree
from ckptool.ops.inspect.values import tensor_json
from ckptool.ops.inspect.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F32 = dtypes.from_name("float32")


def _cli(*args, timeout=60):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "ckptool", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def write_bundle(prefix, entries, data=b"", num_shards=1, shard=0):
    """An index of ``entries`` ((key, serialized entry)) and one data file ``shard``."""
    with open(prefix + ".index", "wb") as f:
        tb = TableBuilder(f)
        tb.add(b"", bundle.encode_header(num_shards))
        for k, v in sorted(entries):
            tb.add(k, v)
        tb.finish()
    with open(bundle.data_filename(prefix, shard, num_shards), "wb") as f:
        f.write(data)


def partitioned(tmp_path, full_shape, slices, name=b"w"):
    """A float32 partitioned tensor ``name`` of ``full_shape`` with ``slices`` (each stored
    once, under its own key, its values 0, 1, 2, ...)."""
    entries, data = {}, b""
    for sl in slices:
        key = bundle.encode_tensor_name_slice(name, sl)
        if key not in entries:  # a repeated slice is stored once: its values built once
            shape = bundle.slice_shape(sl, full_shape)
            raw = np.arange(int(np.prod(shape)), dtype=np.float32).tobytes()
            entries[key] = bundle.encode_entry(F32, shape, 0, len(data), len(raw), mask_crc(crc32c(raw)))
            data += raw
    entries[name] = bundle.encode_entry(F32, full_shape, 0, 0, 0, 0, slices)
    prefix = str(tmp_path / "ckpt")
    write_bundle(prefix, list(entries.items()), data)
    return prefix


# -- 11: slices must tile the full shape exactly once ------------------------------------------


def test_tiling_problem_cases():
    assert tiling_problem((4, 3), [((0, 2), (0, -1)), ((2, 2), (0, -1))]) is None
    assert tiling_problem((4, 4), [((0, 2), (0, 2)), ((2, 2), (0, 2)), ((0, 2), (2, 2)), ((2, 2), (2, 2))]) is None
    assert "more than once" in tiling_problem((4,), [((0, 2),), ((0, 2),)])
    assert "overlap" in tiling_problem((4,), [((0, 3),), ((2, 2),)])
    assert "gaps" in tiling_problem((4,), [((0, 2),)])
    assert "outside" in tiling_problem((4,), [((3, 2),)])
    assert "dimensions" in tiling_problem((4,), [((0, 2), (0, 1))])
    # the volumes add up, yet two slices overlap and a row is left out
    assert tiling_problem((4, 2), [((0, 2), (0, 2)), ((1, 2), (0, 2))]) == "slices overlap"
    assert tiling_problem((3, 3), [((0, 2), (0, 2)), ((1, 2), (1, 2)), ((0, 1), (2, 1))]) == "slices overlap"


def test_tiling_is_linear_in_slices():
    n = 20_000
    slices = [((i, 1), (0, -1)) for i in range(n)]
    assert tiling_problem((n, 8), slices) is None
    assert "more than once" in tiling_problem((n, 8), slices + [slices[7]])


def test_one_slice_repeated_10000_times(tmp_path):
    sl = ((0, 1), (0, -1))
    prefix = partitioned(tmp_path, (10_000, 1_000_000), [sl] * 10_000)
    with ckptool.open(prefix) as ck:
        v = ck.variable("w")
        assert v.nbytes == 4_000_000  # the bytes stored, not 10,000 times them
        with pytest.raises(CorruptError, match="more than once"):
            ck.read("w")  # refused before a 40 GB allocation
        with pytest.raises(CorruptError, match="more than once"):
            tensor_stats(ck, "w")
        report = verify(ck)
        assert not report.ok and any(p.name == "w" and "more than once" in p.error for p in report.problems)
    r = _cli("inspect", prefix, "--tensor", "w")
    assert r.returncode == 1 and "more than once" in r.stderr and "Traceback" not in r.stderr
    r = _cli("list-variables", prefix, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)[0]["nbytes"] == 4_000_000


@pytest.mark.parametrize("slices, why", [
    ([((0, 3), (0, -1)), ((2, 2), (0, -1))], "overlap"),
    ([((0, 2), (0, -1)), ((1, 2), (0, -1)), ((3, 1), (0, -1))], "overlap"),
    ([((0, 2), (0, -1))], "gaps"),
    ([((0, 2), (0, -1)), ((2, 3), (0, -1))], "outside"),
])
def test_bad_slices_fail_read_stats_verify(tmp_path, slices, why):
    prefix = partitioned(tmp_path, (4, 2), slices)
    with ckptool.open(prefix) as ck:
        with pytest.raises(CorruptError, match=why):
            ck.read("w")
        with pytest.raises(CorruptError):
            tensor_stats(ck, "w")
        report = verify(ck)
        assert [p.name for p in report.problems] == ["w"], report.problems
    r = _cli("inspect", prefix, "--verify")
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_good_slices_read_whole(tmp_path):
    prefix = partitioned(tmp_path, (4, 2), [((0, 1), (0, -1)), ((1, 3), (0, -1))])
    with ckptool.open(prefix) as ck:
        got = ck.read("w")
        assert got.tolist() == [[0, 1], [0, 1], [2, 3], [4, 5]]
        assert verify(ck).ok
        assert tensor_stats(ck, "w")["count"] == 8


# -- 12: a header claiming 2^31 - 1 shards ------------------------------------------------------


def test_header_claims_huge_shard_count(tmp_path):
    n = 2**31 - 1
    raw = np.arange(3, dtype=np.float32).tobytes()
    prefix = str(tmp_path / "ckpt")
    write_bundle(prefix, [(b"a", bundle.encode_entry(F32, (3,), 0, 0, len(raw), mask_crc(crc32c(raw))))],
                 raw, num_shards=n)
    with ckptool.open(prefix) as ck:
        assert ck.read("a").tolist() == [0, 1, 2]
        assert ck.shard_paths() == [bundle.data_filename(prefix, 0, n)]
        assert ck.missing_shards() == (n - 1, [(1, n - 1)])
        doc = summary_ops.summary(ck, prefix)
        assert [s["path"] for s in doc["shards"]] == [bundle.data_filename(prefix, 0, n)]
        report = verify(ck)
        assert [p.name for p in report.problems] == [""]
        assert f"{n - 1:,} of {n:,}" in report.problems[0].error and f"1-{n - 1}" in report.problems[0].error
    r = _cli("inspect", prefix, timeout=60)
    assert r.returncode == 0, r.stderr
    r = _cli("inspect", prefix, "--verify", timeout=60)
    assert r.returncode == 1 and f"{n - 1:,} of {n:,}" in r.stdout + r.stderr


def test_missing_shards_named_as_ranges(tmp_path):
    raw = np.arange(3, dtype=np.float32).tobytes()
    prefix = str(tmp_path / "ckpt")
    entry = bundle.encode_entry(F32, (3,), 2, 0, len(raw), mask_crc(crc32c(raw)))
    write_bundle(prefix, [(b"a", entry)], raw, num_shards=6, shard=2)
    with ckptool.open(prefix) as ck:
        assert ck.missing_shards() == (5, [(0, 1), (3, 5)])


# -- 13: object graphs 3,000 deep, and empty ----------------------------------------------------


def _graph_ckpt(tmp_path, graph_bytes, extra=()):
    values = {OBJECT_GRAPH_KEY: np.array(graph_bytes, dtype=object)}
    values.update(extra)
    prefix = str(tmp_path / "ckpt")
    ckptool.write(prefix, values, sync=False)
    return prefix


def test_object_graph_3000_deep(tmp_path):
    depth = 3000
    nodes = [Node(i, children=[("c", i + 1)] if i < depth else []) for i in range(depth + 1)]
    prefix = _graph_ckpt(tmp_path, ObjectGraph(nodes).serialize())
    with ckptool.open(prefix) as ck:
        root = tree(ck)
        assert root.depth() == depth
        doc = root.to_json()
        node = doc
        for _ in range(depth):
            node = node["children"][0]
        assert node["path"] == "/".join(["c"] * depth) and node["children"] == []
        paths = ck.object_graph().paths()
        assert len(paths) == depth + 1
    r = _cli("inspect", prefix, "--tree")
    assert r.returncode == 0 and "Traceback" not in r.stderr and r.stdout.count("\n") > depth
    r = _cli("inspect", prefix, "--tree", "--json")
    assert r.returncode == 0, r.stderr[-300:]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(50_000)  # json.loads recurses per level too
    try:
        node = json.loads(r.stdout)
    finally:
        sys.setrecursionlimit(limit)
    for _ in range(depth):
        node = node["children"][0]
    assert node["children"] == []


def test_empty_object_graph(tmp_path):
    prefix = _graph_ckpt(tmp_path, b"", {"x": np.zeros(2, np.float32)})
    with ckptool.open(prefix) as ck:
        root = tree(ck)
        assert {c.name for c in root.children} >= {"x"}
    r = _cli("inspect", prefix, "--tree")
    assert r.returncode == 0 and "Traceback" not in r.stderr


def test_name_tree_3000_scopes(tmp_path):
    name = "/".join(["s"] * 3000)
    prefix = str(tmp_path / "ckpt")
    ckptool.write(prefix, {name: np.zeros(1, np.float32)}, sync=False)
    with ckptool.open(prefix) as ck:
        root = tree(ck)
        assert root.depth() == 3000 and root.parameters == 1
        root.to_json()


# -- 14: a large non-checkpoint named .index ------------------------------------------------------


class _Counting:
    def __init__(self, path):
        self.r = RangeReader(path)
        self.size, self.path, self.read_bytes = self.r.size, path, 0

    def read(self, offset, n):
        self.read_bytes += n
        return self.r.read(offset, n)


def test_big_non_index_refused_after_its_footer(tmp_path, monkeypatch):
    path = tmp_path / "x.index"
    with open(path, "wb") as f:
        f.truncate(500 << 20)  # sparse: 500 MB of zeros
    seen = []
    real = RangeReader.read

    def counting(self, offset, size):
        seen.append(size)
        return real(self, offset, size)

    monkeypatch.setattr(RangeReader, "read", counting)
    with pytest.raises(CorruptError, match="not an sstable"):
        ckptool.open(str(tmp_path / "x"))
    assert sum(seen) <= 48
    c = _Counting(str(path))
    with pytest.raises(CorruptError, match="not an sstable"):
        footer_of(c, str(path))
    assert c.read_bytes == 48
    with pytest.raises(CorruptError):
        first_entry(c, str(path))


def test_first_entry_reads_few_blocks(tmp_path):
    prefix = str(tmp_path / "ckpt")
    ckptool.write(prefix, {f"v{i:05d}": np.zeros(4, np.float32) for i in range(60_000)}, sync=False)
    c = _Counting(prefix + ".index")
    key, value = first_entry(c, c.path)
    assert key == b"" and bundle.parse_header(value, "x").num_shards == 1
    footer_of(c, c.path)
    assert c.read_bytes < c.size // 2, (c.read_bytes, c.size)


# -- 15: a FIFO where a file should be ---------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_index_and_shard_do_not_hang(tmp_path):
    prefix = str(tmp_path / "ckpt")
    ckptool.write(prefix, {"a": np.arange(4, dtype=np.float32)}, sync=False)
    data = bundle.data_filename(prefix, 0, 1)
    os.remove(data)
    os.mkfifo(data)
    done = {}

    def run():
        try:
            with ckptool.open(prefix) as ck:
                ck.read("a")
        except CkptError as exc:
            done["err"] = str(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "reading a FIFO shard hung"
    assert "not a regular file" in done["err"]
    os.remove(prefix + ".index")
    os.mkfifo(prefix + ".index")
    with pytest.raises(CkptError):
        LOCAL.read_bytes(prefix + ".index")
    r = _cli("inspect", prefix, timeout=30)
    assert r.returncode == 1 and "Traceback" not in r.stderr


# -- 16: values TF writes, and timestamps a disk can hold ---------------------------------------


def test_every_dtype_as_json():
    prefix = os.path.join(ROOT, "tests", "data", "dtypes", "dtypes")
    with ckptool.open(prefix) as ck:
        for v in ck.variables():
            doc = tensor_json(ck, v.name)
            json.dumps(doc, allow_nan=False)
            if v.dtype.startswith("float8") and v.numel:
                flat = np.asarray(doc["value"], dtype=object).ravel().tolist() if v.shape else [doc["value"]]
                want = ck.read(v.name).astype(np.float64).ravel().tolist()
                assert [x if isinstance(x, float) else float(x.replace("Infinity", "inf")) for x in flat] \
                    == pytest.approx(want, nan_ok=True)
    r = _cli("inspect", prefix, "--tensor", "float8_e5m2/cube", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["dtype"] == "float8_e5m2"


@pytest.mark.parametrize("ts", [1e300, math.nan, math.inf, -math.inf, -1e18])
def test_unrepresentable_times(ts):
    assert summary_ops.iso_time(ts) is None
    assert (json_timestamp(ts) is None) == (not math.isfinite(ts))


@pytest.mark.parametrize("text", ["1e300", "nan", "inf", "-1e18"])
def test_state_timestamps_in_inspect(tmp_path, text):
    src = os.path.join(ROOT, "tests", "data", "ckpt_save")
    for n in os.listdir(src):
        with open(os.path.join(src, n), "rb") as a, open(tmp_path / n, "wb") as b:
            b.write(a.read())
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-2"\n'
        f'all_model_checkpoint_paths: "ckpt-3"\nall_model_checkpoint_timestamps: {text}\n'
        f'all_model_checkpoint_timestamps: {text}\nlast_preserved_timestamp: {text}\n')
    for args in ([], ["--json"]):
        r = _cli("inspect", str(tmp_path), *args)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    json.loads(r.stdout)
