"""The LevelDB-style table: hand-built blocks, footers, and builder/reader round trips."""

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ckptool.errors import ChecksumError, CorruptError
from ckptool.format import coding, table, table_build
from ckptool.format.table_build import TableBuilder


def hexb(s: str) -> bytes:
    """Hex with spaces and '#' comments, one field per line."""
    return bytes.fromhex("".join(line.split("#")[0] for line in s.splitlines()))


def trailer(contents: bytes, ctype: int = 0) -> bytes:
    crc = coding.mask_crc(coding.crc32c(bytes((ctype,)), coding.crc32c(contents)))
    return struct.pack("<BI", ctype, crc)


# A data block with two entries, "ab" -> "1" and "ac" -> "22" (second shares 1 byte).
BLOCK = hexb("""
00 02 01  6162  31        # shared 0, non_shared 2, value_len 1, key "ab", value "1"
01 01 02  63    3232      # shared 1, non_shared 1, value_len 2, key delta "c", value "22"
00000000                  # restart[0] = 0
01000000                  # num_restarts = 1
""")
EMPTY_BLOCK = hexb("00000000 01000000")  # the metaindex TF writes: one restart at 0


def build_file(blocks):
    """Data blocks, empty metaindex, index (restart interval 1), footer: as TF lays them out."""
    out = b""
    handles = []
    for key, contents in blocks:
        handles.append((key, table.BlockHandle(len(out), len(contents))))
        out += contents + trailer(contents)
    meta = table.BlockHandle(len(out), len(EMPTY_BLOCK))
    out += EMPTY_BLOCK + trailer(EMPTY_BLOCK)
    index = b""
    for key, h in handles:
        index += bytes((0, len(key), len(h.encode()))) + key + h.encode()
    restarts = []
    pos = 0
    for key, h in handles:
        restarts.append(pos)
        pos += 3 + len(key) + len(h.encode())
    index += b"".join(struct.pack("<I", r) for r in restarts) + struct.pack("<I", len(restarts))
    ih = table.BlockHandle(len(out), len(index))
    out += index + trailer(index)
    return out + table.write_footer(meta, ih)


def test_mask_known_values():
    assert coding.mask_crc(0) == 0xA282EAD8
    for v in (0, 1, 0xFFFFFFFF, 0x12345678):
        assert coding.unmask_crc(coding.mask_crc(v)) == v


def test_footer_layout():
    f = table.write_footer(table.BlockHandle(10, 8), table.BlockHandle(23, 14))
    assert len(f) == 48
    assert f[:4] == bytes([10, 8, 23, 14]) and f[4:40] == bytes(36)
    assert f[40:] == bytes.fromhex("57fb808b247547db")


def test_hand_built_block_entries():
    entries = [(k, bytes(v)) for k, v in table.iter_block(BLOCK, "t")]
    assert entries == [(b"ab", b"1"), (b"ac", b"22")]


def test_empty_block_has_no_entries():
    assert list(table.iter_block(EMPTY_BLOCK, "t")) == []


def test_hand_built_file_reads():
    data = build_file([(b"ad", BLOCK)])
    assert [(k, bytes(v)) for k, v in table.TableReader(data, "f")] == [(b"ab", b"1"), (b"ac", b"22")]


def test_builder_matches_hand_layout():
    out = io.BytesIO()
    b = TableBuilder(out)
    b.add(b"ab", b"1")
    b.add(b"ac", b"22")
    b.finish()
    # The index key after the last block is ShortSuccessor("ac") = "b".
    assert out.getvalue() == build_file([(b"b", BLOCK)])


@pytest.mark.parametrize("start,limit,expected", [
    (b"abcd", b"abzz", b"abd"),
    (b"abc", b"abd", b"abc"),  # the next byte is only one larger: keep start
    (b"ab", b"abc", b"ab"),  # prefix: unchanged
    (b"a\xff", b"b", b"a\xff"),
])
def test_shortest_separator(start, limit, expected):
    assert table_build._shortest_separator(start, limit) == expected
    assert start <= expected < limit


def test_short_successor():
    assert table_build._short_successor(b"save_counter/x") == b"t"
    assert table_build._short_successor(b"\xff\xffa") == b"\xff\xffb"
    assert table_build._short_successor(b"\xff\xff") == b"\xff\xff"


def test_bad_magic():
    data = bytearray(build_file([(b"ad", BLOCK)]))
    data[-1] ^= 1
    with pytest.raises(CorruptError, match="bad magic"):
        table.TableReader(bytes(data), "f")


def test_too_short():
    with pytest.raises(CorruptError, match="too short"):
        table.TableReader(b"\0" * 47, "f")


def test_block_crc_mismatch_names_offset():
    data = bytearray(build_file([(b"ad", BLOCK)]))
    data[4] ^= 0x01  # inside the data block's key bytes
    with pytest.raises(ChecksumError, match="offset 0"):
        list(table.TableReader(bytes(data), "f"))


def test_block_handle_past_eof():
    data = build_file([(b"ad", BLOCK)])
    bad = data[:-48] + table.write_footer(table.BlockHandle(0, 8), table.BlockHandle(10**6, 5))
    with pytest.raises(CorruptError, match="truncated block"):
        table.TableReader(bad, "f")


def test_bad_compression_type():
    contents = BLOCK
    bad_trailer = trailer(contents, ctype=7)
    data = contents + bad_trailer
    with pytest.raises(CorruptError, match="bad block type 7"):
        table.read_block(data + b"\0" * 48, table.BlockHandle(0, len(contents)), "f")


def test_snappy_block_is_read():
    cramjam = pytest.importorskip("cramjam")
    compressed = bytes(cramjam.snappy.compress_raw(BLOCK))
    blob = compressed + trailer(compressed, ctype=1) + b"\0" * 48
    got = table.read_block(blob, table.BlockHandle(0, len(compressed)), "f")
    assert bytes(got) == BLOCK


def test_snappy_expansion_is_bounded():
    # A snappy block that claims to expand to 1 GiB from a few bytes.
    contents = coding.encode_varint(1 << 30) + b"\x00"
    blob = contents + trailer(contents, ctype=1) + b"\0" * 48
    with pytest.raises(CorruptError, match="corrupted compressed block"):
        table.read_block(blob, table.BlockHandle(0, len(contents)), "f")


def test_restart_count_beyond_block():
    bad = BLOCK[:-4] + struct.pack("<I", 1000)
    with pytest.raises(CorruptError, match="restarts"):
        list(table.iter_block(bad, "t"))


def test_entry_running_past_block():
    bad = hexb("00 02 7f 6162 31  00000000 01000000")
    with pytest.raises(CorruptError, match="bad entry"):
        list(table.iter_block(bad, "t"))


def test_shared_longer_than_previous_key():
    bad = hexb("05 02 01 6162 31  00000000 01000000")
    with pytest.raises(CorruptError, match="bad entry"):
        list(table.iter_block(bad, "t"))


def test_unsorted_keys_are_corrupt():
    blk = hexb("00 01 00 62  00 01 00 61  00000000 01000000")  # "b" then "a"
    with pytest.raises(CorruptError, match="out of order"):
        list(table.TableReader(build_file([(b"c", blk)]), "f"))


def test_builder_refuses_unsorted():
    b = TableBuilder(io.BytesIO())
    b.add(b"b", b"")
    with pytest.raises(ValueError):
        b.add(b"a", b"")


@given(st.dictionaries(st.binary(max_size=40), st.binary(max_size=300), max_size=300),
       st.sampled_from([64, 256, 4096]))
def test_builder_reader_round_trip(items, block_size):
    out = io.BytesIO()
    b = TableBuilder(out, block_size=block_size)
    for k in sorted(items):
        b.add(k, items[k])
    size = b.finish()
    data = out.getvalue()
    assert size == len(data)
    got = [(k, bytes(v)) for k, v in table.TableReader(data, "f")]
    assert got == sorted(items.items())


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_varint_round_trip(v):
    enc = coding.encode_varint(v)
    assert coding.decode_varint(enc, 0, len(enc)) == (v, len(enc))


def test_varint_too_long():
    with pytest.raises(CorruptError):
        coding.decode_varint(b"\x80" * 11, 0, 11)
    with pytest.raises(CorruptError):
        coding.decode_varint(b"\x80\x80", 0, 2)
