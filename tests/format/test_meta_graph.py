"""The version strings of a MetaGraphDef, read through protos/meta_graph.proto."""

from __future__ import annotations

import pytest

from ckptool.errors import CorruptError
from ckptool.format.coding import encode_varint
from ckptool.format.meta_graph import tf_versions


def field(number: int, payload: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def test_versions_among_fields_it_does_not_declare():
    info = field(1, b"meta_graph_version") + field(5, b"2.21.0") + encode_varint(7 << 3) + b"\x01" \
        + field(6, b"v2.21.0-rc0-1-g0abc")
    doc = field(2, b"\x0a\x03abc" * 50) + field(1, info) + encode_varint(9 << 3 | 1) + b"\0" * 8
    assert tf_versions(doc) == {"tensorflow_version": "2.21.0", "tensorflow_git_version": "v2.21.0-rc0-1-g0abc"}


def test_absent_is_none_and_empty_is_empty():
    assert tf_versions(b"") == {"tensorflow_version": None, "tensorflow_git_version": None}
    assert tf_versions(field(1, field(5, b""))) == {"tensorflow_version": "", "tensorflow_git_version": None}


def test_bytes_that_are_not_utf8_are_shown():
    assert tf_versions(field(1, field(5, b"2.\xff")))["tensorflow_version"] == "2.\ufffd"


@pytest.mark.parametrize("junk", [b"\x0a\x05ab", b"\x0a", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
def test_a_broken_file_is_corrupt(junk):
    with pytest.raises(CorruptError, match="meta graph"):
        tf_versions(junk)
