"""The .safetensors header codec: round trips (hypothesis), hostile headers refused, names checked."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.format import safetensors_meta as stm
from ckptool.format.entry import numel

names = st.text(min_size=1, max_size=20).filter(lambda s: s != stm.METADATA and not s.startswith("\0"))
shapes = st.lists(st.integers(0, 4), max_size=3).map(tuple)
blobs = st.binary(max_size=40)


@st.composite
def extras(draw):
    strings = {}
    for name in draw(st.lists(names, max_size=4, unique=True)):
        shape = draw(shapes)
        n = 1
        for d in shape:
            n *= d
        strings[name] = (shape, draw(st.lists(blobs, min_size=n, max_size=n)))
    return stm.Extras(format=draw(st.sampled_from(["tf", "pt"])),
                      object_graph=draw(st.none() | blobs),
                      strings=strings,
                      names=draw(st.dictionaries(names, names, max_size=4).filter(
                          lambda d: len(set(d.values())) == len(d))),
                      other=draw(st.dictionaries(st.text(max_size=8).filter(
                          lambda k: not k.startswith("ckptool.") and k != "format"), st.text(max_size=8),
                          max_size=3)))


@given(extras())
def test_metadata_round_trips(ex):
    meta = stm.encode_metadata(ex)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    assert meta["format"] == ex.format
    back = stm.decode_metadata(json.loads(json.dumps(meta)))
    assert back == ex


@given(st.lists(st.tuples(names, st.sampled_from(sorted(stm.ST_ITEMSIZE)), shapes), max_size=6,
                unique_by=lambda t: t[0]), extras())
def test_header_round_trips(tensors, ex):
    head, total = stm.encode_header(tensors, ex)
    assert len(head) % 8 == 0
    n = stm.header_length(head[:8], len(head) + total, "f")
    got, meta = stm.decode_header(head[8:8 + n], total, "f")
    assert [(t.name, t.dtype, t.shape) for t in got if t.end > t.begin] == \
        [t for t in tensors if numel(t[2]) > 0]
    assert sorted((t.name, t.dtype, t.shape) for t in got) == sorted(tensors)
    assert stm.decode_metadata(meta) == ex


def _raw(header):
    return json.dumps(header).encode()


@pytest.mark.parametrize("header, size, match", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1],
                                                                        "data_offsets": [4, 8]}}, 8, "overlap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, 4, "needs 8 bytes"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 12, "file holds 12"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4, "shape"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}, 4, "data_offsets"),
    ({"__metadata__": {"k": 1}}, 0, "object of strings"),
    ([], 0, "not a JSON object"),
    ({"a": {"dtype": "F32", "shape": [0, 2**40, 2**40], "data_offsets": [0, 0]}}, 0, "too large"),
])
def test_hostile_headers_refused(header, size, match):
    with pytest.raises(CorruptError, match=match):
        stm.decode_header(_raw(header), size, "f")


def test_unknown_dtype_and_bad_records():
    with pytest.raises(UnsupportedError, match="'F4'"):
        stm.decode_header(_raw({"a": {"dtype": "F4", "shape": [], "data_offsets": [0, 1]}}), 1, "f")
    with pytest.raises(CorruptError, match="bad base64"):
        stm.decode_metadata({stm.OBJECT_GRAPH: "!!"})
    with pytest.raises(CorruptError, match="values for shape"):
        stm.decode_metadata({stm.STRING_PREFIX + "s": json.dumps({"shape": [2], "base64": ["AA=="]})})
    with pytest.raises(CorruptError, match="over safetensors' limit"):
        stm.header_length((stm.MAX_HEADER + 1).to_bytes(8, "little"), 10**9, "f")


def test_names_a_header_cannot_hold():
    with pytest.raises(UnsupportedError, match="reserves"):
        stm.check_name("__metadata__")
    with pytest.raises(UnsupportedError, match="not UTF-8"):
        stm.check_name(b"w\xff".decode("utf-8", "surrogateescape"))
    stm.check_name("ok/name")


def test_deep_nesting_and_too_many_dimensions():
    with pytest.raises(CorruptError, match="not a safetensors header: nested too deep"):
        stm.decode_header(b"[" * 100000 + b"]" * 100000, 0, "f")
    with pytest.raises(CorruptError, match="not JSON"):
        stm.decode_metadata({stm.NAMES_KEY: "[" * 100000})
    with pytest.raises(UnsupportedError, match="at most 64"):
        stm.decode_header(_raw({"a": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}), 4, "f")


def test_stfile_reads_what_convert_wrote_and_refuses_a_truncated_file(tmp_path):
    import numpy as np

    import ckptool
    from ckptool.ops.read.stfile import StFile
    from ckptool.ops.transform.convert.run import convert

    ckptool.write(str(tmp_path / "c"), {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "s": b"x"}, sync=False)
    convert(str(tmp_path / "c"), str(tmp_path / "o.safetensors"))
    with StFile(str(tmp_path / "o.safetensors")) as f:
        assert f.read("w").tolist() == [[0, 1, 2], [3, 4, 5]]
        assert f.extras.strings == {"s": ((), [b"x"])}
    raw = (tmp_path / "o.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(raw[:-1])
    with pytest.raises(CorruptError, match="file holds"):
        StFile(str(tmp_path / "t.safetensors"))


def test_metadata_cannot_restore_reserved_names():
    with pytest.raises(CorruptError, match="cannot name"):
        stm.decode_metadata({stm.NAMES_KEY: json.dumps({"a": ""})})
    with pytest.raises(CorruptError, match="cannot name"):
        stm.decode_metadata({stm.STRING_PREFIX + "\0x": json.dumps({"shape": [], "base64": ["AA=="]})})


class _Parts:
    """An object graph not held (as convert's, read from its checkpoint a part at a time)."""

    def __init__(self, data):
        self.data = data

    def parts(self, size):
        return (memoryview(self.data)[at:at + size] for at in range(0, len(self.data), size))

    def __bytes__(self):
        return self.data


@given(st.lists(st.tuples(names, st.sampled_from(sorted(stm.ST_ITEMSIZE)), shapes), max_size=6,
                unique_by=lambda t: t[0]), extras(), st.sampled_from(["bytes", "view", "parts"]),
       st.sampled_from([3, 6, 3 << 18]))
def test_header_is_json_dumps_of_it_written_in_pieces(tensors, ex, given_as, piece):
    """The header written in pieces (the object graph's base64 ``GRAPH_PIECE`` bytes at a time,
    from bytes, a view or parts never held) is byte for byte ``json.dumps`` of the whole."""
    from unittest import mock

    header = {stm.METADATA: stm.encode_metadata(ex)}
    offset = 0
    for name, code, shape in tensors:
        n = numel(shape) * stm.ST_ITEMSIZE[code]
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    want = (len(text) + -len(text) % 8).to_bytes(8, "little") + text + b" " * (-len(text) % 8)
    if ex.object_graph is not None and given_as != "bytes":
        ex.object_graph = memoryview(ex.object_graph) if given_as == "view" else _Parts(ex.object_graph)
    with mock.patch.object(stm, "GRAPH_PIECE", piece):
        head, total = stm.encode_header(tensors, ex)
        size, pieces = stm.header_pieces(tensors, ex)
        assert b"".join(pieces) == head == want
    assert total == size == offset
