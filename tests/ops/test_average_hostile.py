"""average, hostile: never its own input, exact for identical inputs, finite for finite ones."""

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import RefusedError
from ckptool.ops.transform.average import average, running_mean
from clirun import completed


def _two(tmp_path):
    a, b = str(tmp_path / "run" / "ckpt-1"), str(tmp_path / "run" / "ckpt-2")
    ckptool.write(a, {"w": np.full(4, 1.0, np.float32)}, sync=False)
    ckptool.write(b, {"w": np.full(4, 3.0, np.float32)}, sync=False)
    return a, b


def _files(d):
    return {os.path.join(r, f): open(os.path.join(r, f), "rb").read() for r, _, fs in os.walk(d) for f in fs}


def _read_w(prefix):
    with ckptool.open(prefix) as ck:
        return ck.read("w").tolist()


@pytest.mark.parametrize("how", ["same", "index", "data", "dir", "symlink_dir", "hardlink"])
def test_average_refuses_its_own_input_even_with_force(tmp_path, how):
    a, b = _two(tmp_path)
    out, inputs = b, [a, b]
    if how == "index":
        inputs = [a, b + ".index"]
    elif how == "data":
        inputs = [a, b + ".data-00000-of-00001"]
    elif how == "dir":  # the directory's latest is b (no state file: the newest by step)
        inputs = [a, str(tmp_path / "run")]
    elif how == "symlink_dir":
        os.symlink(tmp_path / "run", tmp_path / "link")
        out = str(tmp_path / "link" / "ckpt-2")
    elif how == "hardlink":  # a prefix whose .index is b's .index by a hard link
        os.link(b + ".index", str(tmp_path / "other.index"))
        out = str(tmp_path / "other")
    before = _files(tmp_path / "run")
    if how == "dir":
        inputs = [a, b]
        r = completed("average", str(tmp_path / "run"), "--last", "2", "-o", out, "--force")
    else:
        r = completed("average", *inputs, "-o", out, "--force")
    assert r.returncode == 1, r
    assert r.stderr.startswith("ckptool: error: ") and len(r.stderr.splitlines()) == 1, r.stderr
    assert "source itself" in r.stderr
    assert _files(tmp_path / "run") == before
    with pytest.raises(RefusedError):
        average(inputs, out, force=True, dry_run=True)


def test_average_to_an_unrelated_existing_checkpoint_with_force_still_works(tmp_path):
    a, b = _two(tmp_path)
    out = str(tmp_path / "avg")
    ckptool.write(out, {"w": np.zeros(4, np.float32)}, sync=False)
    assert completed("average", a, b, "-o", out).returncode == 1
    assert completed("average", a, b, "-o", out, "--force").returncode == 0
    assert _read_w(out) == [2.0] * 4


# ---------------------------------------------------------------------------- the mean itself

FLOAT_DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16]
_finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")).tolist()


def _mean(arrays):
    dtype = np.asarray(arrays[0]).dtype
    return running_mean(iter(arrays)).astype(dtype)


@settings(max_examples=300, deadline=None)
@given(st.lists(_finite64, min_size=1, max_size=6), st.integers(2, 9), st.sampled_from(FLOAT_DTYPES))
def test_mean_of_n_copies_is_the_input_bit_for_bit(xs, n, dtype):
    with np.errstate(over="ignore"):
        x = np.array(xs, np.float64).astype(dtype)  # beyond float16's range: inf, which must come back too
    assert _bits(_mean([x.copy() for _ in range(n)])) == _bits(x)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_finite64, min_size=3, max_size=3), min_size=1, max_size=7), st.sampled_from(FLOAT_DTYPES))
def test_finite_inputs_give_a_finite_mean_within_their_bounds(rows, dtype):
    with np.errstate(over="ignore"):
        arrays = [np.array(r, np.float64).astype(dtype) for r in rows]
    arrays = [np.where(np.isfinite(a.astype(np.float64)), a, np.zeros_like(a)) for a in arrays]  # finite in dtype
    got = _mean(arrays).astype(np.float64)
    stack = np.stack([a.astype(np.float64) for a in arrays])
    assert np.isfinite(got).all()
    assert (got >= stack.min(axis=0)).all() and (got <= stack.max(axis=0)).all()


@pytest.mark.parametrize("xs, want", [([0.1] * 3, 0.1), ([1.7e308, 1.7e308], 1.7e308), ([-1.7e308] * 5, -1.7e308),
                                      ([1.7e308, -1.7e308], 0.0), ([1.7e308, 1.7e308, -1.7e308], 1.7e308 / 3),
                                      ([5e-324] * 4, 5e-324), ([1.0, 2.0], 1.5)])
def test_hostile_float64_means(xs, want):
    got = _mean([np.array([x]) for x in xs])[0]
    assert got == pytest.approx(want, rel=1e-15) and np.isfinite(got)
    if len(set(xs)) == 1:
        assert got == xs[0]


def test_inf_and_nan_inputs_as_an_ieee_sum():
    a = np.array([np.inf, np.inf, np.nan, 1.0, -np.inf])
    b = np.array([2.0, -np.inf, 1.0, np.inf, -np.inf])
    got = _mean([a, b])
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == np.inf and got[4] == -np.inf


def test_average_cli_gives_identical_float64_inputs_back(tmp_path):
    x = np.array([0.1, 1.7e308, -1.7e308, 5e-324, 1 / 3], np.float64)
    paths = []
    for i in range(3):
        paths.append(str(tmp_path / "run" / f"ckpt-{i + 1}"))
        ckptool.write(paths[-1], {"w": x}, sync=False)
    ckptool.write(str(tmp_path / "far" / "ckpt-1"), {"w": -x}, sync=False)
    r = completed("average", *paths, "-o", tmp_path / "avg")
    assert r.returncode == 0, r.stderr
    with ckptool.open(str(tmp_path / "avg")) as ck:
        assert _bits(ck.read("w")) == _bits(x)
    assert completed("average", paths[0], str(tmp_path / "far" / "ckpt-1"), "-o", tmp_path / "avg2").returncode == 0
    with ckptool.open(str(tmp_path / "avg2")) as ck:
        got = ck.read("w")
    assert np.isfinite(got).all() and (got == 0).all()


def test_blocks_cover_a_tensor_larger_than_one_block(tmp_path):
    from ckptool.ops.transform import average as mod
    a = np.arange(mod.BLOCK * 2 + 7, dtype=np.float64).reshape(-1, 1)
    b = a * 3
    assert (_mean([a, b]) == a * 2).all()


def _exact(xs):
    from fractions import Fraction

    return sum(Fraction(float(v)) for v in xs) / len(xs)


def _nearest(got, xs):
    """``got`` is a double nearest to the exact mean of ``xs`` (at a tie, either)."""
    from fractions import Fraction

    exact, g = _exact(xs), Fraction(float(got))
    neighbour = Fraction(float(np.nextafter(got, -np.inf if exact < g else np.inf)))
    return abs(g - exact) <= abs(neighbour - exact)


def _faithful(got, xs):
    """``got`` is one of the two doubles around the exact mean of ``xs``."""
    from fractions import Fraction

    exact, g = _exact(xs), Fraction(float(got))
    if g == exact:
        return True
    other = Fraction(float(np.nextafter(got, np.inf if exact > g else -np.inf)))
    return min(g, other) <= exact <= max(g, other)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e300, 1e300, allow_nan=False), min_size=2, max_size=12))
def test_float64_mean_is_within_an_ulp_of_the_exact_mean(xs):
    """Compensated: at worst the other neighbour of the exact mean (a near-tie the 106 bits of
    the compensated mean cannot resolve, as 1 beside 5e62), never further."""
    got = _mean([np.array([x]) for x in xs])[0]
    assert _faithful(got, xs), (got, xs)


def test_float64_mean_is_correctly_rounded_where_the_naive_one_is_not():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((7, 2000)) * 10.0 ** rng.integers(-20, 20, (7, 2000))
    got, naive = _mean(list(xs)), xs.sum(axis=0) / 7
    ours = sum(_nearest(got[j], xs[:, j]) for j in range(2000))
    theirs = sum(_nearest(naive[j], xs[:, j]) for j in range(2000))
    assert ours >= 1990 and theirs < 1600, (ours, theirs)
