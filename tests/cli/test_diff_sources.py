"""diff across formats (issue 32): every source convert reads, --rtol, --match, --map."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ckptool
from ckptool.ops.inspect.diff import _aligned, diff_sides, open_side
from clirun import run as run_cli


@pytest.fixture
def run(capsys):
    def go(*argv, code=0):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == code, (rc, out, err)
        return out, err
    return go


@pytest.fixture
def ckpt(tmp_path):
    p = str(tmp_path / "src" / "ckpt-1")
    ckptool.write(p, {"dense/kernel": np.linspace(-1, 1, 600, dtype=np.float32).reshape(20, 30),
                      "dense/bias": np.arange(3, dtype=np.float64), "step": np.int64(7),
                      "names": np.array([b"ok", b"\xff\xfe"], dtype=object)}, sync=False)
    return p


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_diff_checks_a_conversion_both_ways(run, ckpt, tmp_path, suffix):
    dst = str(tmp_path / f"model{suffix}")
    run("convert", ckpt, dst)
    out, err = run("diff", ckpt, dst)
    assert out == "" and "4 unchanged" in err
    run("diff", dst, ckpt)
    doc = json.loads(run("diff", ckpt, dst, "--json")[0])
    assert doc["identical"] and doc["b"] == dst and doc["unchanged"] == 4


def test_diff_sees_a_changed_value_in_an_npz(run, ckpt, tmp_path):
    with ckptool.open(ckpt) as ck:
        arrays = {n: ck.read(n) for n in ck.names() if n != "names"}
    arrays["dense/kernel"][3, 4] += 0.25
    dst = tmp_path / "edited.npz"
    np.savez(dst, **arrays)
    doc = json.loads(run("diff", ckpt, dst, "--json", code=1)[0])
    assert [v["name"] for v in doc["values"]] == ["dense/kernel"]
    assert doc["values"][0]["differing"] == 1 and doc["values"][0]["max_abs_diff"] == pytest.approx(0.25)
    assert [r["name"] for r in doc["removed"]] == ["names"]


def test_diff_takes_an_npy_side(run, tmp_path):
    a = tmp_path / "w.npy"
    np.save(a, np.arange(5, dtype=np.int32))
    ck = str(tmp_path / "c")
    ckptool.write(ck, {"w": np.arange(5, dtype=np.int32)}, sync=False)
    run("diff", a, ck)
    ckptool.write(ck, {"w": np.arange(1, 6, dtype=np.int32)}, sync=False, force=True)
    doc = json.loads(run("diff", a, ck, "--json", code=1)[0])
    assert doc["values"][0]["differing"] == 5


def test_rtol_is_relative_to_b(run, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    ckptool.write(a, {"x": np.array([100.0, 1.0])}, sync=False)
    ckptool.write(b, {"x": np.array([100.5, 1.0])}, sync=False)
    run("diff", a, b, code=1)
    run("diff", a, b, "--rtol", "0.001", code=1)  # 0.5 > 0.1005
    doc = json.loads(run("diff", a, b, "--rtol", "0.01", "--json")[0])
    assert doc["rtol"] == 0.01 and doc["identical"]
    run("diff", a, b, "--rtol", "-1", code=2)


def test_match_limits_the_comparison(run, ckpt, tmp_path):
    other = str(tmp_path / "o")
    with ckptool.open(ckpt) as ck:
        m = {n: ck.read(n) for n in ck.names()}
    m["step"] = np.int64(8)
    ckptool.write(other, m, sync=False)
    run("diff", ckpt, other, code=1)
    out, err = run("diff", ckpt, other, "--match", "dense/*")
    assert "2 unchanged" in err
    run("diff", ckpt, other, "--match", "dense/*", "--match", "st*", code=1)


def test_map_checks_a_migration(run, ckpt, tmp_path):
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"dense/": "model/dense/", "step": "global_step"}))
    dst = str(tmp_path / "new" / "ckpt-1")
    run("rewrite-names", ckpt, dst, "--map", mapping)
    run("diff", ckpt, dst, code=1)
    out, err = run("diff", ckpt, dst, "--map", mapping)
    assert "4 unchanged" in err
    run("diff", ckpt, dst, "--map", mapping, "--match", "model/*")
    # a migration that lost a value shows under B's name
    with ckptool.open(dst) as ck:
        m = {n: ck.read(n) for n in ck.names()}
    m["model/dense/bias"] = m["model/dense/bias"] * 2
    ckptool.write(dst, m, sync=False, force=True)
    doc = json.loads(run("diff", ckpt, dst, "--map", mapping, "--json", code=1)[0])
    assert [v["name"] for v in doc["values"]] == ["model/dense/bias"]


def test_map_trouble_is_exit_2(run, ckpt, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"dense/": "x"}')  # a scope must map to a scope
    _, err = run("diff", ckpt, ckpt, "--map", bad, code=2)
    assert err.startswith("ckptool: error: --map") and len(err.splitlines()) == 1
    both = tmp_path / "both.json"
    both.write_text('{"dense/kernel": "w", "dense/bias": "w"}')
    _, err = run("diff", ckpt, ckpt, "--map", both, code=2)
    assert "both map to 'w'" in err
    _, err = run("diff", ckpt, tmp_path / "missing.safetensors", code=2)
    assert err.startswith("ckptool: error:") and "missing.safetensors" in err


def test_small_chunks_compare_as_whole_tensors(ckpt, tmp_path):
    dst = str(tmp_path / "m.safetensors")
    from ckptool.ops.transform.convert.run import convert

    convert(ckpt, dst, sync=False)
    with open_side(ckpt) as a, open_side(dst) as b:
        assert diff_sides(a, b, chunk_bytes=12).identical
        seen = []
        report = diff_sides(a, b, chunk_bytes=12, progress=lambda d, t: seen.append((d, t)))
        assert report.unchanged == 4 and seen[-1][0] == seen[-1][1]


@given(st.lists(st.integers(1, 7), min_size=1), st.lists(st.integers(1, 7), min_size=1))
def test_aligned_pairs_cover_both_streams(xs, ys):
    n = min(sum(xs), sum(ys))
    xs = _cut(np.arange(n), xs)
    ys = _cut(np.arange(n) * 10, ys)
    pairs = list(_aligned(iter(xs), iter(ys)))
    assert all(len(x) == len(y) for x, y in pairs)
    assert np.array_equal(np.concatenate([x for x, _ in pairs]) * 10, np.concatenate([y for _, y in pairs]))
    assert sum(len(x) for x, _ in pairs) == n


def _cut(arr, sizes):
    out, i = [], 0
    for s in sizes:
        if i >= len(arr):
            break
        out.append(arr[i:i + s])
        i += s
    if i < len(arr):
        out.append(arr[i:])
    return out
