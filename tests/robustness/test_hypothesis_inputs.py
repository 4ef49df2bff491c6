"""Property tests: arbitrary bytes into every parser, only CkptErrors come out."""

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.errors import CkptError
from ckptool.format import bundle, dtypes
from ckptool.format import table as tbl
from ckptool.format.coding import decode_varint, encode_varint
from ckptool.format.table_build import TableBuilder
from ckptool.io.control.state import CheckpointState

EXAMPLES = settings(max_examples=300, deadline=None)


def _only_ckpt_errors(fn, *args):
    try:
        return fn(*args)
    except CkptError:
        return None


@EXAMPLES
@given(st.binary(max_size=300))
def test_table_reader_on_arbitrary_bytes(data):
    def go():
        return list(tbl.TableReader(data, "x.index"))
    _only_ckpt_errors(go)


@EXAMPLES
@given(st.binary(max_size=200), st.binary(min_size=48, max_size=48))
def test_table_reader_with_a_valid_magic(body, footer):
    data = body + footer[:40] + tbl.FOOTER_MAGIC.pack(tbl.MAGIC)
    _only_ckpt_errors(lambda: list(tbl.TableReader(data, "x.index")))


@EXAMPLES
@given(st.binary(max_size=200))
def test_iter_block_on_arbitrary_contents(data):
    _only_ckpt_errors(lambda: list(tbl.iter_block(data, "b")))


@EXAMPLES
@given(st.lists(st.tuples(st.binary(max_size=20), st.binary(max_size=50)), max_size=30),
       st.sampled_from([64, 256, tbl.BLOCK_SIZE]))
def test_table_round_trip(items, block_size):
    """TableBuilder output reads back to exactly what went in, at any block size."""
    want = sorted(dict(items).items())
    out = io.BytesIO()
    b = TableBuilder(out, block_size=block_size)
    for k, v in want:
        b.add(k, v)
    b.finish()
    assert [(k, bytes(v)) for k, v in tbl.TableReader(out.getvalue(), "t")] == want


@EXAMPLES
@given(st.binary(max_size=120), st.binary(max_size=30))
def test_parse_entry_and_header_on_arbitrary_bytes(value, key):
    _only_ckpt_errors(bundle.parse_entry, key or b"k", value, "x.index")
    _only_ckpt_errors(bundle.parse_header, value, "x.index")


@EXAMPLES
@given(st.binary(max_size=100), st.integers(0, 40), st.booleans(), st.booleans())
def test_string_and_variant_decoders_on_arbitrary_bytes(buf, n, big, verify):
    e = bundle.Entry(b"s", dtypes.from_name("string"), (n,), 0, 0, len(buf), 0, ())
    _only_ckpt_errors(bundle.decode_string, bytearray(buf), e, big, "d", verify)
    v = bundle.Entry(b"v", dtypes.from_name("variant"), (n,), 0, 0, len(buf), 0, ())
    _only_ckpt_errors(bundle.decode_variant, bytearray(buf), v, "d", verify)


@EXAMPLES
@given(st.lists(st.binary(max_size=20), max_size=10))
def test_string_round_trip(values):
    data, crc = bundle.encode_string(values)
    from ckptool.format.coding import mask_crc

    e = bundle.Entry(b"s", dtypes.from_name("string"), (len(values),), 0, 0, len(data), mask_crc(crc), ())
    out = bundle.decode_string(bytearray(data), e, False, "d", True)
    assert list(out) == values


@EXAMPLES
@given(st.binary(max_size=12), st.integers(0, 12))
def test_varint_decode(buf, pos):
    try:
        value, end = decode_varint(buf, pos, len(buf))
    except CkptError:
        return
    assert pos < end <= len(buf)
    assert encode_varint(value) == bytes(buf[pos:end]) or buf[end - 1] == 0


@EXAMPLES
@given(st.text(max_size=200))
def test_state_text_parser(text):
    _only_ckpt_errors(CheckpointState.from_text, text, "checkpoint")


@EXAMPLES
@given(st.text(max_size=50), st.lists(st.text(max_size=50), max_size=4))
def test_state_round_trip(latest, paths):
    st_ = CheckpointState(latest, paths)
    back = CheckpointState.from_text(st_.to_text(), "checkpoint")
    assert back.model_checkpoint_path == latest and back.all_model_checkpoint_paths == paths


@EXAMPLES
@given(st.lists(st.integers(-(2 ** 63), 2 ** 63 - 1), max_size=8))
def test_check_shape_never_escapes(dims):
    _only_ckpt_errors(bundle.check_shape, dims, "t")
    assert np.iinfo(np.int64).max >= 0
