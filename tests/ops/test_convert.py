"""ckptool convert: every fixture to TF V2, .npz and .safetensors, values bit for bit."""

import glob
import json
import os

import ml_dtypes
import numpy as np
import pytest

import ckptool
from ckptool.errors import RefusedError
from ckptool.ops.transform.convert.run import convert
from clirun import completed

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
FIXTURES = sorted(p[: -len(".index")] for p in glob.glob(os.path.join(DATA, "**", "*.index"), recursive=True)) + [
    os.path.join(DATA, "v1", "single", "v1ckpt"), os.path.join(DATA, "v1", "sharded", "v1sharded-?????-of-00003")]


class _Result:
    def __init__(self, proc):
        self.exit_code = proc.returncode
        self.output = proc.stdout + proc.stderr


def _run(*argv):
    return _Result(completed(*argv))


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    if a.dtype == object or b.dtype == object or a.dtype.kind == "S":
        assert [bytes(x) for x in a.reshape(-1).tolist()] == [bytes(x) for x in b.reshape(-1).tolist()]
        return
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes() == \
        np.ascontiguousarray(b).reshape(-1).view(np.uint8).tobytes()


def _header(path):
    raw = open(path, "rb").read()
    return json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])


def _values(path):
    from ckptool.ops.read.source import open_specs

    opened = open_specs(path)
    try:
        return {s.name: np.asarray(s.load()) for s in opened.specs}
    finally:
        opened.close()


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: os.path.relpath(p, DATA))
@pytest.mark.parametrize("fmt", ["tf", "npz", "safetensors"])
def test_every_fixture_converts_bit_for_bit(tmp_path, src, fmt):
    dst = str(tmp_path / {"tf": "out", "npz": "out.npz", "safetensors": "out.safetensors"}[fmt])
    res = convert(src, dst, skip_unsupported=True)
    with ckptool.open(src) as ck:
        names = ck.names()
        if fmt == "tf":
            with ckptool.open(dst) as out:
                assert out.names() == names
                for n in names:
                    _same_bits(out.read(n), ck.read(n))
                    assert out.variable(n).dtype == ck.variable(n).dtype
            assert res.skipped == []
            return
        got = _values(dst)
        assert sorted(got) == sorted(set(names) - set(res.skipped))
        for n, v in got.items():
            want = ck.read(n)
            _same_bits(v, want)
        for n in res.skipped:  # only what the target cannot hold losslessly
            dt = ck.variable(n).dtype
            assert dt not in ("float32", "int32", "int64", "float64", "bool")
            if fmt == "safetensors":
                assert dt != "bfloat16"
            elif dt == "string":
                assert any(bytes(x).endswith(b"\0") for x in np.asarray(ck.read(n), dtype=object).reshape(-1))


def test_safetensors_output_reads_with_the_package(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    src = str(tmp_path / "c")
    vals = {"a/b": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.arange(5, dtype=np.int64),
            "h": np.ones((2, 0), np.float16), "s": np.array(3.5), "f": np.array([True, False])}
    ckptool.write(src, vals, sync=False)
    convert(src, str(tmp_path / "o.safetensors"))
    got = safetensors_numpy.load_file(str(tmp_path / "o.safetensors"))
    assert sorted(got) == sorted(vals)
    for n, v in vals.items():
        _same_bits(got[n], v)


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_bfloat16_float8_round_trip_through_safetensors_and_save(tmp_path, dt):
    src = str(tmp_path / "c")
    v = np.arange(-8, 8).astype(np.float32).astype(dt).reshape(4, 4)
    ckptool.write(src, {"w": v}, sync=False)
    st = str(tmp_path / "o.safetensors")
    assert _run("convert", src, st).exit_code == 0
    header = json.loads(open(st, "rb").read()[8:].split(b"}}")[0] + b"}}")
    assert header["w"]["dtype"] == {"bfloat16": "BF16", "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2"}[
        np.dtype(dt).name]
    back = str(tmp_path / "back")
    r = _run("save", back, "--from", st, "--no-state")
    assert r.exit_code == 0, r.output
    with ckptool.open(back) as ck:
        _same_bits(ck.read("w"), v)
    back2 = str(tmp_path / "back2")
    assert _run("convert", st, back2).exit_code == 0
    with ckptool.open(back2) as ck:
        _same_bits(ck.read("w"), v)


def test_npz_refuses_bfloat16_and_safetensors_keeps_strings_in_metadata(tmp_path):
    src = str(tmp_path / "c")
    ckptool.write(src, {"bf": np.ones(2, ml_dtypes.bfloat16), "txt": b"hello", "x": np.zeros(2)}, sync=False)
    r = _run("convert", src, tmp_path / "o.npz")
    assert r.exit_code != 0 and "'bf'" in r.output and "bfloat16" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["c.data-00000-of-00001", "c.index"]
    r = _run("convert", src, tmp_path / "o.safetensors")
    assert r.exit_code == 0, r.output
    meta = _header(tmp_path / "o.safetensors")
    assert json.loads(meta["__metadata__"]["ckptool.string:txt"]) == {"shape": [], "base64": ["aGVsbG8="]}
    assert meta["__metadata__"]["format"] == "tf"
    back = str(tmp_path / "back")
    assert _run("convert", tmp_path / "o.safetensors", back).exit_code == 0
    with ckptool.open(back) as ck:
        assert ck.variable("txt").dtype == "string" and ck.read("txt") == b"hello"
        _same_bits(ck.read("bf"), np.ones(2, ml_dtypes.bfloat16))
    r = _run("convert", src, tmp_path / "o.npz", "--skip-unsupported", "--json")
    doc = json.loads(r.output)
    assert doc["skipped"] == ["bf"] and doc["tensors"] == 2 and doc["format"] == "npz"
    got = _values(str(tmp_path / "o.npz"))
    assert got["txt"].tolist() == b"hello"
    back = str(tmp_path / "back2")
    assert _run("save", back, "--from", tmp_path / "o.npz", "--no-state").exit_code == 0
    with ckptool.open(back) as ck:
        assert ck.variable("txt").dtype == "string" and ck.read("txt") == b"hello"


def test_refuses_existing_dst_and_src_itself(tmp_path):
    src = str(tmp_path / "c")
    ckptool.write(src, {"x": np.zeros(2)}, sync=False)
    for dst in (src, src + ".index"):
        with pytest.raises(RefusedError, match="source itself"):
            convert(src, dst, force=True)
    convert(src, str(tmp_path / "o.npz"))
    with pytest.raises(RefusedError, match="--force"):
        convert(src, str(tmp_path / "o.npz"))
    convert(src, str(tmp_path / "o.npz"), force=True)
    convert(src, str(tmp_path / "d"))
    r = _run("convert", src, tmp_path / "d")
    assert r.exit_code != 0 and "--force" in r.output


def test_match_and_exclude(tmp_path):
    src = str(tmp_path / "c")
    ckptool.write(src, {"enc/w": np.zeros(2), "enc/b": np.zeros(1), "dec/w": np.ones(2)}, sync=False)
    r = _run("convert", src, tmp_path / "o", "--match", "enc/*", "--match", "dec/w", "--exclude", "*/b")
    assert r.exit_code == 0, r.output
    with ckptool.open(str(tmp_path / "o")) as ck:
        assert ck.names() == ["dec/w", "enc/w"]


def test_reshard_and_v1_to_v2(tmp_path):
    src = os.path.join(DATA, "v1", "sharded", "v1sharded-?????-of-00003")
    dst = str(tmp_path / "o")
    assert _run("convert", src, dst, "--shards", "4").exit_code == 0
    assert len(glob.glob(dst + ".data-*-of-00004")) == 4
    with ckptool.open(src) as a, ckptool.open(dst) as b:
        assert a.names() == b.names()
        for n in a.names():
            _same_bits(a.read(n), b.read(n))


def test_partitioned_merged_by_default_kept_with_flag(tmp_path):
    src = os.path.join(DATA, "partitioned", "model.ckpt")
    with ckptool.open(src) as ck:
        sliced = [v.name for v in ck.variables() if v.num_slices]
    assert sliced
    merged, kept = str(tmp_path / "m"), str(tmp_path / "k")
    convert(src, merged)
    convert(src, kept, keep_slices=True)
    with ckptool.open(src) as a, ckptool.open(merged) as m, ckptool.open(kept) as k:
        for n in a.names():
            _same_bits(m.read(n), a.read(n))
            _same_bits(k.read(n), a.read(n))
        assert all(m.variable(n).num_slices == 0 for n in sliced)
        assert all(k.variable(n).num_slices == a.variable(n).num_slices for n in sliced)
    with pytest.raises(Exception, match="V2 -> V2"):
        convert(src, str(tmp_path / "x.npz"), keep_slices=True)


def test_v2_to_v2_copies_bytes(tmp_path):
    src = os.path.join(DATA, "dtypes", "dtypes")
    dst = str(tmp_path / "o")
    convert(src, dst)
    assert open(dst + ".data-00000-of-00001", "rb").read() == open(src + ".data-00000-of-00001", "rb").read()


def test_npz_and_safetensors_sources_to_tf(tmp_path):
    vals = {"a": np.arange(4, dtype=np.int16), "b/c": np.eye(2, dtype=np.float64)}
    np.savez(tmp_path / "in.npz", **vals)
    assert _run("convert", tmp_path / "in.npz", tmp_path / "o").exit_code == 0
    assert _run("convert", tmp_path / "o", tmp_path / "o.safetensors").exit_code == 0
    assert _run("convert", tmp_path / "o.safetensors", tmp_path / "p", "--to", "tf").exit_code == 0
    with ckptool.open(str(tmp_path / "p")) as ck:
        for n, v in vals.items():
            _same_bits(ck.read(n), v)


def test_help_names_the_flags():
    r = _run("convert", "--help")
    for flag in ("--to", "--match", "--exclude", "--shards", "--keep-slices", "--skip-unsupported", "--force",
                 "--json"):
        assert flag in r.output
