"""Hostile input that tries to reach outside the directory given, or to exhaust memory."""

import io
import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError, CorruptError, MissingError
from ckptool.format import table as tbl
from ckptool.format import table_build as tbl_build
from ckptool.format.coding import crc32c, encode_varint, mask_crc
from ckptool.format.table_build import TableBuilder
from ckptool.io.control.state import CheckpointState, write_state


def _table_with_block(contents: bytes, ctype: int) -> bytes:
    """A table whose only data block is ``contents`` stored with compression ``ctype``."""
    buf = bytearray(contents)
    buf += tbl.TRAILER.pack(ctype, mask_crc(crc32c(bytes((ctype,)), crc32c(contents))))
    data = tbl.BlockHandle(0, len(contents))
    meta_contents = tbl_build._BlockBuilder(tbl.RESTART_INTERVAL).finish()
    meta = tbl.BlockHandle(len(buf), len(meta_contents))
    buf += meta_contents + tbl.TRAILER.pack(0, mask_crc(crc32c(b"\0", crc32c(meta_contents))))
    ib = tbl_build._BlockBuilder(1)
    ib.add(b"\xff", data.encode())
    index_contents = ib.finish()
    index = tbl.BlockHandle(len(buf), len(index_contents))
    buf += index_contents + tbl.TRAILER.pack(0, mask_crc(crc32c(b"\0", crc32c(index_contents))))
    return bytes(buf + tbl.write_footer(meta, index))


def test_snappy_bomb_is_refused_before_decompressing():
    # A valid-CRC Snappy block that claims to expand to 1 GiB from a few bytes.
    claim = encode_varint(1 << 30) + b"\x00\x00\x00"
    raw = _table_with_block(claim, tbl.SNAPPY_COMPRESSION)
    reader = tbl.TableReader(raw, "bomb.index")
    with pytest.raises(CorruptError, match="claims 1073741824 bytes"):
        list(reader)


def test_snappy_at_the_maximal_real_ratio_still_reads():
    """Zeros compress at Snappy's best ratio; the bound must still admit them."""
    cramjam = pytest.importorskip("cramjam")  # the one case that compresses (the reader needs it too)
    b = tbl_build._BlockBuilder(tbl.RESTART_INTERVAL)
    b.add(b"k", b"\0" * 200_000)
    contents = b.finish()
    comp = bytes(cramjam.snappy.compress_raw(contents))
    assert len(contents) / len(comp) > 15
    raw = _table_with_block(comp, tbl.SNAPPY_COMPRESSION)
    assert [(k, len(v)) for k, v in tbl.TableReader(raw, "z.index")] == [(b"k", 200_000)]


def test_snappy_claim_just_past_the_bound(tmp_path):
    body = b"\x00" * 10
    bound = tbl.SNAPPY_MAX_RATIO * (len(encode_varint(10 ** 6)) + len(body)) + 32
    claim = encode_varint(bound + 1)
    contents = claim + body
    assert bound + 1 > tbl.SNAPPY_MAX_RATIO * len(contents) + 32
    with pytest.raises(CorruptError):
        list(tbl.TableReader(_table_with_block(contents, 1), "b.index"))


@pytest.mark.parametrize("path", ["a\0b", "x" * 5000, "\0", "ckpt-1\n", "ckpt-1/../../../etc/passwd"])
def test_hostile_state_paths_give_one_ckpt_error(tmp_path, path):
    d = tmp_path / "run"
    d.mkdir()
    ckptool.write(str(d / "ckpt-1"), {"w": np.zeros(2, np.float32)}, sync=False)
    ckptool.write(str(d / "ckpt-2"), {"w": np.ones(2, np.float32)}, sync=False)
    write_state(str(d), CheckpointState(path, [path]))
    with pytest.raises(CkptError):
        ckptool.open(str(d))


def test_state_path_escaping_the_directory_is_followed_only_as_tensorflow_does(tmp_path):
    """A relative path with '..' resolves against the directory, as TF resolves it (TF1's
    Saver records absolute paths outside too). Reading is not destructive; prune must
    never delete there (test_mutation's prune target and below)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ckptool.write(str(outside / "ckpt-9"), {"o": np.arange(2)}, sync=False)
    d = tmp_path / "run"
    d.mkdir()
    write_state(str(d), CheckpointState("../outside/ckpt-9", ["../outside/ckpt-9"]))
    with ckptool.open(str(d)) as ck:
        assert ck.names() == ["o"]


def test_symlinked_index_out_of_the_directory_is_not_written_through(tmp_path):
    """save --force onto a prefix whose .index is a symlink out of the directory replaces the
    link (rename), never writes into the file it points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ckptool.write(str(outside / "ckpt-1"), {"o": np.arange(2)}, sync=False)
    before = (outside / "ckpt-1.index").read_bytes()
    d = tmp_path / "run"
    d.mkdir()
    os.symlink(outside / "ckpt-1.index", d / "ckpt-1.index")
    ckptool.write(str(d / "ckpt-1"), {"w": np.ones(2, np.float32)}, force=True, sync=False)
    assert (outside / "ckpt-1.index").read_bytes() == before
    assert not (d / "ckpt-1.index").is_symlink()


@pytest.mark.parametrize("name", ["../../escape", "/abs/escape", "..", "a/../../b", "\\..\\x"])
def test_hostile_tensor_names_stay_keys(tmp_path, name):
    """A tensor name is a key inside the index, never a path: writing and rewriting
    checkpoints with such names creates files only at the prefix."""
    d = tmp_path / "deep" / "run"
    ckptool.write(str(d / "ckpt-1"), {name: np.arange(3, dtype=np.int32)}, sync=False)
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["deep/run/ckpt-1.data-00000-of-00001", "deep/run/ckpt-1.index"]
    with ckptool.open(str(d / "ckpt-1")) as ck:
        assert ck.names() == [name]


def _cli(argv):
    from fuzz.engine import _cli as run

    return run(argv)


@pytest.mark.parametrize("cmd", ["convert", "rewrite_names"])
@pytest.mark.parametrize("name", ["../../escape", "/abs/escape"])
def test_hostile_names_cannot_make_convert_or_rewrite_write_outside_dst(tmp_path, cmd, name):
    src = tmp_path / "src" / "ckpt-1"
    ckptool.write(str(src), {name: np.arange(3, dtype=np.int32), "ok": np.zeros(1)}, sync=False)
    out = tmp_path / "out"
    out.mkdir()
    before = {p for p in tmp_path.rglob("*")}
    targets = [str(out / "dst")] if cmd == "rewrite_names" else [str(out / "dst"), str(out / "d.npz"),
                                                                  str(out / "d.safetensors")]
    for dst in targets:
        argv = ["rewrite-names", str(src), dst, "--rule", "ok=ok2"] if cmd == "rewrite_names" else \
            ["convert", str(src), dst]
        _cli(argv)
    new = {p for p in tmp_path.rglob("*")} - before
    assert all(out in p.parents for p in new), sorted(map(str, new))
    assert not os.path.exists("/abs/escape")


def test_table_claims_are_bounded_by_the_file():
    """Block handles pointing past the end, huge sizes: an error naming the file, no allocation."""
    raw = io.BytesIO()
    b = TableBuilder(raw)
    b.add(b"", b"")
    b.finish()
    data = bytearray(raw.getvalue())
    n = len(data)
    handles = tbl.BlockHandle(0, 0).encode() + tbl.BlockHandle(2 ** 62, 2 ** 62).encode()
    data[n - 48:n - 8] = handles.ljust(40, b"\0")
    with pytest.raises(CorruptError, match="x.index"):
        tbl.TableReader(bytes(data), "x.index")


def test_missing_shard_is_a_missing_error(tmp_path):
    ckptool.write(str(tmp_path / "c"), {"w": np.zeros(2)}, sync=False)
    os.remove(tmp_path / "c.data-00000-of-00001")
    with ckptool.open(str(tmp_path / "c")) as ck:
        with pytest.raises(MissingError, match="data-00000-of-00001"):
            ck.read("w")
