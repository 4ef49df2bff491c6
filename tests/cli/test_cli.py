"""The shell experience: list-variables, inspect, diff, errors and exit codes, exact output."""

import base64
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import ckptool
from clirun import run as run_cli

DATA = pathlib.Path(__file__).parents[1] / "data"
TF1 = str(DATA / "tf1_saver" / "model.ckpt-30")


@pytest.fixture
def run(capsys):
    def go(*argv, code=0):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == code, (out, err)
        return out, err
    return go


@pytest.fixture
def small(tmp_path):
    p = str(tmp_path / "ckpt-1")
    ckptool.write(p, {"dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "dense/bias": np.zeros(3),
                      "step": np.int64(7), "names": np.array([b"ok", b"\xff\xfe"], dtype=object)}, sync=False)
    return p


# --------------------------------------------------------------------------- list-variables


def test_list_variables_golden_text(run):
    out, err = run("list-variables", TF1)
    assert out == ("NAME             DTYPE    SHAPE  SIZE\n"
                   "dense/bias       float32  [3]    12\n"
                   "dense/kernel     float32  [4,3]  48\n"
                   "embedding/table  float64  [5,2]  80\n"
                   "global_step      int64    []     8\n")
    assert err == "# 4 variables, 26 parameters, 148 B\n"


def test_list_variables_json_and_filters(run, small):
    out, _ = run("list-variables", small, "--json")
    doc = json.loads(out)
    assert [v["name"] for v in doc] == ["dense/bias", "dense/kernel", "names", "step"]
    assert doc[1] == {"name": "dense/kernel", "dtype": "float32", "shape": [2, 3], "nbytes": 24}
    out, _ = run("list-variables", small, "--json", "--match", "dense/*", "--match", "step")
    assert [v["name"] for v in json.loads(out)] == ["dense/bias", "dense/kernel", "step"]
    out, _ = run("list-variables", small, "--regex", "ker")
    assert out.splitlines()[1].split() == ["dense/kernel", "float32", "[2,3]", "24"] and len(out.splitlines()) == 2


def test_partitioned_listed_once_with_full_shape(run):
    out, _ = run("-q", "list-variables", DATA / "partitioned", "--json")
    doc = {v["name"]: v for v in json.loads(out)}
    assert doc["emb/weights"]["shape"] == [10, 4] and doc["emb/weights"]["slices"] == 3
    assert not any(n.startswith("\0") for n in doc)


def test_quiet_drops_totals_and_warnings(run):
    out, err = run("-q", "list-variables", DATA / "tf1_saver")
    assert err == "" and out.startswith("NAME")
    _, err = run("list-variables", DATA / "tf1_saver")
    assert "warning" in err and "moved directory" in err


def test_every_fixture_lists_and_verifies(run):
    for idx in sorted(DATA.rglob("*.index")):
        prefix = str(idx)[: -len(".index")]
        out, _ = run("-q", "list-variables", prefix, "--json")
        assert json.loads(out), prefix
        out, _ = run("-q", "inspect", prefix, "--verify")
        assert out.startswith("ok:"), prefix


# --------------------------------------------------------------------------- inspect


def test_inspect_summary_json(run, small):
    out, _ = run("inspect", small, "--json")
    doc = json.loads(out)
    assert doc["format"] == "V2" and doc["variables"] == 4 and doc["object_based"] is False
    assert doc["parameters"] == 6 + 3 + 1 + 2


def test_tensor_json_values_and_binary_strings(run, small):
    out, _ = run("inspect", small, "--tensor", "dense/kernel", "--json")
    assert json.loads(out) == {"name": "dense/kernel", "dtype": "float32", "shape": [2, 3],
                               "value": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]}
    out, _ = run("inspect", small, "--tensor", "names", "--json")
    value = json.loads(out)["value"]
    assert value[0] == "ok" and base64.b64decode(value[1]["base64"]) == b"\xff\xfe"


def test_tensor_text_for_every_dtype_fixture(run):
    prefix = DATA / "dtypes" / "dtypes"
    with ckptool.open(str(prefix)) as ck:
        names = [n for n in ck.names() if n.endswith(("/vector", "/scalar", "/empty_3x0"))]
    for n in names:
        out, _ = run("inspect", prefix, "--tensor", n)
        assert out.splitlines()[0].split()[0] == n


def test_unknown_tensor_suggests_a_close_name(run, small):
    _, err = run("inspect", small, "--tensor", "dense/kernl", code=1)
    assert err.startswith("ckptool: error:") and "did you mean 'dense/kernel'" in err
    assert len(err.strip().splitlines()) == 1


def test_stats_are_right_and_survive_extremes(run, tmp_path):
    p = str(tmp_path / "s")
    big = np.finfo(np.float64).max
    ckptool.write(p, {"x": np.array([big, -big, 0.0, np.nan, np.inf]), "i": np.array([1, 2, 3, 4], np.int8),
                      "c": np.array([3 + 4j], np.complex64), "s": np.array([b"a"], dtype=object)}, sync=False)
    out, _ = run("inspect", p, "--stats", "--json")
    doc = {r["name"]: r for r in json.loads(out)}
    assert doc["x"]["min"] == -big and doc["x"]["max"] == big and doc["x"]["nan"] == 1 and doc["x"]["inf"] == 1
    assert doc["x"]["mean"] == 0.0 and doc["x"]["std"] == pytest.approx(big * np.sqrt(2 / 3))
    assert doc["x"]["zeros"] == 1
    assert doc["i"]["mean"] == 2.5 and doc["i"]["std"] == pytest.approx(np.std([1, 2, 3, 4]))
    assert doc["c"]["max"] == 5.0
    assert doc["s"]["mean"] is None


def test_stats_in_chunks_equal_numpy():
    from ckptool.ops.inspect.stats import tensor_stats

    rng = np.random.default_rng(0)
    a = (rng.standard_normal(100_000) * 1e3 + 5).astype(np.float32)
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ckptool.write(d + "/c", {"a": a}, sync=False)
        with ckptool.open(d + "/c") as ck:
            s = tensor_stats(ck, "a", chunk_bytes=4096)
    f = a.astype(np.float64)
    assert s["mean"] == pytest.approx(f.mean(), rel=1e-12) and s["std"] == pytest.approx(f.std(), rel=1e-9)


def test_verify_names_the_corrupt_tensor(run, small):
    with ckptool.open(small) as ck:
        e = ck.entry(b"dense/kernel")
    data = pathlib.Path(small + ".data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[e.offset] ^= 0x01
    data.write_bytes(bytes(raw))
    out, err = run("inspect", small, "--verify", code=1)
    assert "dense/kernel" in out + err and "dense/bias" not in err


def test_tree_json(run):
    out, _ = run("inspect", DATA / "manager", "--tree", "--json")
    doc = json.loads(out)
    names = {c["name"] for c in doc["children"]}
    assert {"v", "step", "save_counter"} <= names


# --------------------------------------------------------------------------- diff


def test_diff_exit_codes_and_json(run, small, tmp_path):
    out, _ = run("diff", small, small)
    other = str(tmp_path / "o")
    with ckptool.open(small) as ck:
        m = {n: ck.read(n) for n in ck.names()}
    m["dense/kernel"] = m["dense/kernel"] + np.float32(0.5)
    del m["step"]
    m["new"] = np.zeros(1)
    ckptool.write(other, m, sync=False)
    out, _ = run("diff", small, other, "--json", code=1)
    doc = json.loads(out)
    assert doc["added"] == ["new"] or [a["name"] if isinstance(a, dict) else a for a in doc["added"]] == ["new"]
    assert "step" in json.dumps(doc["removed"]) and "dense/kernel" in json.dumps(doc["changed"] or doc["values"])
    run("diff", small, other, "--atol", "1", "--json", code=1)  # still added/removed


# --------------------------------------------------------------------------- errors, pipes, colour


def test_missing_checkpoint_is_one_line_exit_1(run, tmp_path):
    _, err = run("list-variables", tmp_path / "nope", code=1)
    assert err.startswith("ckptool: error:") and "nope" in err and len(err.splitlines()) == 1


def test_truncated_index_is_one_line_exit_1(run, small):
    idx = pathlib.Path(small + ".index")
    idx.write_bytes(idx.read_bytes()[:20])
    _, err = run("list-variables", small, code=1)
    assert err.startswith("ckptool: error:") and ".index" in err and "Traceback" not in err


def test_usage_error_exit_2(run):
    run("list-variables", code=2)
    run("inspect", "x", "--no-such-flag", code=2)


def test_debug_shows_the_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ckptool", "--debug", "list-variables", str(tmp_path / "nope")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" in r.stderr and "MissingError" in r.stderr


def test_closed_pipe_exits_quietly(tmp_path):
    p = str(tmp_path / "many")
    ckptool.write(p, {f"v{i:05d}": np.zeros(1) for i in range(20000)}, sync=False)
    r = subprocess.run(f"{sys.executable} -m ckptool list-variables {p} | head -2", shell=True,
                       capture_output=True, text=True)
    assert r.stdout.count("\n") == 2 and "Traceback" not in r.stderr and "Broken pipe" not in r.stderr


def test_no_colour_when_not_a_terminal(tmp_path, small):
    env = dict(os.environ, TERM="xterm")
    r = subprocess.run([sys.executable, "-m", "ckptool", "list-variables", small], capture_output=True, text=True,
                       env=env)
    assert "\x1b[" not in r.stdout and r.returncode == 0


def test_version_and_help(run):
    out, _ = run("--version")
    assert out.startswith("ckptool ")
    out, _ = run("--help")
    for cmd in ("list-variables", "inspect", "diff", "save", "rewrite-names"):
        assert cmd in out
