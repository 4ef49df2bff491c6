"""The io rules of issue 27: the exact temporary-file rule, which files are a checkpoint's
(names compared whole, a V1 file only when it parses), literal matching of names."""

import os

import numpy as np
import pytest

import ckptool
from ckptool.io.backends.local import LOCAL
from ckptool.io.layout import checkpoints as L
from ckptool.io.layout.listing import scan
from ckptool.io.safety.dirfd import LocalDir

TEMPS = {
    "ckpt-1.index.tempstate123": "ckpt-1",
    "ckpt-1.data-00000-of-00001.tempstate9": "ckpt-1",
    "model_temp-3.index.tempstate5": "model_temp-3",
    "ckpt[a]-400.data-00001-of-00002.tempstate1": "ckpt[a]-400",
    "x.meta.tempstate17": "x",
    "checkpoint.tmp0123abcd": None,
    "checkpoint.tmp" + "ab" * 16: None,
    ".ckptool-prune-pending.tmp" + "0f" * 16: None,
    "checkpoint.tempstate42": None,
}
NOT_TEMPS = ["softmax_temp_0.5", "prompt_templates", "hparams.tmpl", "model_temp-3", "model_temp-3.index",
             "ckpt-1.index.tempstate", "ckpt-1.index.tempstateX", "ckpt-1.tempstate3", "notes.tmp",
             "checkpoint.tmpXYZ", "run.tmp0a1b", "ckpt-1.index.bak", "a_temp_b", "ckpt_temp_xyz",
             "ckpt-1.index.tempstate١٢", ".tmp0123", "_temp"]


@pytest.mark.parametrize("name", sorted(TEMPS))
def test_temporary_names_and_their_owner(name):
    assert L.is_temp(name)
    assert L.temp_owner(name) == TEMPS[name]
    assert L.file_role(name) is None


@pytest.mark.parametrize("name", NOT_TEMPS)
def test_names_that_are_not_temporaries(name):
    assert not L.is_temp(name)


def test_staging_directory_names_are_exact():
    assert L.staging_owner("ckpt-4_temp") == "ckpt-4"
    assert L.staging_owner("ckpt-4_temp_" + "a" * 32) == "ckpt-4"
    for name in ("softmax_temp_0.5", "ckpt-4_temp_" + "a" * 31, "ckpt-4_temp_" + "A" * 32, "ckpt_temps",
                 "prompt_templates", "_temp"):
        assert L.staging_owner(name) is None, name


def test_staging_content_only_part_files():
    ok = [("part-00000-of-00002.index", True), ("part-00000-of-00002.data-00000-of-00001", True),
          ("part-00001-of-00002.index.tempstate77", True)]
    assert L.is_staging_dir(ok)
    assert not L.is_staging_dir([])
    assert not L.is_staging_dir(ok + [("notes.txt", True)])
    assert not L.is_staging_dir([("part-00000.csv", True)])  # a Spark output is not TF's staging
    assert not L.is_staging_dir([("part-00000-of-00002.index", False)])  # a directory or link


def test_owns_compares_names_whole():
    assert L.owns("ckpt-1", "ckpt-1.index")
    assert L.owns("ckpt-1", "ckpt-1.data-00000-of-00001")
    assert L.owns("ckpt-1", "ckpt-1.meta")
    for other in ("ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-10.meta", "ckpt-1.index.bak",
                  "ckpt-1.notes.txt", "ckpt-1.index.tempstate1", "ckpt-1", "ckpt-1x.index"):
        assert not L.owns("ckpt-1", other), other
    assert L.owns("m-?????-of-00002", "m-00000-of-00002") and L.owns("m-?????-of-00002", "m.meta")
    assert not L.owns("m-?????-of-00002", "m-00000-of-00003")


def _write(prefix, value=1.0):
    ckptool.write(str(prefix), {"w": np.full(3, value, np.float32)}, sync=False)


def test_checkpoint_files_never_take_ckpt_10_for_ckpt_1(tmp_path):
    for s in (1, 10, 100):
        _write(tmp_path / f"ckpt-{s}", s)
    (tmp_path / "ckpt-1.notes.txt").write_text("x")
    files = [os.path.basename(f) for f in L.checkpoint_files(LOCAL, str(tmp_path / "ckpt-1"))]
    assert files == ["ckpt-1.data-00000-of-00001", "ckpt-1.index"]


def test_glob_characters_in_a_prefix_are_literal(tmp_path):
    _write(tmp_path / "ckpt[a]-400", 4.0)
    _write(tmp_path / "ckpta-400", 5.0)
    _write(tmp_path / "ck*-1", 6.0)
    files = sorted(os.path.basename(f) for f in L.checkpoint_files(LOCAL, str(tmp_path / "ckpt[a]-400")))
    assert files == ["ckpt[a]-400.data-00000-of-00001", "ckpt[a]-400.index"]
    assert [os.path.basename(f) for f in L.checkpoint_files(LOCAL, str(tmp_path / "ck*-1"))] == \
        ["ck*-1.data-00000-of-00001", "ck*-1.index"]
    with ckptool.open(str(tmp_path / "ckpt[a]-400")) as ck:
        assert float(ck.read("w")[0]) == 4.0 and not ck.missing_shards()[0]


def test_a_text_file_named_like_a_checkpoint_is_nobodys(tmp_path):
    _write(tmp_path / "ckpt", 1.0)
    (tmp_path / "ckpt").write_text("my notes\n")
    (tmp_path / "other").write_text("not a V1 table")
    assert L.v1_files(LOCAL, str(tmp_path / "ckpt")) == ()
    assert L.v1_files(LOCAL, str(tmp_path / "other")) == ()
    assert str(tmp_path / "ckpt") not in L.checkpoint_files(LOCAL, str(tmp_path / "ckpt"))
    assert not L.checkpoint_exists(LOCAL, str(tmp_path / "other"))


def test_listing_groups_exact_temporaries_only(tmp_path):
    d = tmp_path
    _write(d / "model_temp-3")
    _write(d / "ckpt-4")  # ckpt-5's temporaries below: the killed save of the next step
    other = d / "other_temp"  # a staging-shaped directory of no checkpoint 'other': ordinary
    other.mkdir()
    (other / "part-00000-of-00001.index").write_bytes(b"i")
    (d / "nobody.index.tempstate4").write_bytes(b"t")  # no checkpoint 'nobody' here: ordinary
    (d / "softmax_temp_0.5").mkdir()
    (d / "prompt_templates").mkdir()
    (d / "hparams.tmpl").write_text("x")
    st = d / ("ckpt-5_temp_" + "c" * 32)
    st.mkdir()
    (st / "part-00000-of-00001.index").write_bytes(b"i")
    spark = d / "eval_temp"
    spark.mkdir()
    (spark / "part-00000.csv").write_text("1,2")
    (d / "ckpt-5.index.tempstate3").write_bytes(b"t")
    with LocalDir(str(d)) as h:
        listing = scan(h)
    assert sorted(f.name for f in listing.temps) == ["ckpt-5.index.tempstate3", st.name]
    assert listing.temp_owner == {"ckpt-5.index.tempstate3": "ckpt-5", st.name: "ckpt-5"}
    assert "model_temp-3" in listing.complete


def test_a_temporary_belongs_to_a_checkpoint_prefix_of_the_directory():
    bases = {"ckpt-4", "ckpt-6", "model", "m_temp-2"}
    assert L.prefix_of_dir("ckpt-4", bases) and L.prefix_of_dir("ckpt-7", bases)  # a step of the run
    assert L.prefix_of_dir("model", bases) and L.prefix_of_dir("m_temp-9", bases)
    for p in ("other", "ckpt", "model-1", "ckp-4", "-4", "ckpt-4x"):
        assert not L.prefix_of_dir(p, bases), p
