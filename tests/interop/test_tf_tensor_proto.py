"""ckptool.format.tensor_proto against TensorFlow: TensorProtos made by ``tf.make_tensor_proto``
(which writes ``tf.constant(5, shape=[3])``'s one value and the shape), read back by
``tf.make_ndarray`` and by ckptool's two readers of them: a graph constant's
(format.saved_model.tensor_value, Fill.REPEAT_LAST) and a V1 slice's
(format.v1.decode_tensor_proto, Fill.EXACT)."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from ckptool.errors import CorruptError  # noqa: E402
from ckptool.format import dtypes, v1  # noqa: E402
from ckptool.format.protos.tensor_bundle_pb2 import TensorProto  # noqa: E402
from ckptool.format.saved_model import tensor_value  # noqa: E402

pytestmark = pytest.mark.interop


def _both(value, dtype, shape):
    """TF's proto of ``value`` at ``shape`` (as bytes) and TF's reading of it."""
    proto = tf.make_tensor_proto(value, dtype=dtype, shape=shape)
    return proto.SerializeToString(), tf.make_ndarray(proto)


@pytest.mark.parametrize("value,dtype,shape", [
    (5, tf.int32, [3]), (-7, tf.int64, [2, 2]), ([1, 2], tf.int64, [2]), (np.arange(6), tf.int64, [2, 3]),
    (np.arange(4), tf.int32, [4]), (3, tf.int64, []), (2**40, tf.int64, [2]), (-(2**31), tf.int32, [3]),
])
def test_graph_constants_read_as_tensorflow_reads_them(value, dtype, shape):
    raw, want = _both(value, dtype, shape)
    assert tensor_value(memoryview(raw), "t") == want.ravel().tolist()


def test_a_short_string_constant_tensorflow_fills_is_refused():
    """TF repeats the last string too; ckptool's graph reading fills numbers only (as before the
    decoder was shared): a lookup table's keys are distinct, so a filled one is no vocabulary."""
    raw, want = _both("a", tf.string, [3])
    assert want.tolist() == [b"a", b"a", b"a"]
    with pytest.raises(CorruptError, match="1 values for a tensor of 3"):
        tensor_value(memoryview(raw), "t")


@pytest.mark.parametrize("name", ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64",
                                  "uint32", "uint64", "bool", "float16", "complex64", "complex128", "string"])
def test_v1_reads_every_value_tensorflow_writes_and_only_that(name):
    dt = tf.as_dtype(name)
    if name == "string":
        values = np.array([b"x", b"", b"\xff"], dtype=object)
    else:
        values = (np.arange(3) * 37 % 120).astype(dt.as_numpy_dtype)
        if dt.is_complex:
            values = values + 1j * values[::-1]
    field = dtypes.PROTO_FIELDS[name]
    proto = TensorProto.FromString(tf.make_tensor_proto(values[:0], dtype=dt, shape=[3]).SerializeToString())
    for v in values:  # each element as TF writes a scalar: in the typed field, as V1's writer does
        one = TensorProto.FromString(tf.make_tensor_proto(v, dtype=dt).SerializeToString())
        assert not one.tensor_content
        getattr(proto, field).extend(getattr(one, field))
    want = tf.make_ndarray(tf.make_tensor_proto(values, dtype=dt))
    got = v1.decode_tensor_proto(proto, dtypes.BY_NAME[name], (3,), "f: 'x'")
    assert got.tolist() == want.tolist() and (name == "string" or got.tobytes() == want.tobytes())
    short = TensorProto()
    short.CopyFrom(proto)
    del getattr(short, dtypes.PROTO_FIELDS[name])[-(2 if dt.is_complex else 1):]
    assert tf.make_ndarray(short).shape == (3,)  # TF fills it; a V1 slice must hold every value
    with pytest.raises(CorruptError, match="its slice needs"):
        v1.decode_tensor_proto(short, dtypes.BY_NAME[name], (3,), "f: 'x'")
