"""Issue 27, the temporary-file rule through the commands: prune --clean-temp deletes exactly
the genuine temporaries; --recursive and du enter directories whose names hold _temp or .tmp;
a checkpoint named model_temp is an ordinary checkpoint."""

import json
import os

import numpy as np

import ckptool
from ckptool.ops.retain import fleet as F
from ckptool.ops.retain import prune as P
from clirun import run

T0 = 1_700_000_000.0
OLD = T0 - 7200


def make(d, steps, name="ckpt"):
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"{name}-{s}"), {"w": np.full(4, s, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"{name}-{s}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
    return d


def age(p):
    os.utime(p, (OLD, OLD))


def tree(d):
    return sorted(os.path.relpath(os.path.join(r, n), d) for r, ds, fs in os.walk(d) for n in ds + fs)


def test_clean_temp_deletes_exactly_the_genuine_temporaries(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3])
    keep = []
    for name in ("softmax_temp_0.5", "prompt_templates", "ckpt-9_temp_notes"):
        (d / name).mkdir()
        (d / name / "part-00000-of-00001.index").write_bytes(b"x")
        keep.append(name)
    for name in ("hparams.tmpl", "notes.tmp", "ckpt-1.index.bak", "ckpt-1.tempstate7", "eval.tmp0abc"):
        (d / name).write_text("user data")
        keep.append(name)
    spark = d / "eval_temp"
    spark.mkdir()
    (spark / "part-00000.csv").write_text("1,2")
    keep.append("eval_temp")
    gone = ["ckpt-4.index.tempstate123", "ckpt-4.data-00000-of-00001.tempstate9", "checkpoint.tmp0123abcd"]
    for name in gone:
        (d / name).write_bytes(b"t" * 10)
    staging = d / ("ckpt-4_temp_" + "ab" * 16)
    staging.mkdir()
    (staging / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"z" * 100)
    gone.append(staging.name)
    for p in d.rglob("*"):
        age(p)
    r = P.prune(str(d), max_to_keep=10, clean_temp=True, now=T0 + 100)
    assert sorted(os.path.basename(p) for p in r.temp_deleted) == sorted(gone)
    left = set(os.listdir(d))
    assert set(keep) <= left and not (set(gone) & left)


def test_a_checkpoint_named_model_temp_is_ordinary(tmp_path):
    d = make(tmp_path / "run", [1, 2, 3], name="model_temp")
    for p in d.iterdir():
        age(p)
    r = P.prune(str(d), max_to_keep=2, clean_temp=True, now=T0 + 100)
    assert r.temp_deleted == [] and [os.path.basename(p) for p in r.deleted] == ["model_temp-1"]
    assert sorted(n for n in os.listdir(d) if n.endswith(".index")) == ["model_temp-2.index", "model_temp-3.index"]


def test_recursive_and_du_enter_temp_looking_directories(tmp_path, capsys):
    root = tmp_path / "sweep"
    runs = [make(root / name, [1, 2, 3, 4]) for name in ("softmax_temp_0.5", "lr.tmp3", "x_temp")]
    found = F.find_runs(str(root))
    assert found == sorted(str(r) for r in runs)
    tree_ = F.prune_tree(str(root), max_to_keep=2, now=T0 + 100, clean_temp=True)
    for r in runs:
        assert str(r) in tree_.runs and sorted(n for n in os.listdir(r) if n.endswith(".index")) == [
            "ckpt-3.index", "ckpt-4.index"]
    code, out, err = run(capsys, "du", root, "--json")
    assert code == 0, err
    assert {row["directory"] for row in json.loads(out)["directories"]} == {str(r) for r in runs}
