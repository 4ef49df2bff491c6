"""The cheap integrity check (ckptool.ops.read.integrity, issue 36): every file there, each data
file as long as the index's entries need; no tensor byte read."""

import os

import numpy as np
import pytest

import ckptool
from ckptool.io.backends.local import LOCAL
from ckptool.ops.read.integrity import damage, is_intact


@pytest.fixture
def ck(tmp_path):
    p = tmp_path / "ckpt-1"
    ckptool.write(str(p), {"a": np.arange(100, dtype=np.float32), "b": np.arange(50, dtype=np.int64)},
                  num_shards=2, sync=False)
    return p


def shards(p):
    return sorted(p.parent.glob(p.name + ".data-*"))


def test_an_intact_checkpoint(ck):
    assert damage(LOCAL, str(ck)) is None and is_intact(LOCAL, str(ck))


def test_a_data_file_shorter_than_the_index_needs(ck):
    for s in shards(ck):
        if s.stat().st_size:
            os.truncate(s, s.stat().st_size - 1)
            problem = damage(LOCAL, str(ck))
            assert problem is not None and s.name in problem and "truncated" in problem
            assert f"{s.stat().st_size} bytes" in problem
            return
    raise AssertionError("no data")


def test_a_data_file_one_byte_longer_is_intact(ck):
    s = [s for s in shards(ck) if s.stat().st_size][0]
    with open(s, "ab") as f:
        f.write(b"x")
    assert damage(LOCAL, str(ck)) is None


def test_a_missing_data_file_is_named(ck):
    s = [s for s in shards(ck) if s.stat().st_size][-1]
    s.unlink()
    problem = damage(LOCAL, str(ck))
    assert problem is not None and s.name in problem and "missing" in problem


def test_index_missing_or_garbled(ck):
    idx = ck.parent / (ck.name + ".index")
    raw = idx.read_bytes()
    idx.write_bytes(b"garbage" * 3)
    assert "not a readable index" in damage(LOCAL, str(ck))
    idx.write_bytes(raw[:-10])
    assert "not a readable index" in damage(LOCAL, str(ck))
    idx.unlink()
    assert "is missing" in damage(LOCAL, str(ck)) and "data file" in damage(LOCAL, str(ck))
    for s in shards(ck):
        s.unlink()
    assert damage(LOCAL, str(ck)).endswith("ckpt-1.index is missing")


def test_sizes_from_a_listing_are_used(ck):
    s = [s for s in shards(ck) if s.stat().st_size][0]
    assert "truncated" in damage(LOCAL, str(ck), sizes={s.name: 1})


def test_v1_files(tmp_path):
    data = os.path.join(os.path.dirname(__file__), "..", "data", "v1", "single", "v1ckpt")
    assert damage(LOCAL, data, v1_files=(data,)) is None
    bad = tmp_path / "v1ckpt"
    bad.write_bytes(b"not a table")
    assert "not a readable V1" in damage(LOCAL, str(bad), v1_files=(str(bad),))
