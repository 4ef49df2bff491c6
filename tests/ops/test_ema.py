"""`convert --ema` (issue 43): the moving averages TF1, tf_keras and Keras 3 wrote
(tests/data/ema/, tests/tf_fixtures/generate_ema.py) exported under the variables' own names,
equal to the shadows' values TF held; pairing rules on made-up layouts."""

import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.ops.read.ema import TF1, TF_KERAS, plan_ema, tf1_plan
from ckptool.ops.transform.convert.run import convert
from clirun import run  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "ema")


def expected(prefix):
    with np.load(os.path.join(DATA, "expected.npz")) as z:
        return {k[len(prefix) + 1:]: z[k] for k in z.files if k.startswith(prefix + "/")}


def read_all(path):
    with ckptool.open(path) as ck:
        return {v.name: ck.read(v.name) for v in ck.variables()}


def test_tf1_shadows_are_written_under_the_variables_names(tmp_path):
    r = convert(os.path.join(DATA, "tf1", "model.ckpt"), str(tmp_path / "out"), ema=True)
    out = read_all(str(tmp_path / "out"))
    want = expected("tf1")
    assert set(want) == {"d1/kernel", "d1/bias", "d2/kernel", "d2/bias", "emb"}
    for name, value in want.items():
        assert np.array_equal(out[name], value), name
        assert np.array_equal(out[name + "/ExponentialMovingAverage"], value)  # the averages stay
    assert r.ema["kind"] == TF1 and r.ema["averaged"] == 5 and r.ema["without_average"] == 0
    assert "d1/kernel/Adam" in out and "global_step" in out
    convert(os.path.join(DATA, "tf1", "model.ckpt"), str(tmp_path / "s.safetensors"), ema=True, strip_optimizer=True)
    from safetensors.numpy import load_file

    slim = load_file(str(tmp_path / "s.safetensors"))
    assert sorted(slim) == sorted(want) + ["global_step"]
    assert all(np.array_equal(slim[n], v) for n, v in want.items())


def test_tf_keras_use_ema_by_position_in_both_layouts(tmp_path):
    want = expected("tf_keras")
    for src, prefix in (("tf_keras/ckpt", ""), ("tf_keras_ckpt/ckpt-1", "model/")):
        dst = str(tmp_path / src.replace("/", "_"))
        r = convert(os.path.join(DATA, src), dst, ema=True)
        out = read_all(dst)
        keys = [f"{prefix}layer_with_weights-{i}/{a}/.ATTRIBUTES/VARIABLE_VALUE"
                for i, a in ((0, "kernel"), (0, "bias"), (1, "gamma"), (1, "beta"), (2, "kernel"), (2, "bias"))]
        for i, key in enumerate(keys):
            assert np.array_equal(out[key], want[str(i)]), (src, key)
        assert r.ema["kind"] == TF_KERAS and r.ema["averaged"] == 6
        assert [k.split("/")[-3] for k in r.ema["kept_without_average"]] == ["moving_mean", "moving_variance"]
        with ckptool.open(os.path.join(DATA, src)) as ck:
            mm = ck.read(f"{prefix}layer_with_weights-1/moving_mean/.ATTRIBUTES/VARIABLE_VALUE")
        assert np.array_equal(out[f"{prefix}layer_with_weights-1/moving_mean/.ATTRIBUTES/VARIABLE_VALUE"], mm)
    dst = str(tmp_path / "slim")
    convert(os.path.join(DATA, "tf_keras", "ckpt"), dst, ema=True, strip_optimizer=True)
    with ckptool.open(dst) as ck:
        names = [v.name for v in ck.variables()]
        assert not any(n.startswith("optimizer") for n in names) and len(names) == 9
        assert "optimizer" not in {c for c, _ in ck.object_graph().nodes[0].children}


def test_keras3_use_ema_from_the_keras_file(tmp_path):
    pytest.importorskip("h5py")
    want = expected("keras3")
    convert(os.path.join(DATA, "keras3.keras"), str(tmp_path / "k.npz"), ema=True)
    with np.load(tmp_path / "k.npz") as z:
        names = ["layers/dense/vars/0", "layers/dense/vars/1", "layers/batch_normalization/vars/0",
                 "layers/batch_normalization/vars/1", "layers/dense_1/vars/0", "layers/dense_1/vars/1"]
        for i, n in enumerate(names):
            assert np.array_equal(z[n], want[str(i)]), n


def test_no_averages_is_an_error_and_nothing_is_written(tmp_path, capsys):
    ckptool.write(str(tmp_path / "plain"), {"w": np.ones(3, np.float32), "w/Adam": np.zeros(3, np.float32)})
    code, out, err = run(capsys, "convert", tmp_path / "plain", tmp_path / "out", "--ema")
    assert code == 1 and "no moving averages found" in err and not os.path.exists(tmp_path / "out.index")
    code, out, err = run(capsys, "convert", tmp_path / "plain", tmp_path / "out", "--strip-optimizer", "--json")
    assert code == 0 and json.loads(out)["tensors"] == 1
    code, out, err = run(capsys, "convert", os.path.join(DATA, "tf_keras", "ckpt"), tmp_path / "e", "--ema")
    assert code == 0 and "6 variables written with their moving averages; 2 variables without one" in err
    code, out, err = run(capsys, "inspect", os.path.join(DATA, "tf1", "model.ckpt"), "--json")
    ema = json.loads(out)["ema"]
    assert ema["kind"] == TF1 and ema["pairs"]["emb"] == "emb/ExponentialMovingAverage"


def test_pairing_rules():
    f32 = "float32"
    t = [("a", f32, (2,)), ("a/ExponentialMovingAverage", f32, (2,)), ("b", f32, (3,)), ("c", f32, ())]
    plan = tf1_plan(t)
    assert plan.pairs == {"a": "a/ExponentialMovingAverage"} and plan.without == ["b", "c"]
    with pytest.raises(CkptError, match="a/ExponentialMovingAverage"):
        tf1_plan([("a", f32, (2,)), ("a/ExponentialMovingAverage", f32, (3,))])
    assert plan_ema([("a", f32, (2,))]) is None


def test_an_assignment_shapes_leave_open_is_refused():
    from ckptool.format.objgraph import VARIABLE_VALUE, Attribute, Node, ObjectGraph

    def var(i, key):
        return Node(i, attributes=[Attribute(VARIABLE_VALUE, key, key)])

    # model: two layers of variables x (3,), y (3,), z (3,); the optimizer averages two of them
    keys = [f"m/{n}/.ATTRIBUTES/VARIABLE_VALUE" for n in ("x", "y", "z")]
    avg = [f"optimizer/_variables/{i}/.ATTRIBUTES/VARIABLE_VALUE" for i in (1, 2)]
    nodes = [Node(0, children=[("m", 1), ("optimizer", 2)]), Node(1, children=[("x", 3), ("y", 4), ("z", 5)]),
             Node(2, children=[("_model_variables_moving_average", 6)]), var(3, keys[0]), var(4, keys[1]),
             var(5, keys[2]), Node(6, children=[("0", 7), ("1", 8)]), var(7, avg[0]), var(8, avg[1])]
    tensors = [(k, "float32", (3,)) for k in keys + avg]
    with pytest.raises(CkptError, match="more than one way"):
        plan_ema(tensors, ObjectGraph(nodes))
    # named non-trainable state settles it: z is a moving_mean
    nodes[1] = Node(1, children=[("x", 3), ("y", 4), ("moving_mean", 5)])
    assert plan_ema(tensors, ObjectGraph(nodes)).pairs == {keys[0]: avg[0], keys[1]: avg[1]}
