"""What TensorFlow writes, ckptool reads bit-exactly: randomized dtypes, shapes and names
(hypothesis), sharded Saver output, and list-variables equal to tf.train.list_variables."""

import json
import string

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import ckptool  # noqa: E402
from ckptool.cli.main import main  # noqa: E402

DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
          "uint16", "uint32", "uint64", "bool", "complex64", "complex128", "string"]
NAME_CHARS = string.ascii_letters + string.digits + "_/.-"


def _value(dtname, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtname == "string":
        return np.array([rng.bytes(int(rng.integers(0, 12))) for _ in range(n)] + [b""],
                        dtype=object)[:-1].reshape(shape)
    if dtname == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if dtname.startswith(("int", "uint")):
        info = np.iinfo(dtname)
        return rng.integers(info.min, info.max, n, endpoint=True, dtype=dtname).reshape(shape)
    if dtname.startswith("complex"):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtname).reshape(shape)
    return tf.constant(rng.standard_normal(n).astype(np.float32) * 50, dtype=dtname).numpy().reshape(shape)


def _bytes(a):
    if isinstance(a, bytes):  # TF returns a scalar string as bytes, ckptool as a 0-d object array
        return [a]
    a = np.asarray(a)
    if a.dtype == object:
        return [bytes(x) for x in a.ravel()]
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()


names = st.text(NAME_CHARS, min_size=1, max_size=24).filter(
    lambda s: not s.startswith("/") and s != "_CHECKPOINTABLE_OBJECT_GRAPH")
tensors = st.dictionaries(
    names,
    st.tuples(st.sampled_from(DTYPES), st.lists(st.integers(0, 5), max_size=3), st.integers(0, 2**31)),
    min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=tensors)
def test_random_tf_saves_read_bit_exactly(tmp_path_factory, spec):
    d = tmp_path_factory.mktemp("r")
    values = {k: _value(dt, tuple(shape), seed) for k, (dt, shape, seed) in spec.items()}
    prefix = str(d / "c")
    names_ = list(values)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names_, shape_and_slices=[""] * len(names_),
                      tensors=[tf.constant(values[k], dtype=spec[k][0]) for k in names_])
    theirs = tf.train.load_checkpoint(prefix)
    with ckptool.open(prefix) as ck:
        assert [(v.name, list(v.shape)) for v in ck.variables()] == \
            [(n, list(s)) for n, s in tf.train.list_variables(prefix)]
        dtmap = theirs.get_variable_to_dtype_map()
        for k in names_:
            assert ck.variable(k).dtype == dtmap[k].name, k
            assert _bytes(ck.read(k)) == _bytes(theirs.get_tensor(k)), k


def test_list_variables_json_equals_tf_on_every_fixture(capsys):
    import pathlib

    data = pathlib.Path(__file__).parent.parent / "data"
    seen = 0
    for idx in sorted(data.rglob("*.index")):
        prefix = str(idx)[: -len(".index")]
        main(["-q", "list-variables", prefix, "--json"])
        ours = json.loads(capsys.readouterr().out)
        want = tf.train.list_variables(prefix)
        assert [(v["name"], v["shape"]) for v in ours] == [(n, list(s)) for n, s in want], prefix
        dtmap = tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()
        assert all(v["dtype"] == dtmap[v["name"]].name for v in ours), prefix
        seen += 1
    assert seen >= 10


def test_sharded_saver_over_devices(tmp_path):
    g = tf.Graph()
    with g.as_default():
        vs = []
        for i in range(4):
            with tf.device("/cpu:0"):
                vs.append(tf.compat.v1.get_variable(f"v{i}", initializer=np.arange(i + 2, dtype=np.float64) * i))
        saver = tf.compat.v1.train.Saver(sharded=True)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(s, str(tmp_path / "m.ckpt"))
    r = tf.train.load_checkpoint(prefix)
    with ckptool.open(prefix) as ck:
        for i in range(4):
            assert ck.read(f"v{i}").tobytes() == r.get_tensor(f"v{i}").tobytes()
