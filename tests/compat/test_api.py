"""The library users reach for: ckptool.open as a mapping, the lazy names, and the
operations as functions (their docstring examples run here, in order, on a copy of the
bundled example)."""

import doctest
import pathlib
import shutil

import numpy as np
import pytest

import ckptool
import ckptool.api

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "keras_adam"
KERAS = pathlib.Path(__file__).resolve().parents[1] / "data" / "keras3" / "sequential"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    shutil.copytree(EXAMPLE, tmp_path / "runs")
    shutil.copytree(KERAS, tmp_path / "keras")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "runs"


def test_the_docstring_examples_run(runs):
    finder = doctest.DocTestFinder()
    tests = [t for t in finder.find(ckptool.api, globs={"ckptool": ckptool}) if t.examples]
    assert [t.name.rsplit(".", 1)[-1] for t in tests] == ["average", "convert", "prune", "rewrite_names", "save",
                                                          "verify"]
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0 and runner.tries >= 9


def test_a_checkpoint_is_a_mapping_of_names_to_values(runs):
    with ckptool.open("runs/") as ckpt:
        names = ckpt.names()
        assert list(ckpt) == names and len(ckpt) == len(names) == 16
        name = "save_counter/.ATTRIBUTES/VARIABLE_VALUE"
        assert name in ckpt and "nope" not in ckpt
        assert ckpt[name] == ckpt.get_tensor(name) == ckpt.read(name) == np.int64(5)
        with pytest.raises(KeyError):
            ckpt["nope"]
        with pytest.raises(ckptool.TensorNotFoundError):
            ckpt.get_tensor("nope")


def test_lazy_names_are_listed_and_typed():
    names = dir(ckptool)
    for name in ("open", "write", "Checkpoint", "verify", "prune", "convert", "rewrite_names", "average", "save",
                 "UsageError", "CkptError"):
        assert name in names and name in ckptool.__all__
        assert getattr(ckptool, name) is not None
    assert issubclass(ckptool.UsageError, ckptool.CkptError)
    assert (pathlib.Path(ckptool.__file__).parent / "py.typed").is_file()
    with pytest.raises(AttributeError):
        ckptool.nope  # noqa: B018


def test_operations_refuse_bad_input_with_ckpt_errors(runs):
    with pytest.raises(ckptool.CkptError):
        ckptool.verify("runs/nope")
    with pytest.raises(ckptool.UsageError):
        ckptool.rewrite_names("runs/ckpt-5", "x/ckpt", {"re:(": "y"})
    with pytest.raises(ckptool.CkptError):
        ckptool.average("runs/", "avg/ckpt", last=9)


def _h5_values(path) -> dict:
    with ckptool.open(str(path)) as ck:
        return {n: ck.read(n) for n in ck.names()}


def test_convert_does_the_keras3_bridge_as_the_command_does(runs, tmp_path):
    from clirun import completed

    res = ckptool.convert("keras/tf/ckpt", "api.weights.h5", template="keras/template.weights.h5")
    assert res.format == "keras-weights" and res.filled == 14 and not res.kept and not res.unused
    assert completed("convert", "keras/tf/ckpt", "cli.weights.h5", "--template", "keras/template.weights.h5",
                     "--no-sync").returncode == 0
    api, cli = _h5_values(tmp_path / "api.weights.h5"), _h5_values(tmp_path / "cli.weights.h5")
    assert sorted(api) == sorted(cli)
    for n in api:
        np.testing.assert_array_equal(api[n], cli[n])
    assert res.to_json()["tensors"] == 14
    # and back: the Keras 3 file to a TF checkpoint shaped like the old one, values kept
    back = ckptool.convert("api.weights.h5", "back/ckpt", template="keras/tf/ckpt")
    assert back.format == "tf" and back.filled == 14
    with ckptool.open("keras/tf/ckpt") as a, ckptool.open("back/ckpt") as b:
        for n in a.names():
            if n != "_CHECKPOINTABLE_OBJECT_GRAPH":
                np.testing.assert_array_equal(a.read(n), b.read(n))


def test_convert_bridge_dry_run_writes_nothing(runs, tmp_path):
    res = ckptool.convert("keras/tf/ckpt", "new.weights.h5", template="keras/template.weights.h5", dry_run=True)
    assert res.dry_run and res.filled == 14 and not (tmp_path / "new.weights.h5").exists()


def test_convert_bridge_allow_missing_and_allow_unused_pass_through(runs, tmp_path):
    with ckptool.open("keras/tf/ckpt") as ck:
        first = sorted(n for n in ck.names() if n.startswith("layer_with_weights-0/bias"))[0]
    ckptool.rewrite_names("keras/tf/ckpt", "less/ckpt", drop=[first])
    with pytest.raises(ckptool.CkptError):
        ckptool.convert("less/ckpt", "a.weights.h5", template="keras/template.weights.h5")
    assert not (tmp_path / "a.weights.h5").exists()
    res = ckptool.convert("less/ckpt", "a.weights.h5", template="keras/template.weights.h5", allow_missing=True)
    assert len(res.kept) == 1 and res.filled == 13
    # the way back: the Keras 3 file's extra variable has no place in the smaller TF template
    with pytest.raises(ckptool.CkptError):
        ckptool.convert(str(tmp_path / "a.weights.h5"), "b/ckpt", template="less/ckpt")
    res = ckptool.convert(str(tmp_path / "a.weights.h5"), "b/ckpt", template="less/ckpt", allow_unused=True)
    assert len(res.unused) == 1


def test_convert_refuses_options_that_do_not_go_with_the_bridge(runs):
    with pytest.raises(ckptool.UsageError, match="match= does not go with a Keras 3 conversion"):
        ckptool.convert("keras/tf/ckpt", "x.weights.h5", template="keras/template.weights.h5", match=["x"])
    with pytest.raises(ckptool.UsageError, match="go with template="):
        ckptool.convert("runs/ckpt-5", "x.npz", allow_missing=True)
    with pytest.raises(ckptool.UsageError, match="without --template"):
        ckptool.convert("runs/ckpt-5", "x.weights.h5")
