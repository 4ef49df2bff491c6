"""convert --cast, --names short, names a format cannot hold, and average."""

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CkptError, RefusedError, UnsupportedError, UsageError
from ckptool.format.cast import CASTABLE, cast_array, parse_casts
from ckptool.format.slots import is_optimizer_name
from ckptool.ops.transform.average import average, resolve_inputs
from ckptool.ops.transform.convert.run import convert
from clirun import completed

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
KERAS = os.path.join(DATA, "keras_adam", "ckpt-1")


def _run(*argv):
    return completed(*argv)


def _bits(a):
    a = np.asarray(a)
    if a.dtype == object:
        return [bytes(x) for x in a.reshape(-1).tolist()], a.shape
    return a.dtype.name, a.shape, np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()


# ---------------------------------------------------------------------------- cast


def test_cast_rounds_as_astype_and_touches_only_the_from_dtype(tmp_path):
    rng = np.random.default_rng(0)
    vals = {"w": rng.standard_normal((64, 33)).astype(np.float32), "d": rng.standard_normal(50),
            "i": np.arange(7, dtype=np.int32), "s": b"text", "h": np.float16([1.5, -2])}
    src, dst = str(tmp_path / "c"), str(tmp_path / "o")
    ckptool.write(src, vals, sync=False)
    r = _run("convert", src, dst, "--cast", "float32=bfloat16", "--cast", "float64=float16")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # status lines go to stderr
    with ckptool.open(dst) as ck:
        assert _bits(ck.read("w")) == _bits(vals["w"].astype(ml_dtypes.bfloat16))
        assert _bits(ck.read("d")) == _bits(vals["d"].astype(np.float16))
        for n in ("i", "h"):
            assert _bits(ck.read(n)) == _bits(vals[n])
        assert ck.read("s") == b"text"
    st = str(tmp_path / "o.safetensors")
    convert(src, st, casts={"float32": "bfloat16"})
    with ckptool.open(dst) as ck, ckptool.open(src):
        pass
    back = str(tmp_path / "back")
    convert(st, back)
    with ckptool.open(back) as ck:
        assert ck.variable("w").dtype == "bfloat16"
        assert _bits(ck.read("w")) == _bits(vals["w"].astype(ml_dtypes.bfloat16))


def test_cast_overflow_refused_then_allowed(tmp_path):
    src, dst = str(tmp_path / "c"), str(tmp_path / "o")
    ckptool.write(src, {"big": np.float32([1e5, 1.0, np.inf, -7e4]), "ok": np.float32([1, 2])}, sync=False)
    r = _run("convert", src, dst, "--cast", "float32=float16")
    assert r.returncode == 1 and "'big' (2 values" in r.stderr and "ok" not in r.stderr.split("'big'")[0]
    assert sorted(os.listdir(tmp_path)) == ["c.data-00000-of-00001", "c.index"]
    r = _run("convert", src, tmp_path / "o.safetensors", "--cast", "float32=float16")
    assert r.returncode == 1 and sorted(os.listdir(tmp_path)) == ["c.data-00000-of-00001", "c.index"]
    r = _run("convert", src, dst, "--cast", "float32=float16", "--allow-overflow", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["overflow"] == {"big": 2}
    with ckptool.open(dst) as ck:
        assert ck.read("big").tolist() == [np.inf, 1.0, np.inf, -np.inf]


@given(st.lists(st.floats(width=64, allow_nan=True, allow_infinity=True), max_size=30),
       st.sampled_from(CASTABLE), st.sampled_from(CASTABLE))
def test_cast_array_is_astype_and_counts_overflow(values, src, dst):
    from ckptool.format import dtypes

    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.array(values, np.float64).astype(dtypes.from_name(src).numpy)
        want = arr.astype(dtypes.from_name(dst).numpy)
    out, n = cast_array(arr, dst)
    assert _bits(out) == _bits(want)
    assert n == sum(1 for a, b in zip(arr.astype(np.float64), want.astype(np.float64))
                    if np.isfinite(a) and np.isinf(b))


@pytest.mark.parametrize("spec", ["float32", "float32=int8", "int4=float32", "float32=float32", "x=y"])
def test_bad_cast_spec_is_a_usage_error(tmp_path, spec):
    with pytest.raises(UsageError):
        parse_casts([spec])
    r = _run("convert", KERAS, tmp_path / "o", "--cast", spec)
    assert r.returncode == 2 and "--cast" in r.stderr
    assert not os.listdir(tmp_path)


# ---------------------------------------------------------------------------- formats


def test_unsupported_dtype_named_unless_excluded(tmp_path):
    src = str(tmp_path / "c")
    ckptool.write(src, {"q": np.arange(4).astype(ml_dtypes.int4), "w": np.ones(2, np.float32)}, sync=False)
    with pytest.raises(UnsupportedError, match="'q' has dtype int4"):
        convert(src, str(tmp_path / "o.safetensors"))
    convert(src, str(tmp_path / "o.safetensors"), exclude=["q"])
    assert not os.path.exists(tmp_path / "o.npz")


@pytest.mark.parametrize("dst", ["model.pt", "model.bin", "w.h5", "x.pth"])
def test_foreign_suffix_refused_unless_to(tmp_path, dst):
    r = _run("convert", KERAS, tmp_path / dst)
    assert r.returncode == 2 and ".safetensors" in r.stderr and ".npz" in r.stderr
    assert not os.listdir(tmp_path)
    r = _run("convert", KERAS, tmp_path / dst, "--to", "tf")
    assert r.returncode == 0, r.stderr
    assert os.path.exists(tmp_path / (dst + ".index"))


def test_ckpt_suffix_is_a_prefix(tmp_path):
    assert _run("convert", KERAS, tmp_path / "model.ckpt").returncode == 0
    assert os.path.exists(tmp_path / "model.ckpt.index")


@pytest.mark.parametrize("names", [["w", "w\0evil"], ["x", "x.npy"], ["ok", b"bad\xff".decode("utf-8", "surrogateescape")]])
def test_npz_refuses_names_it_cannot_hold_distinctly(tmp_path, names):
    src = str(tmp_path / "c")
    ckptool.write(src, {n: np.float32([i]) for i, n in enumerate(names)}, sync=False)
    with pytest.raises(UnsupportedError) as info:
        convert(src, str(tmp_path / "o.npz"))
    assert repr(names[-1].encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")) in str(info.value)
    assert not os.path.exists(tmp_path / "o.npz")


@pytest.mark.parametrize("name", ["__metadata__", b"bad\xff".decode("utf-8", "surrogateescape")])
def test_safetensors_refuses_names_it_cannot_hold(tmp_path, name):
    src = str(tmp_path / "c")
    ckptool.write(src, {name: np.float32([1]), "w": np.float32([2])}, sync=False)
    with pytest.raises(UnsupportedError):
        convert(src, str(tmp_path / "o.safetensors"))
    assert not os.path.exists(tmp_path / "o.safetensors")


def test_names_short_drops_optimizer_and_comes_back(tmp_path):
    st, back = str(tmp_path / "s.safetensors"), str(tmp_path / "back")
    convert(KERAS, st, names="short")
    raw = open(st, "rb").read()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    meta = header.pop("__metadata__")
    assert meta["format"] == "pt"
    assert all(".ATTRIBUTES" not in n and not n.startswith("optimizer/") for n in header)
    assert "model/_functional/_operations/1/_kernel" in header
    convert(st, back)
    # the way back gives what rewrite-names --strip-optimizer gives: the model's weights,
    # re-keyed under the model where Keras 3 keyed them under the optimizer
    from ckptool.ops.transform.rename.rewrite import rewrite_names

    ref = str(tmp_path / "ref")
    rewrite_names(KERAS, ref, [], strip_optimizer=True)
    with ckptool.open(ref) as a, ckptool.open(back) as b:
        assert a.names() == b.names()
        assert not any(n.startswith("optimizer/") for n in b.names())
        for n in a.names():
            assert _bits(a.read(n)) == _bits(b.read(n)), n


def test_names_short_of_a_name_based_checkpoint_drops_slots_by_name(tmp_path):
    src = str(tmp_path / "bert" / "model.ckpt-9")
    ckptool.write(src, {"bert/w": np.ones(3, np.float32), "bert/w/adam_m": np.zeros(3, np.float32),
                        "bert/w/adam_v": np.zeros(3, np.float32), "w/Adam": np.zeros(1, np.float32),
                        "global_step": np.int64(9)}, sync=False)
    st_path, back = str(tmp_path / "s.safetensors"), str(tmp_path / "back")
    convert(src, st_path, names="short")
    convert(st_path, back)
    with ckptool.open(src) as a, ckptool.open(back) as b:
        assert b.names() == [n for n in a.names() if not is_optimizer_name(n)]
        assert b.names() == ["bert/w", "global_step"]
        for n in b.names():
            assert _bits(a.read(n)) == _bits(b.read(n))


def test_full_round_trip_through_safetensors_is_exact(tmp_path):
    for src in (KERAS, os.path.join(DATA, "strings", "strings"), os.path.join(DATA, "tf1_saver", "model.ckpt-30")):
        st, back = str(tmp_path / "m.safetensors"), str(tmp_path / "back")
        convert(src, st, force=True)
        convert(st, back, force=True)
        with ckptool.open(src) as a, ckptool.open(back) as b:
            assert a.names() == b.names()
            for v in a.variables():
                assert b.variable(v.name).dtype == v.dtype
                assert _bits(a.read(v.name)) == _bits(b.read(v.name)), v.name


# ---------------------------------------------------------------------------- optimizer table


@pytest.mark.parametrize("name, slot", [
    ("bert/encoder/layer_0/attention/self/query/kernel/adam_m", True),
    ("bert/encoder/layer_0/attention/self/query/kernel/adam_v", True),
    ("dense/kernel/Adam", True), ("dense/kernel/Adam_1", True), ("beta1_power", True), ("beta2_power_3", True),
    ("w/Momentum", True), ("w/RMSProp", True), ("w/RMSProp_1", True), ("w/Adagrad", True),
    ("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", True),
    ("model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", True),
    ("global_step", False), ("bert/embeddings/word_embeddings", False), ("adam_m_layer/kernel", False),
    ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", False),
])
def test_optimizer_table(name, slot):
    assert is_optimizer_name(name) is slot


# ---------------------------------------------------------------------------- average


def _series(tmp_path, n=3, object_based=False):
    rng = np.random.default_rng(1)
    paths, values = [], []
    for i in range(n):
        v = {"dense/kernel": rng.standard_normal((5, 4)).astype(np.float32),
             "emb": rng.standard_normal(6).astype(ml_dtypes.bfloat16),
             "half": rng.standard_normal(3).astype(np.float16),
             "global_step": np.int64(100 * (i + 1)), "dense/kernel/Adam": rng.standard_normal((5, 4)).astype(np.float32),
             "beta1_power": np.float32(0.9 ** (i + 1)), "flag": np.bool_(i % 2), "txt": f"t{i}".encode()}
        p = str(tmp_path / "runs" / f"model.ckpt-{100 * (i + 1)}")
        ckptool.write(p, v, sync=False)
        paths.append(p)
        values.append(v)
    return paths, values


def test_average_float64_mean_rest_from_newest(tmp_path):
    paths, values = _series(tmp_path)
    out = str(tmp_path / "avg" / "ckpt")
    res = average(list(reversed(paths)), out)  # order given does not matter: steps decide
    assert res.inputs == paths
    with ckptool.open(out) as ck:
        for n in ("dense/kernel", "emb", "half"):
            ref = (sum(v[n].astype(np.float64) for v in values) / len(values)).astype(values[0][n].dtype)
            assert _bits(ck.read(n)) == _bits(ref), n
        for n in ("global_step", "dense/kernel/Adam", "beta1_power", "flag"):
            assert _bits(ck.read(n)) == _bits(values[-1][n]), n
        assert ck.read("txt") == b"t2"
    out2 = str(tmp_path / "avg2" / "ckpt")
    r = _run("average", tmp_path / "runs", "--last", "2", "-o", out2, "--strip-optimizer")
    assert r.returncode == 0, r.stderr
    with ckptool.open(out2) as ck:
        assert sorted(ck.names()) == ["dense/kernel", "emb", "flag", "global_step", "half", "txt"]
        ref = ((values[1]["dense/kernel"].astype(np.float64) + values[2]["dense/kernel"]) / 2).astype(np.float32)
        assert _bits(ck.read("dense/kernel")) == _bits(ref)


def test_average_keras_keeps_object_graph(tmp_path):
    a = str(tmp_path / "a" / "ckpt-1")
    convert(KERAS, a)
    out = str(tmp_path / "o")
    average([KERAS, a], out)
    with ckptool.open(KERAS) as k, ckptool.open(out) as o:
        assert k.names() == o.names()
        assert o.read("_CHECKPOINTABLE_OBJECT_GRAPH") == k.read("_CHECKPOINTABLE_OBJECT_GRAPH")
        for n in k.names():
            if n != "_CHECKPOINTABLE_OBJECT_GRAPH":
                assert _bits(o.read(n)) == _bits(k.read(n))  # the mean of two equal inputs
    out = str(tmp_path / "s")
    res = average([KERAS, a], out, strip_optimizer=True)
    with ckptool.open(out) as o:
        assert res.dropped and not any(n in o.names() for n in res.dropped)
        assert o.object_graph() is not None


def test_average_inputs_must_agree(tmp_path):
    a, b, c = (str(tmp_path / x) for x in "abc")
    ckptool.write(a, {"w": np.zeros(3, np.float32), "z": np.zeros(1)}, sync=False)
    ckptool.write(b, {"w": np.zeros(4, np.float32), "z": np.zeros(1)}, sync=False)
    ckptool.write(c, {"w": np.zeros(3, np.float32)}, sync=False)
    with pytest.raises(CkptError, match="'w' differs"):
        average([a, b], str(tmp_path / "o"))
    with pytest.raises(CkptError, match="'z' is not in"):
        average([a, c], str(tmp_path / "o"))
    assert not os.path.exists(tmp_path / "o.index")
    with pytest.raises(UsageError):
        resolve_inputs([a, b], last=2)
    r = _run("average", a, b, "--last", "2", "-o", tmp_path / "o")
    assert r.returncode == 2 and "--last takes one directory" in r.stderr
    with pytest.raises(UsageError, match="given twice"):
        average([a, a + ".index"], str(tmp_path / "o"))
    ckptool.write(str(tmp_path / "o"), {"x": np.zeros(1)}, sync=False)
    with pytest.raises(RefusedError, match="--force"):
        average([a, _copy(a, tmp_path / "a2")], str(tmp_path / "o"))


def _copy(src, dst):
    convert(src, str(dst))
    return str(dst)


# Peak RSS in MB of this process's own address space: VmHWM. Not ru_maxrss, which on Linux
# keeps the high-water mark of the forked copy of the parent across exec (a pytest process
# grown to 600 MB by earlier tests would be reported as the child's peak).
_PEAK = """
import resource, sys
from ckptool.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
try:
    with open("/proc/self/status") as f:
        print(next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) // 1024)
except OSError:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _peak_mb(*argv) -> int:
    out = subprocess.run([sys.executable, "-c", _PEAK, "-q", *map(str, argv)], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


#: the tensors of the memory test: 16 of 16 MiB (256 MiB in all)
TENSOR_MB, TENSORS = 16, 16


@pytest.mark.slow
def test_memory_bounded_by_the_largest_tensor(tmp_path):
    """256 MiB in 16 tensors of 16 MiB: to .safetensors and back, a cast and an average of two,
    each within 6 tensors' worth (96 MB) of the peak resident memory of the same command on a
    checkpoint of one small tensor (the imports), where holding the checkpoint would take 256 MiB
    more (reads are positioned reads, no mmap: resident is anonymous). The bound is a multiple of
    the largest tensor, so smaller tensors test the rule as 64 MiB ones did, with a quarter of the I/O."""
    for k in (1, 2):
        ckptool.write(str(tmp_path / "runs" / f"ckpt-{k}"),
                      ((f"layer{i}/w", np.full((TENSOR_MB << 20) // 4, k + i, np.float32)) for i in range(TENSORS)),
                      sync=False)
        ckptool.write(str(tmp_path / "tiny" / f"ckpt-{k}"), {"layer0/w": np.full(4, k, np.float32)}, sync=False)
    bound = 6 * TENSOR_MB
    for runs in ("runs", "tiny"):
        src, out = str(tmp_path / runs / "ckpt-2"), tmp_path / f"{runs}-out"
        argvs = (["convert", src, out / "m.safetensors"], ["convert", out / "m.safetensors", out / "b"],
                 ["convert", src, out / "c", "--cast", "float32=bfloat16"],
                 ["average", tmp_path / runs, "--last", "2", "-o", out / "a"])
        peaks = [_peak_mb(*argv) for argv in argvs]
        if runs == "runs":
            big = peaks
        else:
            for argv, base, peak in zip(argvs, peaks, big):
                assert peak - base < bound, (argv[0], argv[-1], base, peak)
    with ckptool.open(str(tmp_path / "runs-out" / "a")) as ck:
        assert ck.read("layer3/w")[:2].tolist() == [4.5, 4.5]


@pytest.mark.parametrize("strip", [False, True])
def test_average_dry_run_reports_what_the_real_run_writes(tmp_path, strip):
    paths, _ = _series(tmp_path)
    a = str(tmp_path / "a")
    convert(KERAS, a)
    for inputs in (paths, [KERAS, a]):
        extra = ["--strip-optimizer"] if strip else []
        out = tmp_path / ("o" + str(len(inputs)) + str(strip))
        dry = _run("average", *inputs, "-o", out, "--dry-run", "--json", *extra)
        real = _run("average", *inputs, "-o", out, "--json", *extra)
        assert dry.returncode == real.returncode == 0, dry.stderr + real.stderr
        d, r = json.loads(dry.stdout), json.loads(real.stdout)
        assert r.pop("files") and d.pop("files") == []
        assert d == r
