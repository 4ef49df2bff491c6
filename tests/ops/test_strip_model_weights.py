"""--strip-optimizer on a Keras 3 checkpoint keeps exactly the model's weights.

TF keys each variable by its first path breadth first; with
``tf.train.Checkpoint(model=model, optimizer=opt)`` a Keras 3 model's weights are
first reached through ``optimizer/_trainable_variables/N`` (examples/keras_adam).
They are the model's weights, not optimizer state: with the object graph they are
re-keyed to the key TF itself writes for the model alone (checked against TF in
tests/interop/test_tf_rename.py), by name alone they are kept as they are."""

import json
import pathlib
import shutil

import numpy as np
import pytest

import ckptool
from ckptool.format.slots import is_optimizer_name, optimizer_keys
from clirun import run as run_cli

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "keras_adam"
VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
# what tf.train.Checkpoint(model=model).write() keys this model's weights as (TF 2.21, Keras 3)
TF_MODEL_KEYS = {f"optimizer/_trainable_variables/{i}{VALUE}": f"model/_functional/_operations/{layer}/{w}{VALUE}"
                 for i, (layer, w) in enumerate([(1, "_kernel"), (1, "bias"), (2, "_kernel"), (2, "bias")])}


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "runs")
    return tmp_path / "runs"


def _values(prefix) -> dict:
    with ckptool.open(str(prefix)) as ck:
        return {n: ck.read(n) for n in ck.names() if n != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def test_the_table_says_keras_model_weights_are_not_optimizer_state():
    assert not is_optimizer_name(f"optimizer/_trainable_variables/0{VALUE}")
    assert is_optimizer_name(f"optimizer/_variables/2{VALUE}")
    assert is_optimizer_name(f"optimizer/_iterations{VALUE}")
    assert is_optimizer_name(f"model/dense/kernel/.OPTIMIZER_SLOT/optimizer/m{VALUE}")
    assert is_optimizer_name("dense/kernel/Adam_1") and not is_optimizer_name("global_step")


def test_strip_dry_run_lists_the_model_weights_as_kept_and_rekeyed(capsys, runs, tmp_path):
    code, out, err = run_cli(capsys, "rewrite-names", runs / "ckpt-5", tmp_path / "small" / "ckpt-5",
                             "--strip-optimizer", "--dry-run")
    assert code == 0, err
    lines = out.splitlines()
    for old, new in TF_MODEL_KEYS.items():
        line = next(ln for ln in lines if ln.startswith(old))
        assert new in line and "(kept; re-keyed" in line
    assert not any("_trainable_variables" in ln and "(dropped)" in ln for ln in lines)
    assert not (tmp_path / "small").exists()
    code, out, _ = run_cli(capsys, "rewrite-names", runs / "ckpt-5", tmp_path / "small" / "ckpt-5",
                           "--strip-optimizer", "--dry-run", "--json")
    assert sorted(json.loads(out)["rekeyed"]) == sorted(TF_MODEL_KEYS)


def test_stripped_checkpoint_holds_exactly_the_model_weights(capsys, runs, tmp_path):
    src = _values(runs / "ckpt-5")
    code, _, err = run_cli(capsys, "rewrite-names", runs / "ckpt-5", tmp_path / "small" / "ckpt-5",
                           "--strip-optimizer")
    assert code == 0, err
    got = _values(tmp_path / "small" / "ckpt-5")
    assert set(got) == set(TF_MODEL_KEYS.values()) | {f"save_counter{VALUE}"}
    for old, new in TF_MODEL_KEYS.items():
        np.testing.assert_array_equal(got[new], src[old])
    with ckptool.open(str(tmp_path / "small" / "ckpt-5")) as ck:  # the graph names exactly these keys
        graph = ck.object_graph()
        keys = {a.checkpoint_key for n in graph.nodes for a in n.attributes}
        assert keys == set(got) and not any(n.slot_variables for n in graph.nodes)


def test_by_name_alone_the_model_weights_are_kept_as_they_are(capsys, runs, tmp_path):
    nog = tmp_path / "nog" / "ckpt-5"
    assert run_cli(capsys, "convert", runs / "ckpt-5", nog, "--exclude", "_CHECKPOINTABLE_OBJECT_GRAPH")[0] == 0
    src = _values(nog)
    code, out, err = run_cli(capsys, "rewrite-names", nog, tmp_path / "small" / "ckpt-5", "--strip-optimizer",
                             "--json")
    assert code == 0, err
    got = _values(tmp_path / "small" / "ckpt-5")
    assert set(got) == set(TF_MODEL_KEYS) | {f"save_counter{VALUE}"}  # left alone, not dropped
    for k in got:
        np.testing.assert_array_equal(got[k], src[k])
    assert optimizer_keys(list(src)) == set(src) - set(TF_MODEL_KEYS) - {f"save_counter{VALUE}"}
    code, out, err = run_cli(capsys, "convert", nog, tmp_path / "s.safetensors", "--names", "short", "--json")
    assert code == 0, err
    assert json.loads(out)["tensors"] == 5  # --names short leaves out optimizer state: the 4 weights stay
