"""The V2 writer without TensorFlow: byte layouts, round trips, sharding, raw copies, safety."""

import os
import pathlib
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CkptError, RefusedError, UnsupportedError
from ckptool.format import bundle, dtypes
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.table import BLOCK_SIZE, TableReader
from ckptool.format.table_build import TableBuilder
from ckptool.ops.write.writer import BundleWriter, write, write_index

DATA = pathlib.Path(__file__).parents[1] / "data"
FIXED = [d for d in dtypes.BY_VALUE.values() if d.is_fixed]


def _index_entries(prefix):
    raw = pathlib.Path(str(prefix) + ".index").read_bytes()
    return list(TableReader(raw, "idx"))


def _random_array(dt, shape, rng):
    """An array of dtype ``dt`` filled with random bytes (every bit pattern, NaNs included)."""
    n = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    if dt.name == "bool":
        raw = raw & 1
    if dt.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        raw = raw & (0x0F if "4" in dt.name else 0x03)
        if dt.name == "int4":  # sign-extend as ml_dtypes stores it
            raw = np.where(raw & 0x8, raw | 0xF0, raw).astype(np.uint8)
        if dt.name == "int2":
            raw = np.where(raw & 0x2, raw | 0xFC, raw).astype(np.uint8)
    return raw.view(dt.write_numpy).reshape(shape)


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes() == \
        np.ascontiguousarray(b).reshape(-1).view(np.uint8).tobytes()


# --------------------------------------------------------------------------- exact bytes


def test_header_and_entry_bytes_match_tf(tmp_path):
    """FORMAT.md §3.2's TF 2.21 examples, byte for byte."""
    p = tmp_path / "c"
    write(str(p), {"save_counter": np.int64(1), "w": np.zeros((2, 3), np.float32), "x": np.float64(0),
                   "e": np.zeros((0, 4), np.float32)})
    entries = dict(_index_entries(p))
    assert entries[b""] == bytes.fromhex("08011a020801")
    assert entries[b"save_counter"] == bytes.fromhex("0809120028083 5".replace(" ", "")) + \
        struct.pack("<I", mask_crc(crc32c(np.int64(1).tobytes())))
    assert entries[b"w"] == bytes.fromhex("080112081202080212020803200828183 5".replace(" ", "")) + \
        struct.pack("<I", mask_crc(crc32c(bytes(24))))
    assert entries[b"e"] == bytes.fromhex("0801120612001202080420283 5d8ea82a2".replace(" ", ""))


def test_data_is_concatenated_in_mapping_order(tmp_path):
    a = np.arange(3, dtype=np.int32)
    b = np.array([1.5], np.float64)
    write(str(tmp_path / "c"), {"zz": a, "aa": b})
    data = (tmp_path / "c.data-00000-of-00001").read_bytes()
    assert data == a.tobytes() + b.tobytes()
    keys = [k for k, _ in _index_entries(tmp_path / "c")]
    assert keys == [b"", b"aa", b"zz"]  # the index is sorted bytewise


def test_string_layout(tmp_path):
    """FORMAT.md §4.2: varint lengths, masked length checksum, bytes; 3 + 4 + 7 = 14."""
    vals = [b"ab", b"", b"xyz\0\xff"]
    write(str(tmp_path / "c"), {"s": np.array(vals, dtype=object)})
    data = (tmp_path / "c.data-00000-of-00001").read_bytes()
    lcrc = crc32c(struct.pack("<3I", 2, 0, 5))
    stored = struct.pack("<I", mask_crc(lcrc))
    assert data == b"\x02\x00\x05" + stored + b"abxyz\0\xff"
    e = bundle.parse_entry(b"s", dict(_index_entries(tmp_path / "c"))[b"s"], "idx")
    assert e.size == 14 and e.crc32c == mask_crc(crc32c(b"abxyz\0\xff", crc32c(stored, lcrc)))


def test_empty_string_tensor_is_four_bytes(tmp_path):
    write(str(tmp_path / "c"), {"s": np.array([], dtype=object)})
    assert (tmp_path / "c.data-00000-of-00001").read_bytes() == bytes.fromhex("d8ea82a2")


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("dt", FIXED, ids=lambda d: d.name)
def test_every_fixed_dtype_round_trips(tmp_path, dt):
    rng = np.random.default_rng(dt.value)
    m = {"v": _random_array(dt, (3, 5), rng), "scalar": _random_array(dt, (), rng),
         "empty": _random_array(dt, (2, 0, 3), rng)}
    write(str(tmp_path / "c"), m)
    with ckptool.open(str(tmp_path / "c")) as ck:
        for name, want in m.items():
            v = ck.variable(name)
            assert v.dtype == dt.name and v.shape == want.shape
            _same_bits(ck.read(name), want.view(dt.numpy))  # quantized types read as plain ints


def test_strings_round_trip(tmp_path):
    m = {
        "obj": np.array([[b"", b"\0\xff\x80"], [b"x" * 300, "h\u00e9".encode()]], dtype=object),
        "str_scalar": "h\u00e9llo",
        "bytes_scalar": b"\x00\x01",
        "empty_str": b"",
        "fixed": np.array([b"ab", b"c"]),  # numpy 'S2'
        "unicode": np.array(["\u00e9", "zz"]),
        "empty": np.zeros((2, 0), dtype=object),
        "mixed": np.array(["a", b"b"], dtype=object),
    }
    write(str(tmp_path / "c"), m)
    with ckptool.open(str(tmp_path / "c")) as ck:
        assert ck.read("obj").tolist() == m["obj"].tolist()
        assert ck.read("str_scalar").item() == "h\u00e9llo".encode()
        assert ck.read("bytes_scalar").item() == b"\x00\x01"
        assert ck.read("empty_str").item() == b""
        assert ck.read("fixed").tolist() == [b"ab", b"c"]
        assert ck.read("unicode").tolist() == ["\u00e9".encode(), b"zz"]
        assert ck.read("empty").shape == (2, 0)
        assert ck.read("mixed").tolist() == [b"a", b"b"]
        assert {v.name: v.dtype for v in ck.variables()} == {n: "string" for n in m}


def test_non_contiguous_and_big_endian_inputs(tmp_path):
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    m = {"t": base.T, "strided": base[::2, ::3], "be": np.arange(5, dtype=">i4"),
         "fortran": np.asfortranarray(base), "pyint": 7, "pyfloat": 2.5, "list": [[1, 2], [3, 4]]}
    write(str(tmp_path / "c"), m)
    with ckptool.open(str(tmp_path / "c")) as ck:
        for name, want in m.items():
            got = ck.read(name)
            np.testing.assert_array_equal(got, np.asarray(want))
        assert ck.read("be").dtype == np.dtype("<i4")
        assert ck.variable("pyint").dtype == "int64" and ck.variable("pyfloat").dtype == "float64"


@settings(max_examples=40)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=12), st.sampled_from(FIXED + [dtypes.STRING_DTYPE]),
                          st.lists(st.integers(0, 4), max_size=3), st.integers(0, 2**32 - 1)),
                min_size=1, max_size=6, unique_by=lambda t: t[0].encode("utf-8", "surrogatepass")),
       st.integers(1, 3))
def test_property_write_read_round_trip(tmp_path_factory, specs, num_shards):
    d = tmp_path_factory.mktemp("h")
    m = {}
    for name, dt, shape, seed in specs:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            continue
        rng = np.random.default_rng(seed)
        if dt.kind == dtypes.STRING:
            n = int(np.prod(shape, dtype=np.int64))
            m[name] = np.array([rng.bytes(int(rng.integers(0, 9))) for _ in range(n)] + [None],
                               dtype=object)[:-1].reshape(shape)
        else:
            m[name] = _random_array(dt, tuple(shape), rng)
    if not m:
        return
    res = write(str(d / "c"), m, num_shards=num_shards)
    assert res.variables == len(m) and len(res.files) == num_shards + 1
    with ckptool.open(str(d / "c")) as ck:
        assert ck.names() == sorted(m, key=lambda s: s.encode())
        for name, want in m.items():
            got = ck.read(name)
            if want.dtype == object:
                assert got.shape == want.shape and got.tolist() == want.tolist()
            else:
                _same_bits(got, want.view(want.dtype[0]) if want.dtype.names else want)  # quantized


# --------------------------------------------------------------------------- sharding


def test_sharded_output(tmp_path):
    m = {f"v{i}": np.full(100 + i, i, np.float32) for i in range(7)}
    res = write(str(tmp_path / "c"), m, num_shards=3)
    files = sorted(os.listdir(tmp_path))
    assert files == ["c.data-00000-of-00003", "c.data-00001-of-00003", "c.data-00002-of-00003", "c.index"]
    sizes = [os.path.getsize(tmp_path / f) for f in files[:3]]
    assert sum(sizes) == res.nbytes == sum(a.nbytes for a in m.values())
    assert max(sizes) - min(sizes) <= 500 * 4  # balanced by bytes
    header = bundle.parse_header(_index_entries(tmp_path / "c")[0][1], "idx")
    assert header.num_shards == 3
    with ckptool.open(str(tmp_path / "c")) as ck:
        for name, want in m.items():
            np.testing.assert_array_equal(ck.read(name), want)
        shards = {ck.entry(k.encode()).shard_id for k in m}
        assert shards == {0, 1, 2}


def test_more_shards_than_tensors_leaves_empty_shards(tmp_path):
    write(str(tmp_path / "c"), {"a": np.ones(2)}, num_shards=3)
    assert os.path.getsize(tmp_path / "c.data-00002-of-00003") == 0
    with ckptool.open(str(tmp_path / "c")) as ck:
        np.testing.assert_array_equal(ck.read("a"), np.ones(2))


@pytest.mark.parametrize("n", [0, -1, 1.5])
def test_bad_shard_count(tmp_path, n):
    with pytest.raises(CkptError, match="shards"):
        write(str(tmp_path / "c"), {"a": 1}, num_shards=n)
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------- raw copies, slices, index only


def _source(tmp_path, num_shards=1):
    m = {"b": np.arange(10, dtype=np.float32), "a": np.array([b"x", b"", b"\xff"], dtype=object),
         "c": np.int64(3), "e": np.zeros((0,), np.int8)}
    write(str(tmp_path / "src"), m, num_shards=num_shards)
    return m


def test_add_raw_copy_is_byte_identical(tmp_path):
    _source(tmp_path)
    with ckptool.open(str(tmp_path / "src")) as ck:
        entries = sorted(ck.plain_entries(), key=lambda e: (e.shard_id, e.offset))
        with BundleWriter(str(tmp_path / "dst")) as w:
            for e in entries:
                w.add_raw(e.key, e, ck.read_raw(e))
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / ("src" + suffix)).read_bytes() == (tmp_path / ("dst" + suffix)).read_bytes()


def test_add_raw_from_shards_keeps_crcs(tmp_path):
    m = _source(tmp_path, num_shards=2)
    with ckptool.open(str(tmp_path / "src")) as ck:
        src = {e.key: e for e in ck.plain_entries()}
        with BundleWriter(str(tmp_path / "dst")) as w:
            for key in sorted(src, reverse=True):
                e = src[key]
                data = bytes(ck.read_raw(e))
                # an iterable of chunks works as well as one buffer
                w.add_raw(key.decode() + "_copy", e, [data[:2], data[2:]])
    with ckptool.open(str(tmp_path / "dst")) as ck:
        for key, e in src.items():
            got = ck.entry(key + b"_copy")
            assert (got.crc32c, got.size, got.dtype, got.shape, got.shard_id) == (e.crc32c, e.size, e.dtype,
                                                                                   e.shape, 0)
            want = m[key.decode()]
            assert ck.read(key.decode() + "_copy").tolist() == np.asarray(want).tolist()


def test_add_raw_wrong_size_is_an_error(tmp_path):
    _source(tmp_path)
    with ckptool.open(str(tmp_path / "src")) as ck:
        e = ck.entry(b"b")
        with pytest.raises(CkptError, match="40"):
            with BundleWriter(str(tmp_path / "dst")) as w:
                w.add_raw("b", e, b"short")
    assert sorted(os.listdir(tmp_path)) == ["src.data-00000-of-00001", "src.index"]


def test_add_sliced_partitioned_tensor(tmp_path):
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    slices = [((0, 4), (0, -1)), ((4, 6), (0, -1))]
    with BundleWriter(str(tmp_path / "c")) as w:
        w.add_sliced("part", "float32", (10, 3), slices)
        w.add(bundle.encode_tensor_name_slice(b"part", slices[0]), full[:4])
        w.add(bundle.encode_tensor_name_slice(b"part", slices[1]), full[4:])
        res = w.finish()
    assert res.variables == 1
    with ckptool.open(str(tmp_path / "c")) as ck:
        assert ck.names() == ["part"]
        assert ck.variable("part").num_slices == 2
        np.testing.assert_array_equal(ck.read("part"), full)
    raw = dict(_index_entries(tmp_path / "c"))[b"part"]
    e = bundle.parse_entry(b"part", raw, "idx")
    assert e.slices == ((((0, 4), (0, -1))), ((4, 6), (0, -1))) and e.size == 0 and e.crc32c == 0


def test_add_sliced_rejects_bad_slices(tmp_path):
    with pytest.raises(CkptError):
        with BundleWriter(str(tmp_path / "c")) as w:
            w.add_sliced("p", "float32", (4,), [((2, 5),)])
    with pytest.raises(CkptError, match="dimensions"):
        with BundleWriter(str(tmp_path / "d")) as w:
            w.add_sliced("p", "float32", (4, 2), [((0, 2),)])
    assert os.listdir(tmp_path) == []


def test_write_index_repoints_linked_data(tmp_path):
    m = _source(tmp_path, num_shards=2)
    with ckptool.open(str(tmp_path / "src")) as ck:
        entries = [(k, ck.raw_entry(k)) for k in ck.keys()]
        n = ck.header.num_shards
    for i in range(n):
        os.link(tmp_path / bundle.data_filename("src", i, n), tmp_path / bundle.data_filename("new", i, n))
    write_index(str(tmp_path / "new"), n, reversed(entries))
    assert (tmp_path / "new.index").read_bytes() == (tmp_path / "src.index").read_bytes()
    with ckptool.open(str(tmp_path / "new")) as ck:
        np.testing.assert_array_equal(ck.read("b"), m["b"])
    with pytest.raises(RefusedError):
        write_index(str(tmp_path / "new"), n, entries)
    with pytest.raises(CkptError, match="duplicate"):
        write_index(str(tmp_path / "x"), n, entries + entries[:1])


# --------------------------------------------------------------------------- safety


def test_refuses_to_overwrite_without_force(tmp_path):
    p = str(tmp_path / "c")
    write(p, {"a": np.ones(3)})
    before = {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)}
    with pytest.raises(RefusedError, match="force"):
        write(p, {"a": np.zeros(3)})
    assert {f: (tmp_path / f).read_bytes() for f in os.listdir(tmp_path)} == before
    write(p, {"b": np.zeros(2)}, force=True)
    with ckptool.open(p) as ck:
        assert ck.names() == ["b"]


def test_force_removes_stale_shards_of_replaced_checkpoint(tmp_path):
    p = str(tmp_path / "c")
    write(p, {f"v{i}": np.ones(3) for i in range(4)}, num_shards=3)
    write(tmp_path / "other" if False else str(tmp_path / "c2"), {"x": 1})
    write(p, {"a": np.zeros(3)}, force=True)
    assert sorted(os.listdir(tmp_path)) == ["c.data-00000-of-00001", "c.index",
                                            "c2.data-00000-of-00001", "c2.index"]


def test_no_temp_files_after_success(tmp_path):
    write(str(tmp_path / "sub" / "c"), {"a": np.ones(3)}, num_shards=2)
    assert sorted(os.listdir(tmp_path / "sub")) == ["c.data-00000-of-00002", "c.data-00001-of-00002", "c.index"]


def test_exception_mid_write_leaves_nothing(tmp_path):
    def items():
        yield "a", np.ones(1000)
        yield "b", np.ones(10)
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        write(str(tmp_path / "c"), items(), num_shards=2)
    assert os.listdir(tmp_path) == []


def test_exception_mid_force_write_keeps_old_checkpoint(tmp_path):
    p = str(tmp_path / "c")
    write(p, {"a": np.arange(3)})
    before = sorted(os.listdir(tmp_path))

    def items():
        yield "z", np.ones(5)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write(p, items(), force=True)
    assert sorted(os.listdir(tmp_path)) == before
    with ckptool.open(p) as ck:
        np.testing.assert_array_equal(ck.read("a"), np.arange(3))


@pytest.mark.parametrize("mapping,match", [
    ({"": np.ones(1)}, "empty"),
    ([("a", 1), ("a", 2)], "duplicate"),
    ({"v": np.zeros(2, dtype="V2")}, "'v'"),
    ({"t": np.array(["2020-01-01"], dtype="datetime64[D]")}, "'t'"),
    ({"o": np.array([1, 2], dtype=object)}, "'o'"),
    ({3: np.ones(1)}, "str or bytes"),
])
def test_bad_input_is_one_clear_error(tmp_path, mapping, match):
    with pytest.raises(CkptError, match=match):
        write(str(tmp_path / "c"), mapping)
    assert os.listdir(tmp_path) == []


def test_unsupported_dtype_error_class(tmp_path):
    with pytest.raises(UnsupportedError):
        write(str(tmp_path / "c"), {"x": np.zeros(1, dtype="V3")})


def test_writer_refuses_use_after_finish(tmp_path):
    w = BundleWriter(str(tmp_path / "c"))
    w.add("a", 1)
    w.finish()
    with pytest.raises(CkptError, match="finished"):
        w.add("b", 2)


# --------------------------------------------------------------------------- table


def test_index_of_several_blocks_and_a_huge_entry(tmp_path):
    m = {f"var_{i:05d}": np.full(2, i, np.int32) for i in range(12000)}
    m["k" * (2 * BLOCK_SIZE + 10)] = np.ones(1, np.float32)  # one index entry over 512 KiB
    write(str(tmp_path / "c"), m)
    raw = (tmp_path / "c.index").read_bytes()
    table = TableReader(raw, "idx")
    assert len(list(table.block_handles())) >= 4
    with ckptool.open(str(tmp_path / "c")) as ck:
        assert len(ck.names()) == len(m)
        np.testing.assert_array_equal(ck.read("var_11321"), [11321, 11321])


class _Sink:
    def __init__(self):
        self.parts = []

    def write(self, b):
        self.parts.append(bytes(b))


@settings(max_examples=60)
@given(st.dictionaries(st.binary(min_size=1, max_size=40), st.binary(max_size=3000), max_size=300),
       st.sampled_from([64, 1024, BLOCK_SIZE]))
def test_table_builder_reader_round_trip(items, block_size):
    sink = _Sink()
    tb = TableBuilder(sink, block_size=block_size)
    pairs = sorted(items.items())
    for k, v in pairs:
        tb.add(k, v)
    size = tb.finish()
    raw = b"".join(sink.parts)
    assert len(raw) == size
    got = [(k, bytes(v)) for k, v in TableReader(raw, "t")]
    assert got == pairs


# --------------------------------------------------------------------------- TF-written fixtures


def _fixture_prefixes():
    if not DATA.is_dir():
        return []
    out = []
    for idx in sorted(DATA.rglob("*.index")):
        if ".tempstate" in idx.name or "_temp" in str(idx):
            continue
        out.append(pytest.param(str(idx)[: -len(".index")], id=str(idx.relative_to(DATA))))
    return out


FIXTURES = _fixture_prefixes()


@pytest.mark.skipif(not FIXTURES, reason="no TF-written fixtures in tests/data yet")
@pytest.mark.parametrize("prefix", FIXTURES)
def test_rewriting_a_tf_fixture_reproduces_its_bytes(tmp_path, prefix):
    """Decoded values, re-written in the fixture's data order, give TF's exact files."""
    with ckptool.open(prefix) as ck:
        if ck.format != "V2" or ck.header.num_shards != 1 or ck.header.big_endian:
            pytest.skip("only single-shard little-endian bundles are reproducible this way")
        entries = [ck.entry(k) for k in ck.keys()]
        if any(e.dtype.kind == dtypes.VARIANT for e in entries):
            pytest.skip("variant tensors cannot be built from numpy")
        if any(e.slices and e.shard_id for e in entries):
            pytest.skip("MergeV2Checkpoints renumbered a sliced entry's shard id")
        slice_keys = ck.slice_keys()
        out = str(tmp_path / "re")
        with BundleWriter(out) as w:
            for e in entries:
                if e.slices:
                    w.add_sliced(e.key, e.dtype, e.shape, e.slices)
            for e in sorted((e for e in entries if not e.slices), key=lambda e: (e.offset, e.size)):
                if e.key in slice_keys:
                    w.add_raw(e.key, e, ck.read_raw(e))  # a slice entry: copied as stored
                else:  # quantized types read as plain ints; their structured dtype writes them back
                    value = ck.read(e.key.decode("utf-8", "surrogateescape"))
                    w.add(e.key, value.view(e.dtype.write_numpy) if e.dtype.kind == dtypes.FIXED else value)
    for suffix in (".index", ".data-00000-of-00001"):
        assert pathlib.Path(out + suffix).read_bytes() == pathlib.Path(prefix + suffix).read_bytes(), suffix


@pytest.mark.parametrize("sync", [True, False])
def test_writeback_is_started_as_the_data_is_written(tmp_path, sync):
    """With sync, the disk writeback of each shard is started every WRITEBACK bytes, in
    order and without gaps (the final fsync then waits for the tail only); never without."""
    from ckptool.io.backends.local import LocalStorage
    from ckptool.ops.write.writer import WRITEBACK

    class Recording(LocalStorage):
        calls = []

        def start_writeback(self, f, offset, length):
            self.calls.append((f.name, offset, length))
            super().start_writeback(f, offset, length)

    st = Recording()
    big = np.arange(5 * WRITEBACK // 4, dtype=np.float32)  # 5 WRITEBACKs of bytes
    with BundleWriter(str(tmp_path / "c"), num_shards=2, storage=st, sync=sync) as w:
        w.add("a", big, shard=0)
        w.add("b", np.ones(3, np.float32), shard=0)
        w.add("c", big[: WRITEBACK // 8], shard=1)  # half a WRITEBACK: its fsync does it all
    with ckptool.open(str(tmp_path / "c")) as ck:
        assert ck.read("a").tobytes() == big.tobytes()
    if not sync:
        assert st.calls == []
        return
    assert len({name for name, _, _ in st.calls}) == 1
    assert [(o, n) for _, o, n in st.calls] == [(i * WRITEBACK, WRITEBACK) for i in range(5)]


# -- issue 22 items 2, 3, 8, 9: the atomic-publish primitive and the destination rule ------------

import errno as _errno  # noqa: E402
import signal as _signal  # noqa: E402
import subprocess as _subprocess  # noqa: E402
import sys as _sys  # noqa: E402

from ckptool.io.backends.local import LocalStorage as _Local  # noqa: E402
from ckptool.io.safety import atomic as _atomic  # noqa: E402


class _FullDisk(_Local):
    """A local storage whose files named like ``victim`` hit ENOSPC on write."""

    def __init__(self, victim):
        self.victim = victim

    def open_write(self, path):
        f = super().open_write(path)
        if self.victim not in path:
            return f
        victim = self

        class Full:
            def write(self, data):
                raise OSError(_errno.ENOSPC, "No space left on device", path)

            def __getattr__(self, name):
                return getattr(f, name)

        victim.file = f
        return Full()


def _leftovers(d):
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("victim", [".index", ".data-00001"])
def test_disk_full_leaves_nothing_and_names_the_target(tmp_path, victim):
    prefix = str(tmp_path / "ckpt-1")
    with pytest.raises(CkptError) as info:
        ckptool.write(prefix, {"a": np.zeros(4), "b": np.ones(4)}, num_shards=2, storage=_FullDisk(victim))
    msg = str(info.value)
    assert "No space left" in msg and ".tempstate" not in msg and victim in msg, msg
    assert _leftovers(tmp_path) == []  # no data file under its final name, no temporary
    assert _atomic.live_temporaries() == []


def test_disk_full_over_an_existing_checkpoint_keeps_it(tmp_path):
    prefix = str(tmp_path / "ckpt-1")
    ckptool.write(prefix, {"a": np.arange(3.0)})
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(CkptError):
        ckptool.write(prefix, {"a": np.zeros(3)}, force=True, storage=_FullDisk(".index"))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def _crc_threads():
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("ckptool-crc")]


def test_big_tensors_are_checksummed_beside_their_write(tmp_path):
    """From CRC_BESIDE_BYTES on, the CRC is computed on a helper thread while the bytes
    are written: the stored CRCs are still those of the bytes, and the thread is gone
    after finish."""
    from ckptool.ops.write.writer import CRC_BESIDE_BYTES

    rng = np.random.default_rng(1)
    arrays = {"big": rng.standard_normal(CRC_BESIDE_BYTES // 8 + 3), "small": np.arange(5.0),
              "big2": rng.integers(0, 255, CRC_BESIDE_BYTES * 2, dtype=np.uint8)}
    prefix = str(tmp_path / "c")
    ckptool.write(prefix, arrays, num_shards=2, sync=False)
    assert _crc_threads() == []
    with ckptool.open(prefix) as ck:
        for name, a in arrays.items():
            e = ck.entry(name.encode())
            assert e.crc32c == mask_crc(crc32c(np.ascontiguousarray(a).view(np.uint8)))
            np.testing.assert_array_equal(ck.read(name, verify=True), a)


def test_disk_full_under_a_big_tensor_leaves_nothing(tmp_path):
    from ckptool.ops.write.writer import CRC_BESIDE_BYTES

    with pytest.raises(CkptError, match="No space left"):
        ckptool.write(str(tmp_path / "c"), {"big": np.zeros(CRC_BESIDE_BYTES)}, storage=_FullDisk(".data"))
    assert _leftovers(tmp_path) == [] and _atomic.live_temporaries() == [] and _crc_threads() == []


def test_keyboard_interrupt_mid_write_removes_the_temporaries(tmp_path):
    def items():
        yield "a", np.zeros(10)
        assert _atomic.live_temporaries(), "the shard's temporary is registered while written"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ckptool.write(str(tmp_path / "c"), items())
    assert _leftovers(tmp_path) == [] and _atomic.live_temporaries() == []


def test_sigterm_during_save_removes_temporaries_and_exits_143(tmp_path):
    src = tmp_path / "v.npz"
    np.savez(src, a=np.zeros(4), b=np.ones(4))
    out = tmp_path / "out"
    code = (
        "import os, signal, sys\n"
        "from ckptool.ops.write import writer as write\n"
        "real = write.BundleWriter.add\n"
        "def add(self, *a, **k):\n"
        "    real(self, *a, **k)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "write.BundleWriter.add = add\n"
        "from ckptool.cli.main import main\n"
        f"main(['save', {str(out / 'ckpt')!r}, '--from', {str(src)!r}, '--shards', '2', '--no-state'])\n"
    )
    r = _subprocess.run([_sys.executable, "-c", code], capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(pathlib.Path(ckptool.__file__).resolve().parents[1])))
    assert r.returncode == 128 + _signal.SIGTERM, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()  # no temporary, and the directory made for them is gone too (issue 32)


def test_same_checkpoint_refused_in_every_form_even_with_force(tmp_path):
    from ckptool.io.control.state import CheckpointState, write_state
    from ckptool.ops.transform.convert.run import convert
    from ckptool.ops.transform.rename.rewrite import rewrite_names
    from ckptool.ops.transform.rename.rules import parse_rule

    d = tmp_path / "run"
    ckptool.write(str(d / "ckpt-2"), {"w": np.arange(3.0)})
    write_state(str(d), CheckpointState("ckpt-2", ["ckpt-2"]))
    (tmp_path / "link").symlink_to(d)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    with pytest.raises(RefusedError, match="source itself"):
        convert(str(d), str(d / "ckpt-2"), force=True)  # DIR form whose latest is DST
    with pytest.raises(RefusedError, match="source itself"):
        rewrite_names(str(d / "ckpt-2"), str(tmp_path / "link" / "ckpt-2"), [parse_rule("w=v")], force=True)
    with pytest.raises(RefusedError, match="source itself"):
        rewrite_names(str(d), str(tmp_path / "link" / "ckpt-2"), [parse_rule("w=v")], force=True, compact=True)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_rewrite_names_force_with_unreadable_src_keeps_a_good_dst(tmp_path):
    from ckptool.ops.transform.rename.rewrite import rewrite_names
    from ckptool.ops.transform.rename.rules import parse_rule

    src, dst = tmp_path / "s" / "ckpt-1", tmp_path / "d" / "ckpt-1"
    ckptool.write(str(src), {"w": np.arange(4.0), "x": np.ones(2)}, num_shards=2)
    ckptool.write(str(dst), {"good": np.arange(2.0)})
    before = {p.name: p.read_bytes() for p in dst.parent.iterdir()}
    os.remove(str(src) + ".data-00001-of-00002")
    for compact in (False, True):
        with pytest.raises(CkptError):
            rewrite_names(str(src), str(dst), [parse_rule("w=v")], force=True, compact=compact)
        assert {p.name: p.read_bytes() for p in dst.parent.iterdir()} == before
