"""ckptool.format.table_sort.PackedEntries: entries held packed come back in key order (as they
came when sorted, else sorted), and index_file refuses the empty key and a duplicate through it;
an index written from unsorted entries reads back whole."""

import random

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.format.table_sort import PackedEntries
from ckptool.io.backends.urls import storage_for
from ckptool.ops.write.writer import write_index


def test_packed_entries_come_back_in_key_order():
    pairs = [(f"k{i:05d}\xff".encode("latin-1"), bytes([i % 256]) * (i % 7)) for i in range(2000)]
    in_order = PackedEntries(iter(pairs))
    assert in_order.order is None and list(in_order) == pairs and list(in_order.keys()) == [k for k, _ in pairs]
    shuffled = pairs[:]
    random.Random(5).shuffle(shuffled)
    packed = PackedEntries(shuffled)
    assert packed.order is not None and list(packed) == pairs == sorted(shuffled)
    assert list(PackedEntries([])) == []


def test_index_from_unsorted_entries_reads_back(tmp_path):
    src = str(tmp_path / "a" / "ckpt")
    ckptool.write(src, {f"v{i:03d}": np.full(2, i, np.float32) for i in range(40)}, sync=False)
    storage, prefix = storage_for(src)
    with ckptool.open(src) as ck:
        entries = [(k, ck.raw_entry(k)) for k in ck.keys()][::-1]
    for f in storage.listdir(str(tmp_path / "a")):
        if f.endswith(".index"):
            storage.remove(str(tmp_path / "a" / f))
    write_index(src, 1, entries, sync=False)
    with ckptool.open(src) as ck:
        assert ck.names() == [f"v{i:03d}" for i in range(40)]
        assert ck.read("v017").tolist() == [17, 17]


@pytest.mark.parametrize("entries, message", [
    ([(b"b", b""), (b"a", b""), (b"b", b"x")], "duplicate key 'b'"),
    ([(b"a", b""), (b"a", b"")], "duplicate key 'a'"),
    ([(b"a", b""), (b"", b"")], "the empty key is reserved"),
])
def test_index_refuses_duplicate_and_empty_keys(tmp_path, entries, message):
    prefix = str(tmp_path / "out" / "ckpt")
    with pytest.raises(CkptError, match=message):
        write_index(prefix, 1, entries, sync=False)
    assert not (tmp_path / "out" / bundle.index_filename("ckpt")).exists()
