"""Unit tests of the io rules that decide which files are a checkpoint's (ckptool.io.layout.checkpoints):
owns, file_role, temp_owner, checkpoint_files. What prune and rm delete rests on them."""

from __future__ import annotations

import pytest

from ckptool.io.backends.local import LocalStorage
from ckptool.io.layout.checkpoints import checkpoint_files, file_role, owns, temp_owner


@pytest.mark.parametrize("name", ["ckpt-1.index", "ckpt-1.data-00000-of-00001", "ckpt-1.data-00001-of-00002",
                                  "ckpt-1.meta"])
def test_owns_the_files_of_its_checkpoint(name):
    assert owns("ckpt-1", name)


@pytest.mark.parametrize("name", ["ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-10.meta", "ckpt-10",
                                  "ckpt-1.index.bak", "ckpt-1.notes.txt", "ckpt-1.index.tempstate123",
                                  "ckpt-1.data-00000-of-00001.tempstate9", "ckpt-1_temp", "ckpt-1x.index",
                                  "ckpt-.index", "xckpt-1.index", "ckpt-1.data-0-of-1", "checkpoint",
                                  "ckpt-1"])  # the V1 file ckpt-1 is one only when it parses: not by name
def test_owns_nothing_else(name):
    assert not owns("ckpt-1", name)


def test_a_v1_shard_belongs_to_its_spec_and_its_meta_to_the_base():
    spec = "model.ckpt-5-?????-of-00002"
    assert owns(spec, "model.ckpt-5-00000-of-00002") and owns(spec, "model.ckpt-5-00001-of-00002")
    assert not owns(spec, "model.ckpt-5-00000-of-00003") and not owns(spec, "model.ckpt-50-00000-of-00002")
    assert owns(spec, "model.ckpt-5.meta") and not owns(spec, "model.ckpt-50.meta")


def test_file_roles():
    assert file_role("a.index") == ("a", "index")
    assert file_role("a.data-00003-of-00010") == ("a", "data")
    assert file_role("a.meta") == ("a", "meta")
    assert file_role("m-00001-of-00004") == ("m-?????-of-00004", "v1")
    for name in (".index", ".meta", "a.index.tempstate1", "a.data-00000-of-00001.tempstate2", "a_temp", "a.txt",
                 "", "a.data-1-of-2", "checkpoint", "checkpoint.tmp0a1b", ".ckptool.lock"):
        assert file_role(name) is None


def test_temp_owner():
    assert temp_owner("ckpt-3.index.tempstate17") == "ckpt-3"
    assert temp_owner("ckpt-3.data-00000-of-00001.tempstate5") == "ckpt-3"
    assert temp_owner("ckpt-3_temp") == "ckpt-3"
    assert temp_owner("ckpt-3_temp_" + "0123abcd" * 4) == "ckpt-3"
    assert temp_owner("ckpt-3_temp_0123abcd") is None  # a staging directory's suffix is 32 hex digits
    assert temp_owner("ckpt-3.index") is None and temp_owner("ckpt-3") is None
    assert temp_owner("checkpoint.tmp0a1b") is None  # a state-file temporary is no checkpoint's
    assert temp_owner("_temp") is None


def test_checkpoint_files_names_exactly_the_checkpoints_files(tmp_path):
    names = ["ckpt-1.index", "ckpt-1.data-00000-of-00002", "ckpt-1.data-00001-of-00002", "ckpt-1.meta",
             "ckpt-10.index", "ckpt-10.data-00000-of-00001", "ckpt-1.index.bak", "ckpt-1.notes.txt",
             "ckpt-1.index.tempstate5", "ckpt-1x.index", "checkpoint"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "ckpt-1_temp").mkdir()
    got = checkpoint_files(LocalStorage(), str(tmp_path / "ckpt-1"))
    assert got == [str(tmp_path / n) for n in
                   ("ckpt-1.data-00000-of-00002", "ckpt-1.data-00001-of-00002", "ckpt-1.index", "ckpt-1.meta")]
    assert checkpoint_files(LocalStorage(), str(tmp_path / "ckpt-10")) == [
        str(tmp_path / "ckpt-10.data-00000-of-00001"), str(tmp_path / "ckpt-10.index")]
    assert checkpoint_files(LocalStorage(), str(tmp_path / "ckpt-2")) == []


def test_checkpoint_files_of_a_v1_checkpoint(tmp_path):
    for n in ("m.ckpt-5-00000-of-00002", "m.ckpt-5-00001-of-00002", "m.ckpt-5.meta", "m.ckpt-50-00000-of-00002"):
        (tmp_path / n).write_bytes(b"x")
    got = checkpoint_files(LocalStorage(), str(tmp_path / "m.ckpt-5-?????-of-00002"))
    assert got == [str(tmp_path / n) for n in ("m.ckpt-5-00000-of-00002", "m.ckpt-5-00001-of-00002",
                                               "m.ckpt-5.meta")]
