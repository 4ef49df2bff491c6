"""ckptool.compat.tf without TensorFlow: the answers TF 2.21 gives (docs: the module's
docstring), on the bundled fixtures. The same probe against real TF is tests/interop/test_tf_compat.py."""

import pickle
import shutil

import ml_dtypes
import numpy as np
import pytest

import ckptool
import ckptool.compat.tf as tf
from ckptool.compat.offered import NotOfferedError

KERAS = "keras_adam"
COUNTER = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"


def test_list_variables_is_sorted_pairs_with_the_object_graph(data_dir):
    got = tf.train.list_variables(str(data_dir / KERAS))
    assert got == sorted(got) and got[0] == ("_CHECKPOINTABLE_OBJECT_GRAPH", [])
    assert all(type(n) is str and type(s) is list for n, s in got)
    with ckptool.open(str(data_dir / KERAS)) as ck:
        assert [n for n, _ in got] == ck.names()


def test_values_as_tf_returns_them(data_dir):
    p = str(data_dir / KERAS)
    v = tf.train.load_variable(p, COUNTER + ":0")
    assert type(v) is np.int64 and v == tf.train.load_variable(p, COUNTER)
    assert type(tf.train.load_variable(p, "_CHECKPOINTABLE_OBJECT_GRAPH")) is bytes
    r = tf.train.load_checkpoint(p)
    assert r.has_tensor(COUNTER) is True and r.has_tensor(COUNTER + ":0") is False
    assert r.get_tensor(COUNTER.encode()) == v


def test_dtype_map_values(data_dir):
    r = tf.compat.v1.train.NewCheckpointReader(str(data_dir / "dtypes" / "dtypes"))
    dm = r.get_variable_to_dtype_map()
    by = {d.name: d for d in dm.values()}
    assert by["bfloat16"].as_numpy_dtype is ml_dtypes.bfloat16 and by["float32"].as_numpy_dtype is np.float32
    assert by["string"].as_numpy_dtype is object
    if "qint8" in by:
        assert by["qint8"].as_numpy_dtype == np.dtype([("qint8", "i1")])
    d = by["float32"]
    assert repr(d) == "tf.float32" and str(d) == "<dtype: 'float32'>" and d == tf.float32 and d.as_datatype_enum == 1
    assert pickle.loads(pickle.dumps(d)) == d
    for name, dt in dm.items():
        if dt.name not in ("variant", "resource"):
            value = r.get_tensor(name)
            if dt.name == "string":
                assert type(value) is bytes or (value.dtype == object and all(type(x) is bytes for x in value.flat))
            else:
                assert np.asarray(value).dtype == ckptool.open(str(data_dir / "dtypes" / "dtypes")).read(name).dtype


def test_errors_have_tfs_classes_and_wording(data_dir, tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(tf.errors.NotFoundError) as e:
        tf.train.list_variables(missing)
    assert str(e.value) == e.value.message == ("Unsuccessful TensorSliceReader constructor: Failed to find any "
                                               f"matching files for {missing}")
    assert isinstance(e.value, tf.errors.OpError) and e.value.error_code == 5 and e.value.args == ()
    with pytest.raises(tf.errors.NotFoundError, match="^Key nope not found in checkpoint$"):
        tf.train.load_variable(str(data_dir / KERAS), "nope")
    with pytest.raises(tf.errors.NotFoundError, match="^nope not found in checkpoint file$"):
        tf.train.load_variable(str(data_dir / "v1" / "single" / "v1ckpt"), "nope")
    assert str(tf.errors.InvalidArgumentError(None, None, "m")) == "m"
    plain = shutil.copytree(data_dir / "strings", tmp_path / "plain")
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints in given directory"):
        tf.train.load_checkpoint(str(plain))
    assert tf.train.latest_checkpoint(str(plain)) is None and tf.train.get_checkpoint_state(str(plain)) is None
    with pytest.raises(tf.errors.DataLossError, match="Is a directory"):
        tf.compat.v1.train.NewCheckpointReader(str(plain))


def test_state_paths_are_joined_with_the_directory(data_dir):
    d = str(data_dir / KERAS)
    st = tf.train.get_checkpoint_state(d)
    assert st.model_checkpoint_path == d + "/ckpt-1" == tf.train.latest_checkpoint(d)
    assert list(st.all_model_checkpoint_paths) == [d + "/ckpt-1"]
    assert tf.compat.v1.train.checkpoint_exists(d + "/ckpt-1") and not tf.compat.v1.train.checkpoint_exists(d + "/x")
    assert not hasattr(tf.train, "checkpoint_exists")  # TF 2.21 has it under compat.v1 only


def test_partitioned_debug_string_shows_slice_keys(data_dir):
    # its state file names the path the fixture was written at: TF, and so ckptool.compat, find nothing there
    with pytest.raises(ValueError):
        tf.train.load_checkpoint(str(data_dir / "partitioned"))
    r = tf.train.load_checkpoint(str(data_dir / "partitioned" / "model.ckpt"))
    text = r.debug_string()
    assert isinstance(text, bytes) and text.startswith(b"\x00")
    shapes = r.get_variable_to_shape_map()
    assert not any(k.startswith("\x00") for k in shapes)


def test_every_fixture_reads(data_dir):
    seen = 0
    for idx in sorted(data_dir.rglob("*.index")):
        prefix = str(idx)[: -len(".index")]
        r = tf.train.load_checkpoint(prefix)
        for name, dt in r.get_variable_to_dtype_map().items():
            if dt.name in ("variant", "resource"):
                with pytest.raises(tf.errors.InternalError, match="not convertible to numpy dtype"):
                    r.get_tensor(name)
            elif dt.name == "string" and r.get_variable_to_shape_map()[name] and "maxshard" in prefix:
                with pytest.raises(ValueError, match=r"^Dtype string not supported\.$"):  # partitioned, as TF
                    r.get_tensor(name)
            else:
                r.get_tensor(name)
        seen += 1
    assert seen >= 10


def test_what_is_not_offered_says_so():
    with pytest.raises(NotOfferedError, match=r"tensorflow\.keras is not offered"):
        tf.keras  # noqa: B018
    assert not hasattr(tf.train, "Checkpoint") and not hasattr(tf.compat, "v2")
    with pytest.raises(AttributeError, match="tensorflow.compat.v1.train.Saver"):
        tf.compat.v1.train.Saver  # noqa: B018
    assert "list_variables" in dir(tf.train) and "float32" in dir(tf)


def test_load_variable_sees_a_rewritten_checkpoint(tmp_path):
    # load_variable keeps the reader of the last bundles it read; a checkpoint rewritten in
    # place (same names, sizes, and a file time as coarse as the clock's) reads anew
    a, b = tmp_path / "a", tmp_path / "b"
    ckptool.write(str(a / "ckpt"), {"w": np.zeros(4, np.float32)})
    ckptool.write(str(b / "ckpt"), {"w": np.ones(4, np.float32)})
    target = tmp_path / "t"
    shutil.copytree(a, target)
    assert tf.train.load_variable(str(target / "ckpt"), "w").tolist() == [0, 0, 0, 0]
    for f in b.iterdir():
        shutil.copyfile(f, target / f.name)
    assert tf.train.load_variable(str(target / "ckpt"), "w").tolist() == [1, 1, 1, 1]
    for f in (target / "ckpt.index", target / "ckpt.data-00000-of-00001"):
        f.unlink()
    with pytest.raises(tf.errors.NotFoundError, match="Failed to find any matching files"):
        tf.train.load_variable(str(target / "ckpt"), "w")


def test_orders_are_tfs(data_dir):
    # TF 2.21's answers, observed: its maps and a V1 debug_string iterate C++ unordered_maps
    r = tf.train.load_checkpoint(str(data_dir / KERAS))
    assert list(r.get_variable_to_shape_map())[:3] == [COUNTER, "optimizer/_variables/8/.ATTRIBUTES/VARIABLE_VALUE",
                                                       "_CHECKPOINTABLE_OBJECT_GRAPH"]
    v1 = tf.compat.v1.train.NewCheckpointReader(str(data_dir / "v1" / "single" / "v1ckpt"))
    assert v1.debug_string() == (b"text (DT_STRING) [3]\nscope/empty (DT_FLOAT) [0,3]\ni64 (DT_INT64) [3]\n"
                                 b"half (DT_HALF) [3]\nflag (DT_BOOL) [3]\nf64 (DT_DOUBLE) [3]\ni32 (DT_INT32) []\n"
                                 b"f32 (DT_FLOAT) [2,3]\n")
    assert list(v1.get_variable_to_dtype_map())[:3] == ["f32", "i32", "f64"]
    assert [n for n, _ in tf.train.list_variables(str(data_dir / "v1" / "single" / "v1ckpt"))] == sorted(
        v1.get_variable_to_shape_map())


def test_hash_order_replays_libstdcxx():
    from ckptool.compat.hashorder import hash_bytes, unordered_map_order

    assert hash_bytes(b"") == hash_bytes(b"") and hash_bytes(b"a") != hash_bytes(b"b")
    keys = [b"k%d" % i for i in range(3000)]  # several rehashes
    got = unordered_map_order(keys)
    assert got is not None and sorted(got) == sorted(keys) and got != keys


def test_damaged_checkpoints_raise_tfs_plain_op_error(tmp_path, data_dir):
    # TF's error_translator: a missing shard, a bad CRC, a bad index are a plain OpError (UNKNOWN)
    missing = shutil.copytree(data_dir / "strings", tmp_path / "missing")
    (missing / "strings.data-00000-of-00001").unlink()
    with pytest.raises(tf.errors.OpError) as e:
        tf.train.load_variable(str(missing / "strings"), "scalar")
    assert type(e.value) is tf.errors.OpError and e.value.error_code == 2 and "strings.data-00000-of-00001" in str(e.value)
    bad = shutil.copytree(data_dir / "strings", tmp_path / "bad")
    (bad / "strings.index").write_bytes(b"x" * 30)
    with pytest.raises(tf.errors.OpError, match="too short to be an sstable"):
        tf.train.load_checkpoint(str(bad / "strings"))
