"""TensorFlow restores what `convert` writes bit-exactly; npz/safetensors equal TF's get_tensor."""

import glob
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import ckptool  # noqa: E402
from ckptool.ops.read.source import open_specs  # noqa: E402
from ckptool.ops.transform.convert.run import convert  # noqa: E402

pytestmark = pytest.mark.interop

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
FIXTURES = sorted(p[: -len(".index")] for p in glob.glob(os.path.join(DATA, "**", "*.index"), recursive=True)
                  if "bigendian" not in p) + [
    os.path.join(DATA, "v1", "single", "v1ckpt"), os.path.join(DATA, "v1", "sharded", "v1sharded-?????-of-00003")]


def _bits(a):
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind == "S":
        return [bytes(x) for x in a.reshape(-1).tolist()], a.shape
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes(), a.shape, a.dtype.name


def _tf_values(path):
    r = tf.train.load_checkpoint(path)
    shapes = r.get_variable_to_shape_map()
    dts = r.get_variable_to_dtype_map()
    out = {}
    for n in shapes:
        if dts[n] == tf.variant or dts[n].is_quantized or dts[n] == tf.resource:
            continue
        try:
            out[n] = r.get_tensor(n)
        except (ValueError, NotImplementedError, tf.errors.UnimplementedError):
            continue  # a dtype TF's own Python reader cannot return (TF is no oracle for it)
    return out


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: os.path.relpath(p, DATA))
@pytest.mark.parametrize("shards", [1, 3])
def test_tf_restores_converted_v2_bit_exactly(tmp_path, src, shards):
    dst = str(tmp_path / "out")
    convert(src, dst, num_shards=shards)
    want, got = _tf_values(src), _tf_values(dst)
    assert set(got) >= set(want)  # TF may read from the output what its reader refuses in the source
    for n in want:
        assert _bits(got[n]) == _bits(want[n]), n
    with ckptool.open(src) as ck:
        for n in set(got) - set(want):
            assert _bits(got[n]) == _bits(ck.read(n)), n


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: os.path.relpath(p, DATA))
@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_npz_and_safetensors_equal_tf_get_tensor(tmp_path, src, suffix):
    dst = str(tmp_path / ("out" + suffix))
    res = convert(src, dst, skip_unsupported=True)
    want = _tf_values(src)
    opened = open_specs(dst)
    try:
        got = {s.name: np.asarray(s.load()) for s in opened.specs}
    finally:
        opened.close()
    assert set(got) | set(res.skipped) >= set(want)
    for n, v in got.items():
        if n not in want:
            continue  # TF cannot return it from the source; tests/ops/test_convert.py checks it against ckptool
        w = want[n]
        if isinstance(w, bytes) or (isinstance(w, np.ndarray) and w.dtype == object):
            assert _bits(np.asarray(w, dtype=object))[0] == _bits(np.asarray(v, dtype=object))[0]
            continue
        assert _bits(v) == _bits(w), n


def test_tf_saver_restores_converted_partitioned_kept_as_slices(tmp_path):
    src = os.path.join(DATA, "partitioned", "model.ckpt")
    dst = str(tmp_path / "kept")
    convert(src, dst, keep_slices=True)
    want, got = _tf_values(src), _tf_values(dst)
    assert sorted(got) == sorted(want)
    for n in want:
        assert _bits(got[n]) == _bits(want[n]), n


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: os.path.relpath(p, DATA))
def test_tf_reads_a_safetensors_round_trip_as_the_source(tmp_path, src):
    """checkpoint -> .safetensors -> checkpoint: TF reads every tensor the format holds (strings and
    the object graph included, via __metadata__) bit for bit, under the same names and dtypes."""
    st, back = str(tmp_path / "m.safetensors"), str(tmp_path / "back")
    res = convert(src, st, skip_unsupported=True)
    convert(st, back)
    want, got = _tf_values(src), _tf_values(back)
    skipped = set(res.skipped)
    assert set(got) >= set(want) - skipped
    wdt = tf.train.load_checkpoint(src).get_variable_to_dtype_map()
    gdt = tf.train.load_checkpoint(back).get_variable_to_dtype_map()
    for n in set(want) - skipped:
        assert gdt[n] == wdt[n], n
        assert _bits(got[n]) == _bits(want[n]), n
