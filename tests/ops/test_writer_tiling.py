"""The writer refuses slices of a partitioned tensor that do not tile its full shape
exactly once: the reader's rule (format/slices.py tiling_problem), checked in add_sliced
and when a sliced entry is copied with add_raw. Nothing is left on disk."""

import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.format import bundle, dtypes
from ckptool.ops.write.writer import BundleWriter

BAD = {
    "repeat": [((0, 2), (0, -1)), ((0, 2), (0, -1)), ((2, 2), (0, -1))],
    "overlap": [((0, 3), (0, -1)), ((2, 2), (0, -1))],
    "gap": [((0, 1), (0, -1)), ((2, 2), (0, -1))],
    "outside": [((0, 2), (0, -1)), ((2, 3), (0, -1))],
    "rank": [((0, 4),)],
    "none": [],
    "grid-overlap": [((0, 2), (0, 2)), ((2, 2), (0, 2)), ((0, 2), (1, 1)), ((1, 3), (2, 1))],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_add_sliced_refuses_slices_that_do_not_tile(tmp_path, name):
    with pytest.raises(CkptError, match="partitioned tensor 'p'"):
        with BundleWriter(str(tmp_path / "c"), sync=False) as w:
            w.add_sliced("p", "float32", (4, 3), BAD[name])
    assert os.listdir(tmp_path) == []


def test_add_raw_refuses_a_copied_entry_that_does_not_tile(tmp_path):
    e = bundle.Entry(b"p", dtypes.from_name("float32"), (4, 3), 0, 0, 0, 0, tuple(BAD["overlap"]))
    with pytest.raises(CkptError, match="overlap"):
        with BundleWriter(str(tmp_path / "c"), sync=False) as w:
            w.add_raw("p", e, None)
    assert os.listdir(tmp_path) == []


def test_a_grid_that_tiles_is_written_and_reads_back(tmp_path):
    full = np.arange(12, dtype=np.float32).reshape(4, 3)
    slices = [((0, 2), (0, 2)), ((2, 2), (0, 2)), ((0, 4), (2, 1))]
    with BundleWriter(str(tmp_path / "c"), sync=False) as w:
        w.add_sliced("p", "float32", (4, 3), slices)
        for sl in slices:
            w.add(bundle.encode_tensor_name_slice(b"p", sl), full[bundle.slice_region(sl, (4, 3))])
        w.finish()
    with ckptool.open(str(tmp_path / "c")) as ck:
        np.testing.assert_array_equal(ck.read("p"), full)
