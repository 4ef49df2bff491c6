"""The reader against TF-written fixtures: every value bit-identical to TF's get_tensor.

tests/data/<fixture>/expected.json records what TensorFlow itself returned
(tests/tf_fixtures/generate.py); these tests need no TensorFlow.
"""

import base64
import hashlib
import json
import pathlib
import warnings

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError, CkptWarning, MissingError, TensorNotFoundError

DATA = pathlib.Path(__file__).parents[1] / "data"


def _cases():
    for exp in sorted(DATA.glob("*/expected.json")):
        doc = json.loads(exp.read_text())
        for base, ck in sorted(doc["checkpoints"].items()):
            yield pytest.param(exp.parent, base, ck, id=f"{exp.parent.name}/{base}")


CASES = list(_cases())


def _prefix(fixture_dir, base):
    hits = sorted(p for p in fixture_dir.rglob("*") if p.name in (base + ".index", base)
                  or (p.is_file() and p.name.startswith(base + "-") and "-of-" in p.name and p.suffix == ""))
    for p in hits:
        if p.name == base + ".index":
            return str(p)[: -len(".index")]
    for p in hits:
        if p.name == base:
            return str(p)
    # A sharded V1 checkpoint: name it by its spec.
    first = hits[0].name
    return str(hits[0].parent / (first.rsplit("-", 3)[0] + "-?????-of-" + first.rsplit("-", 1)[1]))


@pytest.mark.skipif(not CASES, reason="no fixtures generated")
@pytest.mark.parametrize("fixture_dir,base,expected", CASES)
def test_fixture_matches_tf(fixture_dir, base, expected):
    prefix = _prefix(fixture_dir, base)
    with ckptool.open(prefix) as ck:
        variables = ck.variables()
        assert [[v.name, list(v.shape)] for v in variables] == expected["list_variables"]
        assert {v.name: v.dtype for v in variables} == expected["dtypes"]
        for name, want in expected["tensors"].items():
            if "error" in want:
                continue  # TF itself could not return it (variant); ours is checked by verify
            got = ck.read(name)
            assert list(got.shape) == want["shape"], name
            if "strings_b64" in want:
                assert [base64.b64encode(bytes(x)).decode() for x in got.ravel()] == want["strings_b64"], name
            else:
                assert str(got.dtype) == want["numpy_dtype"], name
                assert hashlib.sha256(np.ascontiguousarray(got).tobytes()).hexdigest() == want["sha256"], name
        assert all(err is None for _, err in ck.verify())


def _first(name):
    d = DATA / name
    if not d.is_dir():
        pytest.skip(f"fixture {name} not generated")
    return d


def _index_prefixes(d):
    return sorted(str(p)[: -len(".index")] for p in d.rglob("*.index"))


def test_argument_forms_resolve_to_one_prefix():
    d = _first("manager")
    with ckptool.open(str(d)) as ck:
        latest = ck.prefix
    for form in (latest, latest + ".index", latest + ".data-00000-of-00001", str(d) + "/"):
        with ckptool.open(form) as ck:
            assert ck.prefix.rstrip("/") == latest


def test_moved_directory_falls_back_with_warning():
    d = _first("tf1_saver")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ckptool.open(str(d)) as ck:
            assert pathlib.Path(ck.prefix).parent == d
    assert any(issubclass(x.category, CkptWarning) and "moved" in str(x.message) for x in w)


def test_saved_model_directory():
    d = _first("savedmodel")
    sm = next(p.parent for p in d.rglob("saved_model.pb"))
    with ckptool.open(str(sm)) as ck:
        assert ck.prefix.endswith("variables/variables")
        assert ck.variables()


def test_directory_with_several_checkpoints_and_no_state(tmp_path):
    for name in ("a", "b"):
        ckptool.write(str(tmp_path / name), {"x": np.zeros(2, np.float32)})
    with pytest.raises(MissingError, match="2 checkpoints here"):
        ckptool.open(str(tmp_path))


def test_directory_with_one_checkpoint(tmp_path):
    ckptool.write(str(tmp_path / "only"), {"x": np.zeros(2, np.float32)})
    with ckptool.open(str(tmp_path)) as ck:
        assert ck.prefix == str(tmp_path / "only")


def test_missing_checkpoint_suggests_close_name(tmp_path):
    ckptool.write(str(tmp_path / "ckpt-10"), {"x": np.zeros(2, np.float32)})
    with pytest.raises(MissingError, match="did you mean .*ckpt-10"):
        ckptool.open(str(tmp_path / "ckpt-1O"))


def test_unknown_tensor_suggests_close_name(tmp_path):
    ckptool.write(str(tmp_path / "c"), {"dense/kernel": np.zeros(2, np.float32)})
    with ckptool.open(str(tmp_path / "c")) as ck:
        with pytest.raises(TensorNotFoundError, match="did you mean 'dense/kernel'"):
            ck.read("dense/kernal")


def test_missing_shard_is_reported_on_read(tmp_path):
    p = tmp_path / "c"
    ckptool.write(str(p), {"x": np.arange(3, dtype=np.int32)})
    (tmp_path / "c.data-00000-of-00001").unlink()
    with ckptool.open(str(p)) as ck:
        assert [v.name for v in ck.variables()] == ["x"]  # the index alone lists
        with pytest.raises(MissingError, match="data shard 0 of 1 is missing"):
            ck.read("x")


def test_truncated_shard_is_an_error(tmp_path):
    p = tmp_path / "c"
    ckptool.write(str(p), {"x": np.arange(30, dtype=np.int32)})
    data = tmp_path / "c.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:50])
    with ckptool.open(str(p)) as ck:
        with pytest.raises(CkptError, match="runs past the end"):
            ck.read("x")


def test_data_crc_mismatch_names_tensor(tmp_path):
    p = tmp_path / "c"
    ckptool.write(str(p), {"x": np.arange(30, dtype=np.int32)})
    data = tmp_path / "c.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[5] ^= 0x10
    data.write_bytes(bytes(raw))
    with ckptool.open(str(p)) as ck:
        with pytest.raises(ckptool.ChecksumError, match="'x'"):
            ck.read("x")
        assert ck.read("x", verify=False)[1] != 1
        assert [n for n, err in ck.verify() if err] == ["x"]
