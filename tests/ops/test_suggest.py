""""Did you mean" for every tensor name, in the API and every command (issue 32): one rule,
ckptool.ops.read.suggest, raised as TensorNotFoundError with .name and .suggestions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ckptool
from ckptool.ops.read.suggest import VALUE_SUFFIX, Suggester, did_you_mean
from clirun import completed

NAMES = ["save_counter/.ATTRIBUTES/VARIABLE_VALUE", "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE",
         "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE", "global_step", "dense/kernel", "_CHECKPOINTABLE_OBJECT_GRAPH"]


@pytest.mark.parametrize("typed, meant", [
    ("save_counter", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"),      # the plain name of an object-based key
    ("global_step/.ATTRIBUTES/VARIABLE_VALUE", "global_step"),        # and the other way round
    ("SAVE_COUNTER/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"),  # letter case
    ("bias", "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE"),          # the last parts of a name
    ("global_stpe", "global_step"),                                    # a typo
    ("save_counter/", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"),
])
def test_the_name_meant_comes_first(typed, meant):
    assert Suggester(NAMES).closest(typed)[0] == meant


def test_a_shared_last_part_suggests_each_bearer_shortest_first():
    assert Suggester(NAMES).closest("kernel") == ["dense/kernel", "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE"]
    assert did_you_mean("kernel", NAMES) == ("; did you mean 'dense/kernel' or "
                                             "'model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE'?")


def test_nothing_close_suggests_nothing():
    assert Suggester(NAMES).closest("zzz") == [] and did_you_mean("zzz", NAMES) == ""


@given(st.lists(st.text(min_size=1, max_size=12), max_size=20), st.text(max_size=12))
def test_suggestions_are_names_of_the_checkpoint(names, typed):
    got = Suggester(names).closest(typed)
    assert len(got) <= 3 and set(got) <= set(names)


@pytest.fixture
def keras_like(tmp_path):
    p = str(tmp_path / "ckpt-1")
    ckptool.write(p, {"save_counter/.ATTRIBUTES/VARIABLE_VALUE": np.int64(1),
                      "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE": np.zeros((2, 2), np.float32)}, sync=False)
    return p


def test_the_api_raises_with_the_suggestion(keras_like):
    with ckptool.open(keras_like) as ck:
        for call in (ck.read, ck.variable):
            with pytest.raises(ckptool.TensorNotFoundError) as info:
                call("save_counter")
            err = info.value
            assert isinstance(err, KeyError) and isinstance(err, ckptool.CkptError)
            assert err.name == "save_counter" and err.suggestions == ["save_counter" + VALUE_SUFFIX]
            assert str(err).endswith("did you mean 'save_counter/.ATTRIBUTES/VARIABLE_VALUE'?")


@pytest.mark.parametrize("argv", [
    ["inspect", "{p}", "--tensor", "save_counter"],
    ["inspect", "{p}", "--tensor", "save_counter", "--json"],
    ["inspect", "{p}", "--stats", "--tensor", "save_counter"],
    ["rewrite-names", "{p}", "{d}", "--rule", "save_counter=step"],
])
def test_every_tensor_name_argument_suggests(keras_like, tmp_path, argv):
    out = completed(*[a.format(p=keras_like, d=tmp_path / "out" / "c") for a in argv])
    assert out.returncode == 1, out.stderr
    assert "did you mean 'save_counter/.ATTRIBUTES/VARIABLE_VALUE'?" in out.stderr
    assert out.stderr.count("\n") == 1 and out.stdout == ""
