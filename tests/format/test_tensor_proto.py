"""ckptool.format.tensor_proto: the one decoder of a TensorProto's values, behind V1 slices
(format.v1, Fill.EXACT) and saved_model.pb's graph constants (format.saved_model,
Fill.REPEAT_LAST). The filled values below are TensorFlow 2.21's (``tf.make_ndarray`` and
``tf.io.parse_tensor``, i.e. Tensor::FromProto, agree on each); tests/interop checks real
SavedModels."""

import numpy as np
import pytest

from ckptool.errors import CorruptError, RefusedError, UnsupportedError
from ckptool.format import dtypes, tensor_proto, v1
from ckptool.format.coding import encode_varint
from ckptool.format.protos.tensor_bundle_pb2 import TensorProto
from ckptool.format.saved_model import tensor_value
from ckptool.format.tensor_proto import FIELD_NUMBERS, MAX_FILLED, Fill, decode


def _proto(dtype, shape, **typed):
    tp = TensorProto(dtype=dtypes.BY_NAME[dtype].value)
    for d in shape:
        tp.tensor_shape.dim.add(size=d)
    for name, values in typed.items():
        getattr(tp, name).extend(values)
    return tp


def test_the_field_numbers_are_tensor_protos():
    by_name = TensorProto.DESCRIPTOR.fields_by_name
    assert {name: by_name[name].number for name in FIELD_NUMBERS} == FIELD_NUMBERS
    assert set(dtypes.PROTO_FIELDS.values()) <= set(FIELD_NUMBERS)


def test_one_value_for_three_elements_each_path_its_rule():
    """The same TensorProto bytes: a graph constant is filled as TensorFlow fills it, a V1 slice
    must hold every value (TensorSliceWriter writes them all)."""
    tp = _proto("int32", [3], int_val=[5])
    assert tensor_value(memoryview(tp.SerializeToString()), "sm: constant 'C'") == [5, 5, 5]
    with pytest.raises(CorruptError, match=r"^f: 'x': holds 1 values, its slice needs 3$"):
        v1.decode_tensor_proto(tp, dtypes.BY_NAME["int32"], (3,), "f: 'x'")


@pytest.mark.parametrize("dtype,field,values,shape,expected", [
    ("int64", "int64_val", [1, 2], (2, 2), [[1, 2], [2, 2]]),
    ("float32", "float_val", [1.5], (3,), [1.5, 1.5, 1.5]),
    ("float16", "half_val", [15360], (3,), [1.0, 1.0, 1.0]),  # 0x3c00: 1.0
    ("complex64", "scomplex_val", [1, 2], (2,), [1 + 2j, 1 + 2j]),  # the last (real, imaginary) pair
    ("bool", "bool_val", [False, True], (3,), [False, True, True]),
])
def test_repeat_last_fills_as_tensorflow(dtype, field, values, shape, expected):
    dt = dtypes.BY_NAME[dtype]
    got = decode(dt, shape, b"", values, "t", Fill.REPEAT_LAST)
    assert got.dtype == dt.numpy and got.shape == shape and got.tolist() == expected
    with pytest.raises(CorruptError, match=r"^t: holds \d values, its slice needs \d$"):
        decode(dt, shape, b"", values, "t", Fill.EXACT)


@pytest.mark.parametrize("dtype,typed,what", [
    ("int32", {}, "0 values for a tensor of 3"),  # TF: zeros; no graph constant of a lookup table is empty
    ("string", {"string_val": [b"a"]}, "1 values for a tensor of 3"),  # TF repeats strings too: not filled here
    ("int32", {"int_val": [1, 2, 3, 4]}, "4 values for a tensor of 3"),  # more values than elements
])
def test_what_repeat_last_does_not_fill(dtype, typed, what):
    tp = _proto(dtype, [3], **typed)
    with pytest.raises(CorruptError, match=what):
        tensor_value(memoryview(tp.SerializeToString()), "t")


@pytest.mark.parametrize("shape,n", [([1 << 40], 1 << 40), ([1 << 20, 1 << 20], 1 << 40),
                                     ([-1], (1 << 64) - 1)])  # -1: its varint read unsigned
def test_a_shape_claiming_billions_is_refused_before_any_allocation(shape, n):
    tp = _proto("int64", shape, int64_val=[7])
    with pytest.raises(RefusedError, match=f"^t: 1 values to repeat over {n} elements: over {MAX_FILLED} not filled$"):
        tensor_value(memoryview(tp.SerializeToString()), "t")
    with pytest.raises(CorruptError, match=f"^t: holds 1 values, its slice needs {n}$"):  # V1: never filled
        decode(dtypes.BY_NAME["int64"], (n,), b"", [7], "t", Fill.EXACT)


def test_a_fill_up_to_the_limit_is_made():
    assert tensor_value(memoryview(_proto("int64", [MAX_FILLED], int64_val=[7]).SerializeToString()),
                        "t") == [7] * MAX_FILLED


def test_graph_integers_read_as_the_protobuf_runtime_reads_them():
    """An int32 varint past 32 bits is truncated, an int64 one is two's complement."""
    packed = b"".join(encode_varint(v) for v in (5 + (1 << 32), (1 << 32) - 1, 1 << 40 | 3))
    raw = _proto("int32", [3]).SerializeToString() + encode_varint(7 << 3 | 2) + encode_varint(len(packed)) + packed
    runtime = list(TensorProto.FromString(raw).int_val)
    assert runtime == [5, -1, 3] and tensor_value(memoryview(raw), "t") == runtime
    tp = _proto("int64", [2], int64_val=[-(1 << 63), (1 << 63) - 1])
    assert tensor_value(memoryview(tp.SerializeToString()), "t") == [-(1 << 63), (1 << 63) - 1]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "int64",
                                   "uint32", "uint64", "bool", "float16", "complex64", "complex128", "qint8",
                                   "quint16", "string"])
def test_every_v1_dtype_exactly_as_written(dtype):
    """Values as TensorFlow's make_tensor_proto writes each dtype's typed field (half_val: the
    16 bits; complex: (real, imaginary) pairs), decoded back bit for bit."""
    dt = dtypes.BY_NAME[dtype]
    if dtype == "string":
        want = np.array([b"a", b"", b"\xff"], dtype=object).reshape(3, 1)
        typed = list(want.ravel())
    else:
        want = (np.arange(6) * 37 % 251).astype(dt.numpy).reshape(3, 2)
        if dtype.startswith("complex"):
            want = want + 1j * want[::-1]
        flat = want.ravel()
        typed = (flat.view(np.uint16).tolist() if dtype == "float16" else
                 flat.view(flat.real.dtype).tolist() if dtype.startswith("complex") else flat.tolist())
    tp = _proto(dtype, want.shape, **{dtypes.PROTO_FIELDS[dtype]: typed})
    got = v1.decode_tensor_proto(tp, dt, want.shape, "f: 'x'")
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (got.tolist() == want.tolist()) if dtype == "string" else got.tobytes() == want.tobytes()
    if dtype != "string":  # tensor_content: the bytes as they are
        tp = _proto(dtype, want.shape)
        tp.tensor_content = want.tobytes()
        assert v1.decode_tensor_proto(tp, dt, want.shape, "f: 'x'").tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype,content,what,error", [
    ("bfloat16", b"", "dtype bfloat16 cannot be stored in a V1 checkpoint", UnsupportedError),
    ("float8_e4m3fn", b"", "dtype float8_e4m3fn cannot be stored in a V1 checkpoint", UnsupportedError),
    ("string", b"ab", "tensor_content set for dtype string", CorruptError),
    ("int32", b"abc", "tensor_content holds 3 bytes, expected 8", CorruptError),
])
def test_v1_refusals(dtype, content, what, error):
    tp = _proto(dtype, [2])
    tp.tensor_content = content
    with pytest.raises(error, match=f"^f: 'x': {what}$"):
        v1.decode_tensor_proto(tp, dtypes.BY_NAME[dtype], (2,), "f: 'x'")


def test_bfloat16_in_tensor_content_is_read_by_v1_and_the_decoder_knows_no_field_for_float8():
    tp = _proto("bfloat16", [1])
    tp.tensor_content = b"\x80\x3f"  # 1.0
    assert float(v1.decode_tensor_proto(tp, dtypes.BY_NAME["bfloat16"], (1,), "f").item()) == 1.0
    with pytest.raises(UnsupportedError, match="t: dtype float8_e5m2 has no TensorProto value field"):
        tensor_proto.decode(dtypes.BY_NAME["float8_e5m2"], (1,), b"", [], "t", Fill.REPEAT_LAST)
