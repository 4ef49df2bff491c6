"""Issue 27, paths by identity: absolute state paths (TF1 Saver's default), directories
reached through symlinks, and a copied run whose state file names the original's paths."""

import os
import shutil
import warnings

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptWarning, RefusedError
from ckptool.io.backends.local import LOCAL
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.io.layout import checkpoints as L
from ckptool.ops.retain import prune as P
from ckptool.ops.retain.rm import rm
from ckptool.ops.retain.state import relative_state
from clirun import run

T0 = 1_700_000_000.0


def make_abs(d, steps):
    """A run whose state file holds absolute paths, as TF1's Saver writes it."""
    d.mkdir(parents=True)
    for s in steps:
        ckptool.write(str(d / f"model.ckpt-{s}"), {"w": np.full(8, s, np.float32)}, sync=False)
    paths = [str(d / f"model.ckpt-{s}") for s in steps]
    write_state(str(d), CheckpointState(paths[-1], paths, [T0 + i for i in range(len(steps))], 0.0))
    return d


@pytest.fixture
def linked(tmp_path):
    real = make_abs(tmp_path / "real" / "run", [1, 2, 3, 4, 5])
    link = tmp_path / "link"
    os.symlink(tmp_path / "real", link)
    return real, link / "run"


def test_resolve_recorded_by_identity_through_a_symlink(linked):
    real, via = linked
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same directory: no moved/copied warning
        rec = L.resolve_recorded(LOCAL, str(via), str(real / "model.ckpt-5"))
    assert rec.base == "model.ckpt-5" and not rec.moved
    rec = L.resolve_recorded(LOCAL, str(real), str(via / "model.ckpt-2"), warn=False)
    assert rec.base == "model.ckpt-2" and not rec.moved
    assert L.resolve_recorded(LOCAL, str(real), "sub/../model.ckpt-3", warn=False).base == "model.ckpt-3"
    assert L.resolve_recorded(LOCAL, str(real), "../x/model.ckpt-3", warn=False).base is None


def test_rm_through_a_symlink_protects_the_latest(linked, capsys):
    real, via = linked
    with pytest.raises(RefusedError, match="latest"):
        rm([str(via / "model.ckpt-5")])
    code, out, err = run(capsys, "rm", via / "model.ckpt-5")
    assert code == 1 and "--force" in err
    assert (real / "model.ckpt-5.index").exists()
    rm([str(via / "model.ckpt-1")])
    st = read_state(str(real))
    assert [os.path.basename(p) for p in st.all_model_checkpoint_paths] == [f"model.ckpt-{s}" for s in (2, 3, 4, 5)]
    assert st.model_checkpoint_path == str(real / "model.ckpt-5")


def test_prune_through_a_symlink_prunes(linked):
    real, via = linked
    r = P.prune(str(via), max_to_keep=2, now=T0 + 100)
    assert [os.path.basename(p) for p in r.deleted] == ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
    assert sorted(n for n in os.listdir(real) if n.endswith(".index")) == ["model.ckpt-4.index", "model.ckpt-5.index"]
    assert os.path.basename(read_state(str(real)).model_checkpoint_path) == "model.ckpt-5"


@pytest.fixture
def copied(tmp_path):
    orig = make_abs(tmp_path / "orig", [1, 2, 3])
    copy = tmp_path / "copy"
    shutil.copytree(orig, copy)
    return orig, copy


def _damage(prefix):
    data = prefix.parent / (prefix.name + ".data-00000-of-00001")
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0xFF
    data.write_bytes(bytes(raw))


def test_a_copied_run_is_read_from_the_copy_with_one_warning(copied, capsys):
    orig, copy = copied
    _damage(copy / "model.ckpt-3")
    with pytest.warns(CkptWarning, match="another directory"):
        found = L.locate(str(copy))
    assert found.prefix == str(copy / "model.ckpt-3")
    code, out, err = run(capsys, "inspect", copy, "--verify")
    assert code == 1, (out, err)  # the copy's damage is seen
    assert sum("warning" in line for line in err.splitlines()) == 1
    code, out, err = run(capsys, "diff", copy, orig)
    assert code != 0 or "equal" not in out.lower(), (out, err)


def test_state_relative_fixes_a_copied_run(copied):
    orig, copy = copied
    new, changed = relative_state(str(copy))
    assert new.all_model_checkpoint_paths == ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
    assert new.model_checkpoint_path == "model.ckpt-3" and len(changed) == 3
    assert read_state(str(orig)).model_checkpoint_path == str(orig / "model.ckpt-3")  # the original is untouched


def test_prune_and_rm_of_a_copy_never_touch_the_original(copied):
    orig, copy = copied
    before = sorted(os.listdir(orig))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CkptWarning)
        P.prune(str(copy), max_to_keep=1, now=T0 + 100)
        assert sorted(n for n in os.listdir(copy) if n.endswith(".index")) == ["model.ckpt-3.index"]
        with pytest.raises(RefusedError, match="latest"):
            rm([str(copy / "model.ckpt-3")])
    assert sorted(os.listdir(orig)) == before
