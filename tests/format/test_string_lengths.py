"""A DT_STRING length varint may run to 10 bytes (2**70): one past the entry's bytes is a
CorruptError naming the tensor, never an OverflowError from numpy (found by
tests/ops/test_api_errors.py)."""

import pytest

from ckptool.errors import CorruptError
from ckptool.format import bundle, dtypes
from ckptool.format.coding import encode_varint


def _varint10(v: int) -> bytes:
    out = bytearray()
    for _ in range(9):
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v & 0x7F)
    return bytes(out)


@pytest.mark.parametrize("length", [2**65, 2**64, 2**40, 100])
@pytest.mark.parametrize("verify", [True, False])
def test_a_string_length_past_the_entry_is_corrupt(length, verify):
    buf = bytearray(_varint10(length) + encode_varint(2) + b"\0\0\0\0" + b"abcd")
    e = bundle.Entry(b"s", dtypes.from_name("string"), (2,), 0, 0, len(buf), 0, ())
    with pytest.raises(CorruptError, match="'s'"):
        bundle.decode_string(buf, e, False, "x.data", verify)


def test_sound_strings_still_decode():
    data, crc = bundle.encode_string([b"ab", b"", b"xyz"])
    from ckptool.format.coding import mask_crc

    e = bundle.Entry(b"s", dtypes.from_name("string"), (3,), 0, 0, len(data), mask_crc(crc), ())
    assert bundle.decode_string(bytearray(data), e, False, "x.data", True).tolist() == [b"ab", b"", b"xyz"]
