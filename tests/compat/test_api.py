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


@pytest.fixture
def runs(tmp_path, monkeypatch):
    shutil.copytree(EXAMPLE, tmp_path / "runs")
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
