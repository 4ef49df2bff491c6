"""Keras 3 files as checkpoints, and `convert --template` both ways, on the committed fixtures
(tests/data/keras3/, made by tests/tf_fixtures/generate_keras.py): no TF or Keras needed."""

import os
import shutil
import zipfile

import h5py
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CorruptError, RefusedError, UnsupportedError, UsageError
from ckptool.ops.transform.convert.keras.bridge import convert_keras
from ckptool.ops.transform.convert.run import convert
from clirun import completed

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3")
MODELS = ["functional", "sequential", "subclassed", "mha", "embedding"]


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.dtype.name, a.shape, a.reshape(-1).view(np.uint8).tobytes()


def _h5_values(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, (o[()], dict(o.attrs))) if isinstance(o, h5py.Dataset) else None)
    return out


def test_reads_weights_h5_names_and_values():
    p = os.path.join(DATA, "functional", "template.weights.h5")
    with ckptool.open(p) as ck:
        names = ck.names()
        assert "layers/lstm/cell/vars/1" in names and "optimizer/vars/0" in names
        assert names == sorted(names)
        v = ck.variable("layers/batch_normalization/vars/3")
        assert v.dtype == "float32" and v.shape == (8,)
        assert ck.variable("optimizer/vars/0").dtype == "int64"
        with h5py.File(p) as f:
            for n in names:
                assert _bits(ck.read(n)) == _bits(f[n][()])
        layers = {lay.path: lay for lay in ck.layers()}
        assert layers["layers/lstm/cell"].name == "lstm_cell"
        assert [lay.path for lay in ck.layers()].index("layers/dense") < \
            [lay.path for lay in ck.layers()].index("layers/lstm")  # write order, not alphabetical


def test_keras_zip_gives_classes_from_config():
    with ckptool.open(os.path.join(DATA, "mha", "template.keras")) as ck:
        assert ck.config["class_name"] == "Functional"
        classes = {lay.path: lay.class_name for lay in ck.layers()}
        assert classes["layers/multi_head_attention"] == "MultiHeadAttention"
        assert classes["layers/dense"] == "Dense"


def test_sharded_and_bfloat16():
    with ckptool.open(os.path.join(DATA, "misc", "sharded.weights.json")) as ck:
        assert len(ck.files) == 3  # the index and two shards
        assert ck.names() == ["layers/conv2d/vars/0", "layers/conv2d/vars/1", "layers/dense/vars/0",
                              "layers/dense/vars/1"]
        assert ck.read("layers/dense/vars/0").shape == (48, 2)
    with ckptool.open(os.path.join(DATA, "misc", "bf16.weights.h5")) as ck, \
            np.load(os.path.join(DATA, "misc", "bf16_expected.npz")) as z:
        k = ck.read("layers/dense/vars/0")
        assert k.dtype == ml_dtypes.bfloat16 and ck.variable("layers/dense/vars/0").dtype == "bfloat16"
        assert _bits(k.astype(np.float32)) == _bits(z["kernel"])


def test_cli_inspect_list_diff_on_keras_files():
    p = os.path.join(DATA, "mha", "template.keras")
    for args in (["list-variables", p], ["inspect", p], ["inspect", "--tree", p], ["inspect", "--stats", p],
                 ["inspect", "--verify", p], ["inspect", "--tensor", "layers/dense/vars/0", p],
                 ["diff", p, os.path.join(DATA, "mha", "template.weights.h5")]):
        r = completed(*args)
        assert r.returncode == 0, (args, r.stderr)
    assert "layers/multi_head_attention/query_dense/vars/0" in completed("list-variables", p).stdout


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_keras_file_to_safetensors_and_npz(tmp_path, suffix):
    src = os.path.join(DATA, "sequential", "template.weights.h5")
    dst = str(tmp_path / ("out" + suffix))
    convert(src, dst)
    with ckptool.open(src) as ck:
        want = {n: ck.read(n) for n in ck.names()}
    if suffix == ".npz":
        with np.load(dst) as z:
            got = {n: z[n] for n in z.files}
    else:
        from safetensors.numpy import load_file
        got = load_file(dst)
    assert sorted(got) == sorted(want)
    for n in want:
        assert _bits(got[n]) == _bits(want[n])


@pytest.mark.parametrize("name", MODELS)
def test_tf_to_keras3_equals_the_hand_migration(tmp_path, name):
    """Every dataset (weights and Adam state) equals Keras's own set_weights/assign result."""
    dst = str(tmp_path / "new.weights.h5")
    r = convert_keras(os.path.join(DATA, name, "tf", "ckpt"), dst, os.path.join(DATA, name, "template.weights.h5"))
    assert not r.kept and not r.unused
    got, truth = _h5_values(dst), _h5_values(os.path.join(DATA, name, "truth.weights.h5"))
    assert sorted(got) == sorted(truth)
    for n in truth:
        assert _bits(got[n][0]) == _bits(truth[n][0]), n
    with h5py.File(dst) as a, h5py.File(os.path.join(DATA, name, "template.weights.h5")) as b:
        assert dict(a["vars"].attrs) == dict(b["vars"].attrs)


@pytest.mark.parametrize("name", [m for m in MODELS if m != "subclassed"])
def test_keras_zip_output_keeps_config_and_metadata(tmp_path, name):
    dst = str(tmp_path / "new.keras")
    template = os.path.join(DATA, name, "template.keras")
    convert_keras(os.path.join(DATA, name, "tf", "ckpt"), dst, template)
    with zipfile.ZipFile(dst) as a, zipfile.ZipFile(template) as b:
        assert a.namelist() == b.namelist()
        for m in ("config.json", "metadata.json"):
            assert a.read(m) == b.read(m)
    with ckptool.open(dst) as ck:
        truth = _h5_values(os.path.join(DATA, name, "truth.weights.h5"))
        for n in truth:
            assert _bits(ck.read(n)) == _bits(truth[n][0]), n


@pytest.mark.parametrize("name", MODELS)
def test_round_trip_back_to_tf_is_the_source(tmp_path, name):
    src = os.path.join(DATA, name, "tf", "ckpt")
    mid = str(tmp_path / "k3.weights.h5")
    back = str(tmp_path / "back" / "ckpt")
    convert_keras(src, mid, os.path.join(DATA, name, "template.weights.h5"))
    convert_keras(mid, back, src)
    with ckptool.open(src) as a, ckptool.open(back) as b:
        assert a.names() == b.names()
        for n in a.names():
            assert _bits(a.read(n)) == _bits(b.read(n)) if a.variable(n).dtype != "string" else \
                a.read(n).tolist() == b.read(n).tolist()


@pytest.mark.parametrize("src", ["tf_ckpt", "tf_legacy/ckpt"])
def test_checkpoint_and_legacy_layouts_map_completely(tmp_path, src):
    r = convert_keras(os.path.join(DATA, "functional", src), str(tmp_path / "n.weights.h5"),
                      os.path.join(DATA, "functional", "template.weights.h5"), dry_run=True)
    assert len(r.mapping.pairs) == 31 and not r.kept and not r.unused and not os.listdir(tmp_path)
    opt = [t for t, k in r.mapping.pairs if k.startswith("optimizer/")]
    assert "iter" in opt[0] and len(opt) == 2 + 2 * 11 - 2 * 2  # BN moving stats have no slots


def test_errors_name_both_sides_and_write_nothing(tmp_path):
    ckpt = os.path.join(DATA, "mha", "tf", "ckpt")
    dst = tmp_path / "x.weights.h5"
    with pytest.raises(RefusedError, match="nothing written"):
        convert_keras(ckpt, str(dst), os.path.join(DATA, "functional", "template.weights.h5"))
    r = completed("convert", ckpt, dst, "--template", os.path.join(DATA, "sequential", "template.weights.h5"))
    assert r.returncode == 1 and r.stderr.startswith("ckptool: error: ") and "layers/" in r.stderr
    assert "VARIABLE_VALUE" in r.stderr or "layer-" in r.stderr
    r = completed("convert", ckpt, dst)
    assert r.returncode == 2 and "--template" in r.stderr
    r = completed("convert", ckpt, dst, "--template", os.path.join(DATA, "mha", "template.weights.h5"), "--cast",
                  "float32=bfloat16")
    assert r.returncode == 2 and "--cast" in r.stderr
    with pytest.raises(UsageError):
        convert_keras(ckpt, str(tmp_path / "x.keras"), os.path.join(DATA, "mha", "template.weights.h5"))
    assert not os.listdir(tmp_path)
    t = tmp_path / "t.weights.h5"
    shutil.copy(os.path.join(DATA, "mha", "template.weights.h5"), t)
    with h5py.File(t, "r+") as h5:
        h5.create_dataset("extra/vars/0", data=np.zeros(3, np.float32))
    r = completed("convert", ckpt, dst, "--template", t)
    assert r.returncode == 1 and "extra/vars/0" in r.stderr and "--allow-missing" in r.stderr and not dst.exists()
    r = completed("convert", ckpt, dst, "--template", t, "--allow-missing")
    assert r.returncode == 0 and dst.exists(), r.stderr
    r = completed("convert", ckpt, dst, "--template", t, "--allow-missing")
    assert r.returncode == 1 and "--force" in r.stderr
    # a SRC variable the template has no place for: refused unless --allow-unused
    with h5py.File(t, "r+") as h5:
        del h5["extra"], h5["layers/dense/vars/1"]
    r = completed("convert", ckpt, tmp_path / "y.weights.h5", "--template", t)
    assert r.returncode == 1 and "layer_with_weights-1/bias" in r.stderr and "--allow-unused" in r.stderr, r.stderr
    r = completed("convert", ckpt, tmp_path / "y.weights.h5", "--template", t, "--allow-unused", "--dry-run")
    assert r.returncode == 0 and "(left out)" in r.stdout and not (tmp_path / "y.weights.h5").exists()


def test_optimizer_state_when_both_sides_have_it(tmp_path):
    """A template without an optimizer cannot hold the source's state: refused, or the weights alone
    with --skip-optimizer; one whose optimizer was not built (only iterations and learning_rate
    saved) gets the slots added in Keras 3's order."""
    name = "functional"
    ckpt = os.path.join(DATA, name, "tf", "ckpt")
    t = tmp_path / "t.weights.h5"
    shutil.copy(os.path.join(DATA, name, "template.weights.h5"), t)
    with h5py.File(t, "r+") as h5:
        del h5["optimizer"]
    r = completed("convert", ckpt, tmp_path / "w.weights.h5", "--template", t)
    assert r.returncode == 1 and "no optimizer state" in r.stderr and "--skip-optimizer" in r.stderr, r.stderr
    assert not (tmp_path / "w.weights.h5").exists()
    r = completed("convert", ckpt, tmp_path / "w.weights.h5", "--template", t, "--skip-optimizer")
    assert r.returncode == 0 and "start the optimizer fresh" in r.stderr, r.stderr
    got = _h5_values(tmp_path / "w.weights.h5")
    assert not any(n.startswith("optimizer") for n in got) and len(got) == 11
    shutil.copy(os.path.join(DATA, name, "template.weights.h5"), t)
    with h5py.File(t, "r+") as h5:
        for i in range(2, len(h5["optimizer/vars"])):
            del h5[f"optimizer/vars/{i}"]
    r = completed("convert", ckpt, tmp_path / "o.weights.h5", "--template", t)
    assert r.returncode == 0 and "added" in r.stderr and "model.optimizer.build" in r.stderr, r.stderr
    got, truth = _h5_values(tmp_path / "o.weights.h5"), _h5_values(os.path.join(DATA, name, "truth.weights.h5"))
    assert sorted(got) == sorted(truth)
    for n in truth:
        assert _bits(got[n][0]) == _bits(truth[n][0]), n
    # the way back from a Keras file without slots: the slots a fresh optimizer has (zeros), never the
    # template's old ones
    r = completed("convert", t, tmp_path / "back" / "ckpt", "--template", ckpt)
    assert r.returncode == 0, r.stderr
    with ckptool.open(str(tmp_path / "back" / "ckpt")) as b, ckptool.open(ckpt) as a:
        slots = [n for n in a.names() if n.startswith("optimizer/_variables/")]
        assert slots and all(not b.read(n).any() for n in slots) and any(a.read(n).any() for n in slots)


def test_refuses_what_keras_refuses(tmp_path):
    p = tmp_path / "links.weights.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("layers/dense/vars/0", data=np.ones(2, np.float32))
        f["layers/alias"] = h5py.SoftLink("/layers/dense")
    with pytest.raises(UnsupportedError, match="SoftLink"):
        ckptool.open(str(p))
    p = tmp_path / "ext.weights.h5"
    with h5py.File(p, "w") as f:
        f["x"] = h5py.ExternalLink("other.h5", "/y")
    with pytest.raises(UnsupportedError, match="ExternalLink"):
        ckptool.open(str(p))
    p = tmp_path / "bomb.weights.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("vars/0", shape=(1 << 20, 1 << 10), dtype=np.float32)  # 4 GiB declared, nothing stored
    with pytest.raises(CorruptError, match="more than the file holds"):
        ckptool.open(str(p))
    p = tmp_path / "junk.weights.h5"
    p.write_bytes(b"not hdf5")
    r = completed("list-variables", p)
    assert r.returncode == 1 and "HDF5" in r.stderr


@pytest.mark.parametrize("name", ["functional", "sequential"])
def test_no_template_from_keras_metadata(tmp_path, name):
    """A Functional/Sequential SavedModel: the layout from keras_metadata.pb equals Keras's own."""
    dst = str(tmp_path / "new.weights.h5")
    r = completed("convert", os.path.join(DATA, name, "savedmodel"), dst)
    assert r.returncode == 0, r.stderr
    got, truth = _h5_values(dst), _h5_values(os.path.join(DATA, name, "truth.weights.h5"))
    assert sorted(got) == sorted(truth)
    for n in truth:
        assert _bits(got[n][0]) == _bits(truth[n][0]), n


def test_no_template_says_plainly_when_one_is_needed(tmp_path):
    r = completed("convert", os.path.join(DATA, "functional", "tf", "ckpt"), tmp_path / "x.weights.h5")
    assert r.returncode == 2 and "keras_metadata.pb" in r.stderr and "--template" in r.stderr
    r = completed("convert", os.path.join(DATA, "functional", "tf", "ckpt"), tmp_path / "x.keras")
    assert r.returncode == 2 and "keras_metadata.pb" in r.stderr and "--template-config" in r.stderr
    assert not os.listdir(tmp_path)


def test_hostile_h5_layouts_are_errors_not_tracebacks(tmp_path):
    p = tmp_path / "cycle.weights.h5"
    with h5py.File(p, "w") as f:
        g = f.create_group("layers/dense")
        g.create_dataset("vars/0", data=np.ones(2, np.float32))
        g["back"] = f["layers"]  # a hard link to an ancestor: a cycle
    with pytest.raises(CorruptError, match="reached twice"):
        ckptool.open(str(p))
    p = tmp_path / "null.weights.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("vars/0", data=h5py.Empty("f4"))
    with pytest.raises(UnsupportedError, match="null dataspace"):
        ckptool.open(str(p))
    p = tmp_path / "strings.weights.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("vars/0", data=np.array([b"a", b"bc"], dtype=h5py.string_dtype()))
    with ckptool.open(str(p)) as ck:  # HDF5 strings read as TF strings: bytes
        assert ck.variable("vars/0").dtype == "string" and ck.read("vars/0").tolist() == [b"a", b"bc"]
    p = tmp_path / "compound.weights.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("vars/0", data=np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]))
    r = completed("list-variables", p)
    assert r.returncode == 1 and r.stderr.startswith("ckptool: error: ") and "vars/0" in r.stderr, r.stderr
    src = open(os.path.join(DATA, "mha", "template.weights.h5"), "rb").read()
    for cut in (100, 1000, len(src) // 2, len(src) - 100):
        p = tmp_path / f"cut{cut}.weights.h5"
        p.write_bytes(src[:cut])
        r = completed("inspect", "--verify", p)
        assert r.returncode == 1 and r.stderr.startswith("ckptool: error: ") and "Traceback" not in r.stderr, r.stderr
    z = tmp_path / "bad.keras"
    z.write_bytes(b"PK\x03\x04 not really a zip")
    r = completed("inspect", z)
    assert r.returncode == 1 and "zip" in r.stderr


_DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool", "bfloat16"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["layers/dense", "layers/dense_1", "layers/lstm/cell", "optimizer", ""]),
                          st.sampled_from(_DTYPES), st.lists(st.integers(0, 4), max_size=3)),
                min_size=1, max_size=8))
def test_reader_equals_h5py_on_random_files(tmp_path, items):
    """Any file laid out as Keras lays one out: names, dtypes, shapes and values as h5py reads them
    (bfloat16 as Keras writes it: a 2-byte opaque type with a dtype attribute)."""
    p = tmp_path / "r.weights.h5"
    rng = np.random.default_rng(len(items))
    want = {}
    counts: dict = {}
    with h5py.File(p, "w") as f:
        for group, dt, shape in items:
            i = counts.setdefault(group, 0)
            counts[group] += 1
            name = f"{group}/vars/{i}" if group else f"vars/{i}"
            value = (rng.standard_normal(shape) * 50).astype(ml_dtypes.bfloat16 if dt == "bfloat16" else dt)
            want[name] = (dt, value)
            if dt == "bfloat16":
                f.create_dataset(name, data=value).attrs["dtype"] = "bfloat16"
            else:
                f.create_dataset(name, data=value)
    with ckptool.open(str(p)) as ck:
        assert ck.names() == sorted(want)
        for name, (dt, value) in want.items():
            v = ck.variable(name)
            assert (v.dtype, v.shape) == (dt, value.shape)
            assert _bits(ck.read(name)) == _bits(value)


def test_without_h5py_the_error_names_the_extra(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "h5py", None)  # import h5py raises ImportError
    r = completed("list-variables", os.path.join(DATA, "mha", "template.weights.h5"))
    assert r.returncode == 1 and "ckptool[keras]" in r.stderr and "h5py" in r.stderr, r.stderr
    r = completed("inspect", os.path.join(DATA, "mha", "template.keras"))
    assert r.returncode == 1 and "ckptool[keras]" in r.stderr


def test_savedmodel_with_template_has_no_structural_notes(tmp_path):
    """A SavedModel's object graph lists the variables again (``variables``, ``keras_api``): they
    are the same objects, not layers of their own."""
    dst = str(tmp_path / "n.weights.h5")
    r = convert_keras(os.path.join(DATA, "functional", "savedmodel"), dst,
                      os.path.join(DATA, "functional", "template.weights.h5"))
    assert not r.mapping.notes and not r.kept and not r.unused
    got, truth = _h5_values(dst), _h5_values(os.path.join(DATA, "functional", "truth.weights.h5"))
    for n in truth:
        assert _bits(got[n][0]) == _bits(truth[n][0]), n


def test_dry_run_prints_the_mapping_and_equals_the_real_run(tmp_path):
    import json
    src = os.path.join(DATA, "functional", "tf", "ckpt")
    template = os.path.join(DATA, "functional", "template.weights.h5")
    dst = tmp_path / "n.weights.h5"
    r = completed("convert", src, dst, "--template", template, "--dry-run")
    assert r.returncode == 0 and not dst.exists()
    line = next(x for x in r.stdout.splitlines() if x.startswith("layer_with_weights-2/cell/recurrent_kernel/"))
    assert line.split() == ["layer_with_weights-2/cell/recurrent_kernel/.ATTRIBUTES/VARIABLE_VALUE", "->",
                            "layers/lstm/cell/vars/1", "[5,", "20]"]
    dry = json.loads(completed("convert", src, dst, "--template", template, "--dry-run", "--json").stdout)
    real = json.loads(completed("convert", src, dst, "--template", template, "--json").stdout)
    assert dst.exists() and real["files"] == [str(dst)]
    for doc in (dry, real):
        doc.pop("dry_run"), doc.pop("files")
    assert dry == real
