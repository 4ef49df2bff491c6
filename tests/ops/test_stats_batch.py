"""inspect --stats on many small tensors (ckptool/ops/inspect/stats.py's batches): batched, every
value bit for bit what the one-tensor path gives, problems reported as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import ChecksumError
from ckptool.ops.inspect.stats import tensor_stats, tensors_stats

DTYPES = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.bool_,
          np.complex64]
SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-300, 6.5e4, 3e38, -7.0]


@st.composite
def tensors(draw):
    out = {}
    for i in range(draw(st.integers(1, 30))):
        dt = draw(st.sampled_from(DTYPES))
        shape = draw(st.sampled_from([(), (1,), (4,), (3, 3), (0,), (70,), (5000,)]))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        n = int(np.prod(shape))
        if np.dtype(dt).kind == "f":
            a = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3)).astype(dt)
            if n and draw(st.booleans()):
                with np.errstate(over="ignore"):  # 3e38 is an infinity in float16
                    a[rng.integers(0, n)] = draw(st.sampled_from(SPECIAL))
            if n and draw(st.booleans()):  # zeros of both signs: which one min/max give
                a[rng.integers(0, n, size=max(1, n // 2))] = draw(st.sampled_from([0.0, -0.0]))
                a[rng.integers(0, n, size=max(1, n // 2))] = draw(st.sampled_from([0.0, -0.0]))
        elif np.dtype(dt).kind == "b":
            a = rng.integers(0, 2, n).astype(dt)
        elif np.dtype(dt).kind == "c":
            a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
        else:
            info = np.iinfo(dt)
            a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        out[f"t{i:03d}/{np.dtype(dt).name}"] = a.reshape(shape)
    return out


def _same(ck, names):
    batched = tensors_stats(ck, names)
    one = [tensor_stats(ck, n) for n in names]
    assert json.dumps(batched) == json.dumps(one)  # bit for bit, NaN/None and int/float kinds alike


@settings(max_examples=80, deadline=None)
@given(tensors(), st.integers(1, 3))
def test_batched_statistics_equal_the_one_tensor_path(tmp_path_factory, values, shards):
    d = tmp_path_factory.mktemp("stats")
    ckptool.write(str(d / "ckpt"), values, num_shards=shards, sync=False)
    with ckptool.open(str(d / "ckpt")) as ck:
        _same(ck, [v.name for v in ck.variables()])
        _same(ck, sorted(ck.names(), reverse=True))  # any order: reads not adjacent


def test_a_corrupt_small_tensor_is_reported_as_before(tmp_path):
    values = {f"v{i:02d}": np.full(4, i, np.float32) for i in range(10)}
    ckptool.write(str(tmp_path / "ckpt"), values, sync=False)
    with ckptool.open(str(tmp_path / "ckpt")) as ck:
        e = ck.lookup("v05")
        path = ck.shard_path(e.shard_id)
    with open(path, "r+b") as f:
        f.seek(e.offset + 1)
        b = f.read(1)
        f.seek(e.offset + 1)
        f.write(bytes([b[0] ^ 0x40]))
    with ckptool.open(str(tmp_path / "ckpt")) as ck:
        with pytest.raises(ChecksumError) as batched:
            tensors_stats(ck, ck.names())
        with pytest.raises(ChecksumError) as one:
            tensor_stats(ck, "v05")
    assert str(batched.value) == str(one.value) and "v05" in str(one.value)
