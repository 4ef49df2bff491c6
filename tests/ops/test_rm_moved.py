"""rm resolves a moved directory by the one rule (layout.checkpoints.resolve_recorded) every command
uses: a TF1 Saver directory whose state file holds absolute paths of its old place."""

import os
import shutil

import pytest

from ckptool.errors import RefusedError
from ckptool.io.control.state import CheckpointState, read_state, resolve, write_state
from ckptool.ops.retain.rm import rm
from clirun import run

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data")
OLD = "/tmp/ckptool-fixture-gen/tf1_saver"  # where the fixture was written


@pytest.fixture
def moved(tmp_path):
    d = tmp_path / "moved" / "saver"
    shutil.copytree(os.path.join(DATA, "tf1_saver"), d)
    assert not os.path.exists(OLD)
    st = read_state(str(d))
    assert st.model_checkpoint_path == f"{OLD}/model.ckpt-30"
    return d


def _stems(d):
    return sorted({n.split(".")[0] + "." + n.split(".")[1] for n in os.listdir(d) if n.startswith("model.ckpt-")})


def test_rm_in_a_moved_directory_updates_the_state_by_name(moved):
    res = rm([str(moved / "model.ckpt-10")])
    assert res.removed[0].in_state and not res.removed[0].latest
    assert _stems(moved) == ["model.ckpt-20", "model.ckpt-30"]
    st = read_state(str(moved))
    assert st.all_model_checkpoint_paths == ["model.ckpt-20", "model.ckpt-30"]
    assert st.model_checkpoint_path == "model.ckpt-30"
    for p in st.all_model_checkpoint_paths:  # as TF resolves them: every entry exists
        assert os.path.isfile(resolve(str(moved), p) + ".index")


def test_the_moved_latest_is_the_latest(moved, capsys):
    with pytest.raises(RefusedError, match="latest"):
        rm([str(moved / "model.ckpt-30")])
    code, out, err = run(capsys, "rm", moved / "model.ckpt-30")
    assert code == 1 and err.startswith("ckptool: error:") and "--force" in err
    assert _stems(moved) == ["model.ckpt-10", "model.ckpt-20", "model.ckpt-30"]
    res = rm([str(moved)], force=True)  # the directory form: its (moved) latest
    assert [os.path.basename(r.checkpoint) for r in res.removed] == ["model.ckpt-30"] and res.removed[0].latest
    st = read_state(str(moved))
    assert st.model_checkpoint_path == "model.ckpt-20"
    assert st.all_model_checkpoint_paths == ["model.ckpt-10", "model.ckpt-20"]


def test_an_absolute_path_of_another_directory_names_the_checkpoint_of_that_name_here(tmp_path, moved):
    """Issue 27 (copied run): when DIR holds a checkpoint of the recorded name, that one is
    meant, even though the recorded absolute path still exists elsewhere; the other
    directory's files are never touched."""
    other = tmp_path / "other"
    shutil.copytree(moved, other)
    st = read_state(str(moved))
    write_state(str(moved), CheckpointState(
        str(moved / "model.ckpt-30"), [str(other / "model.ckpt-10"), str(moved / "model.ckpt-20"),
                                       str(moved / "model.ckpt-30")],
        st.all_model_checkpoint_timestamps, 0.0))
    res = rm([str(moved / "model.ckpt-10")])
    assert res.removed[0].in_state  # the entry's name is a checkpoint here: this one
    st = read_state(str(moved))
    assert "model.ckpt-10" not in [os.path.basename(p) for p in st.all_model_checkpoint_paths]
    assert os.path.isfile(other / "model.ckpt-10.index")
