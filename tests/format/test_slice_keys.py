"""Slice keys of partitioned tensors decode back to (name, slice) and read as users write them."""

from hypothesis import given
from hypothesis import strategies as st

from ckptool.format.slices import decode_tensor_name_slice, encode_tensor_name_slice, key_text, slice_text

dims = st.one_of(st.just((0, -1)), st.tuples(st.integers(0, 2**62), st.integers(1, 2**62)))
# names as TF writes them (UTF-8, so no 0xff byte; NUL escaped)
names = st.text(max_size=12).map(lambda s: s.encode("utf-8"))


@given(names, st.lists(dims, max_size=6).map(tuple))
def test_decode_inverts_encode(name, sl):
    assert decode_tensor_name_slice(encode_tensor_name_slice(name, sl)) == (name, sl)


def test_key_text_names_a_slice_as_users_write_it():
    assert key_text(encode_tensor_name_slice(b"emb/weights", ((0, 4), (0, -1)))) == "emb/weights[0:4,:]"
    assert key_text(encode_tensor_name_slice(b"emb/bias", ((3, 2),))) == "emb/bias[3:5]"
    assert key_text(b"dense/kernel") == "dense/kernel"
    assert key_text(b"\x00not a slice key") == "\x00not a slice key"
    assert slice_text("w", ((0, -1), (2, 3))) == "w[:,2:5]"


@given(st.binary(max_size=40))
def test_any_key_gets_a_text(key):
    assert isinstance(key_text(key), str)
