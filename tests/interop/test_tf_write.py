"""TensorFlow restores what ckptool writes, bit-exactly; and ckptool writes TF's own bytes."""

import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import ckptool  # noqa: E402
from ckptool.format import bundle, dtypes  # noqa: E402
from ckptool.ops.write.writer import BundleWriter, write  # noqa: E402

pytestmark = pytest.mark.interop

VV = "/.ATTRIBUTES/VARIABLE_VALUE"
FIXED = [d for d in dtypes.BY_VALUE.values() if d.is_fixed and hasattr(tf.dtypes, d.name)]


def _values(dt, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    if dt.name == "bool":
        raw &= 1
    if dt.name in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn"):
        raw &= 0x0F if "4" in dt.name else 0x03
        if dt.name == "int4":
            raw = np.where(raw & 0x8, raw | 0xF0, raw).astype(np.uint8)
        if dt.name == "int2":
            raw = np.where(raw & 0x2, raw | 0xFC, raw).astype(np.uint8)
    return raw.view(dt.write_numpy).reshape(shape)  # quantized: TF's structured dtype


def _bytes(a):
    a = np.asarray(a)
    if a.dtype == object:
        return [bytes(x) for x in a.ravel()]
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()


def _mapping():
    m = {}
    for dt in FIXED:
        m[f"{dt.name}/v"] = _values(dt, (3, 4), dt.value)
        m[f"{dt.name}/scalar"] = _values(dt, (), dt.value + 100)
        m[f"{dt.name}/empty"] = _values(dt, (0, 2), 0)
    m["string/v"] = np.array([[b"", b"\x00\xff"], [b"abc" * 100, "\u00e9".encode()]], dtype=object)
    m["string/scalar"] = b"hello\x00"
    m["string/empty"] = np.array([], dtype=object)
    return m


def test_every_dtype_read_by_load_checkpoint(tmp_path):
    m = _mapping()
    p = str(tmp_path / "c")
    write(p, m)
    r = tf.train.load_checkpoint(p)
    dtypes_map = r.get_variable_to_dtype_map()
    shapes = r.get_variable_to_shape_map()
    assert set(shapes) == set(m)
    for name, want in m.items():
        want = np.asarray(want, dtype=object) if isinstance(want, bytes) else np.asarray(want)
        got = r.get_tensor(name)
        assert dtypes_map[name].name == ckptool.open(p).variable(name).dtype, name
        assert tuple(shapes[name]) == want.shape, name
        if want.dtype == object or want.dtype.kind == "S":
            got = np.asarray(got, dtype=object)
            assert [bytes(x) for x in got.ravel()] == [bytes(x) for x in want.ravel()], name
        else:
            assert np.asarray(got).shape == want.shape, name
            assert _bytes(got) == _bytes(want.view(want.dtype[0]) if want.dtype.names else want), name


def test_sharded_output_read_by_tf(tmp_path):
    m = {f"v{i}": np.full((i + 1, 3), i, np.float32) for i in range(9)}
    p = str(tmp_path / "c")
    write(p, m, num_shards=4)
    assert len([f for f in os.listdir(tmp_path) if ".data-" in f]) == 4
    r = tf.train.load_checkpoint(p)
    for name, want in m.items():
        assert _bytes(r.get_tensor(name)) == _bytes(want)


def test_saver_restore_in_graph_mode(tmp_path):
    m = {"dense/kernel": np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32),
         "dense/bias": np.arange(3, dtype=np.float64), "global_step": np.int64(77),
         "emb": np.arange(8).astype(np.float16).reshape(2, 4)}
    p = str(tmp_path / "model.ckpt-77")
    write(p, m)
    g = tf.Graph()
    with g.as_default():
        vs = {name: tf.compat.v1.get_variable(name, shape=v.shape, dtype=tf.as_dtype(v.dtype),
                                              initializer=tf.compat.v1.zeros_initializer())
              for name, v in m.items()}
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=g) as sess:
            saver.restore(sess, p)
            for name, want in m.items():
                assert _bytes(sess.run(vs[name])) == _bytes(want), name


def test_object_based_restore(tmp_path):
    kernel = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    m = {"model/dense/kernel" + VV: kernel, "model/dense/bias" + VV: np.arange(4, dtype=np.float32),
         "model/w..x.Sy" + VV: np.float64(2.5), "save_counter" + VV: np.int64(3)}
    p = str(tmp_path / "ckpt-3")
    write(p, m)
    model = tf.Module()
    model.dense = tf.Module()
    model.dense.kernel = tf.Variable(tf.zeros((3, 4)))
    model.dense.bias = tf.Variable(tf.zeros(4))
    setattr(model, "w.x/y", tf.Variable(0.0, dtype=tf.float64))
    ck = tf.train.Checkpoint(model=model)
    status = ck.read(p)
    status.assert_existing_objects_matched()  # read() leaves save_counter alone
    assert _bytes(model.dense.kernel.numpy()) == _bytes(kernel)
    assert getattr(model, "w.x/y").numpy() == 2.5
    # restore() (which also restores save_counter) works too
    ck2 = tf.train.Checkpoint(model=model)
    ck2.restore(p).assert_consumed()
    assert int(ck2.save_counter.numpy()) == 3


def test_object_based_optimizer_slots_restore(tmp_path):
    """Slot keys from a real TF checkpoint, re-written by ckptool (graph synthesized), restore slots."""
    v = tf.Variable(tf.ones(3))
    opt = tf.compat.v1.train.AdamOptimizer(0.1)
    model = tf.Module()
    model.w = v
    opt.minimize(lambda: tf.reduce_sum(v * v), var_list=[v])
    tf_prefix = tf.train.Checkpoint(model=model, optimizer=opt).write(str(tmp_path / "tf"))
    r = tf.train.load_checkpoint(tf_prefix)
    vals = {k: r.get_tensor(k) for k in r.get_variable_to_shape_map() if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}
    assert any(".OPTIMIZER_SLOT" in k for k in vals)
    p = str(tmp_path / "ck")
    write(p, vals)
    v2 = tf.Variable(tf.zeros(3))
    opt2 = tf.compat.v1.train.AdamOptimizer(0.1)
    model2 = tf.Module()
    model2.w = v2
    status = tf.train.Checkpoint(model=model2, optimizer=opt2).read(p)
    opt2.minimize(lambda: tf.reduce_sum(v2 * 0.0), var_list=[v2])  # creates the slots: deferred restore
    status.assert_existing_objects_matched()
    for name in ("m", "v"):
        want = opt.get_slot(v, name).numpy()
        assert _bytes(opt2.get_slot(v2, name).numpy()) != b"" and np.array_equal(
            opt2.get_slot(v2, name).numpy() if False else _restored_slot(p, name), want)


def _restored_slot(prefix, name):
    with ckptool.open(prefix) as ck:
        return ck.read(f"model/w/.OPTIMIZER_SLOT/optimizer/{name}" + VV)


def _save_v2(prefix, names, values, slices=None):
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names,
                      shape_and_slices=slices or [""] * len(names),
                      tensors=[tf.constant(v) if not isinstance(v, tf.Tensor) else v for v in values])


def _same_files(a, b, num_shards=1):
    for suffix in [".index"] + [bundle.data_filename("", i, num_shards) for i in range(num_shards)]:
        assert open(a + suffix, "rb").read() == open(b + suffix, "rb").read(), suffix


def test_byte_identity_with_save_v2(tmp_path):
    names = ["z", "a", "strs", "empty", "big", "scalar", "b16", "i4", "f8", "q"]
    import ml_dtypes

    values = [np.arange(6, dtype=np.float32).reshape(2, 3), np.int64(5),
              np.array([b"ab", b"", b"xyz\0\xff"], dtype=object), np.zeros((0, 4), np.float32),
              np.arange(200_000, dtype=np.float32),  # an 800 KB tensor
              np.float64(-0.0), np.arange(5).astype(ml_dtypes.bfloat16),
              np.array([-8, 7, -1], dtype=ml_dtypes.int4), np.array([0.5, -2], dtype=ml_dtypes.float8_e4m3fn),
              np.array([1, -2], dtype=dtypes.BY_NAME["qint8"].numpy)]
    tensors = []
    for v in values:
        if v.dtype.names:  # quantized: TF builds them from the storage type
            tensors.append(tf.bitcast(tf.constant(v.view(np.int8)), tf.qint8))
        else:
            tensors.append(tf.constant(v))
    names += [f"var_{i:05d}" for i in range(12_000)]  # an index of several blocks
    values += [np.full(2, i, np.int32) for i in range(12_000)]
    tensors += [tf.constant(v) for v in values[-12_000:]]
    _save_v2(str(tmp_path / "tf"), names, tensors)
    write(str(tmp_path / "ck"), dict(zip(names, values)))
    _same_files(str(tmp_path / "tf"), str(tmp_path / "ck"))


def test_byte_identity_with_a_huge_key(tmp_path):
    names = ["a", "k" * 600_000, "z"]  # one index entry over 2 * block_size
    values = [np.ones(2, np.float32), np.int32(1), np.array([b"s"], dtype=object)]
    _save_v2(str(tmp_path / "tf"), names, values)
    write(str(tmp_path / "ck"), dict(zip(names, values)))
    _same_files(str(tmp_path / "tf"), str(tmp_path / "ck"))


def test_byte_identity_of_slices_with_save_v2(tmp_path):
    full = np.arange(30, dtype=np.float32).reshape(10, 3)
    specs = ["10 3 0,4:-", "10 3 4,6:-"]
    _save_v2(str(tmp_path / "tf"), ["part", "part", "x"], [full[:4], full[4:], np.int64(1)],
             specs + [""])
    slices = [((0, 4), (0, -1)), ((4, 6), (0, -1))]
    with BundleWriter(str(tmp_path / "ck")) as w:
        w.add_sliced("part", "float32", (10, 3), slices)
        w.add(bundle.encode_tensor_name_slice(b"part", slices[0]), full[:4])
        w.add(bundle.encode_tensor_name_slice(b"part", slices[1]), full[4:])
        w.add("x", np.int64(1))
    _same_files(str(tmp_path / "tf"), str(tmp_path / "ck"))
    assert _bytes(tf.train.load_checkpoint(str(tmp_path / "ck")).get_tensor("part")) == _bytes(full)


def test_raw_copy_of_tf_checkpoint_is_byte_identical(tmp_path, capsys):
    from ckptool.cli.main import main

    model = tf.Module()
    model.a = tf.Variable(tf.random.normal((5, 5)))
    model.s = tf.Variable(b"text")
    model.n = [tf.Variable(tf.zeros((0, 2), tf.bfloat16)), tf.Variable(7, dtype=tf.int64)]
    tf_prefix = tf.train.Checkpoint(model=model).write(str(tmp_path / "tf"))
    try:
        main(["save", str(tmp_path / "copy"), "--from", tf_prefix, "--no-state"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    _same_files(tf_prefix, str(tmp_path / "copy"))


def test_checkpoint_manager_continues_after_ckptool_save(tmp_path, capsys):
    from ckptool.cli.main import main

    d = tmp_path / "run"
    np.save(tmp_path / "w.npy", np.ones(3, np.float32))
    for step in (1, 2):
        try:
            main(["save", str(d / "ckpt"), "--from", str(tmp_path / "w.npy"), "--object-based",
                  "--global-step", str(step), "--max-to-keep", "3"])
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr().err
    assert tf.train.latest_checkpoint(str(d)) == str(d / "ckpt-2")
    state = tf.train.get_checkpoint_state(str(d))
    assert list(state.all_model_checkpoint_paths) == [str(d / "ckpt-1"), str(d / "ckpt-2")]
    w = tf.Variable(tf.zeros(3))
    ck = tf.train.Checkpoint(w=w)
    mgr = tf.train.CheckpointManager(ck, str(d), max_to_keep=3)
    # read(), as after Checkpoint.write: ckptool saves no save_counter it would have to invent
    ck.read(mgr.latest_checkpoint).assert_existing_objects_matched()
    assert w.numpy().tolist() == [1, 1, 1]
    mgr.save(checkpoint_number=3)
    mgr.save(checkpoint_number=4)
    assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-2", "ckpt-3", "ckpt-4"]
    assert not (d / "ckpt-1.index").exists()
