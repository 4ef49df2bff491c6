"""Event files TensorFlow writes (TF1 FileWriter simple_value, TF2 tensor summaries) read without
TensorFlow as TF's summary_iterator reads them; ``rm`` leaves a state file TF reads; a
CheckpointManager run pruned with --keep-best restores in TF."""

import json
import os
import pathlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from ckptool.format.events import scalars
from ckptool.ops.retain import metrics as M
from ckptool.ops.retain.rm import rm


def _tf_rows(path):
    rows = []
    for e in tf.compat.v1.train.summary_iterator(path):
        for v in e.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                rows.append([v.tag, e.step, float(v.simple_value), e.wall_time])
            elif kind == "tensor":
                a = tf.make_ndarray(v.tensor)
                if a.size == 1 and (a.dtype.kind in "fiub" or a.dtype.name == "bfloat16"):
                    rows.append([v.tag, e.step, float(a.reshape(())), e.wall_time])
    return rows


def _event_files(d):
    return sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.startswith("events.out.tfevents."))


def _scalar_metadata():
    return tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))


def test_tf2_summaries_of_every_numeric_dtype(tmp_path):
    w = tf.summary.create_file_writer(str(tmp_path / "eval"))
    dtypes = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
              tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool]
    with w.as_default():
        for step in range(1, 6):
            for dt in dtypes:
                v = tf.cast(tf.constant(step * 1.25), dt) if dt != tf.bool else tf.constant(step % 2 == 0)
                tf.summary.write(f"m_{dt.name}", v, step=step, metadata=_scalar_metadata())
            tf.summary.write("vector", tf.constant([1.0, 2.0]), step=step)
            tf.summary.write("text", tf.constant("x"), step=step)
    w.close()
    for path in _event_files(tmp_path):
        found, problems = scalars(pathlib.Path(path).read_bytes(), path)
        assert problems == []
        assert [[s.tag, s.step, s.value, s.wall_time] for s in found] == _tf_rows(path)
    series = M.event_series(str(tmp_path))
    assert series["eval/m_float64"][3] == 3.75 and series["eval/m_int32"][4] == 5.0
    assert series["eval/m_bool"][2] == 1.0 and "eval/vector" not in series


def test_tf1_file_writer_and_summary_ops(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [])
        op = tf.compat.v1.summary.merge([tf.compat.v1.summary.scalar("loss", x),
                                         tf.compat.v1.summary.histogram("h", tf.stack([x, x]))])
        with tf.compat.v1.Session(graph=g) as sess:
            w = tf.compat.v1.summary.FileWriter(str(tmp_path), graph=g)
            for step in range(0, 50, 10):
                w.add_summary(sess.run(op, {x: 1.0 / (step + 1)}), step)
            w.close()
    (path,) = _event_files(tmp_path)
    found, problems = scalars(pathlib.Path(path).read_bytes(), path)
    assert problems == [] and len(found) == 5
    assert [[s.tag, s.step, s.value, s.wall_time] for s in found] == _tf_rows(path)


def _manager_run(d, steps, keep=10):
    v = tf.Variable(0.0)
    ckpt = tf.train.Checkpoint(v=v)
    mgr = tf.train.CheckpointManager(ckpt, str(d), max_to_keep=keep)
    for s in steps:
        v.assign(float(s))
        mgr.save(checkpoint_number=s)
    return ckpt, v


def test_rm_keeps_the_state_tf_readable(tmp_path):
    d = tmp_path / "run"
    _manager_run(d, [1, 2, 3, 4])
    rm([str(d / "ckpt-2")])
    st = tf.train.get_checkpoint_state(str(d))
    assert [os.path.basename(p) for p in st.all_model_checkpoint_paths] == ["ckpt-1", "ckpt-3", "ckpt-4"]
    assert len(st.all_model_checkpoint_timestamps) == 3
    rm([str(d)], force=True)
    assert tf.train.latest_checkpoint(str(d)) == str(d / "ckpt-3")
    v = tf.Variable(-1.0)
    tf.train.Checkpoint(v=v).restore(tf.train.latest_checkpoint(str(d))).assert_consumed()
    assert float(v.numpy()) == 3.0
    # TF's manager takes over where rm left off
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(d), max_to_keep=2)
    assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-1", "ckpt-3"]
    mgr.save(checkpoint_number=9)
    assert sorted(n[:-6] for n in os.listdir(d) if n.endswith(".index")) == ["ckpt-3", "ckpt-9"]
    rm([str(d / "ckpt-3"), str(d / "ckpt-9")], force=True)
    assert tf.train.get_checkpoint_state(str(d)) is None and tf.train.latest_checkpoint(str(d)) is None


def test_jsonl_beside_a_manager_run(tmp_path):
    d = tmp_path / "run"
    _manager_run(d, [10, 20, 30])
    p = d / "metrics.jsonl"
    p.write_text("".join(json.dumps({"step": s, "val_acc": a}) + "\n" for s, a in [(10, .5), (20, .9), (30, .7)]))
    got = M.best_pins(str(d), [(f"ckpt-{s}", s) for s in (10, 20, 30)],
                      __import__("ckptool.ops.retain.keep_best", fromlist=["BestSpec"]).BestSpec(1, "val_acc", "max", str(p)))
    assert got.pins == {"ckpt-20": 0.9}
    assert np.isfinite(list(got.pins.values())).all()


def test_save_counter_names_and_a_step_variable(tmp_path):
    """manager.save() numbers by save counter; tf.train.Checkpoint(step=...) holds the global
    step the evaluator logs at: best_pins matches by the step the checkpoint holds."""
    from ckptool.ops.retain.keep_best import BestSpec

    d = tmp_path / "run"
    step = tf.Variable(0, dtype=tf.int64)
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(step=step, w=tf.Variable(1.0)), str(d), max_to_keep=None)
    w = tf.summary.create_file_writer(str(d / "eval"))
    for s, loss in ((1000, 0.5), (2000, 0.2), (3000, 0.4)):
        step.assign(s)
        mgr.save()
        with w.as_default():
            tf.summary.write("loss", tf.constant(loss), step=s, metadata=_scalar_metadata())
    w.close()
    assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-1", "ckpt-2", "ckpt-3"]
    got = M.best_pins(str(d), [(f"ckpt-{n}", n) for n in (1, 2, 3)], BestSpec(1, "eval/loss"))
    assert list(got.pins) == ["ckpt-2"] and got.steps == {"ckpt-2": 2000} and got.none_count == 0


def test_checkpoint_manager_run_pruned_by_best_restores_in_tf(tmp_path):
    """A TF2 training loop: CheckpointManager saves, an evaluator writes tf.summary scalars to eval/;
    prune keeps the 2 newest and the 2 best by eval/loss; TF agrees on the state and restores each."""
    from ckptool.cli.main import main

    d = tmp_path / "run"
    v = tf.Variable(0.0)
    ckpt = tf.train.Checkpoint(v=v, step=tf.Variable(0, dtype=tf.int64))
    mgr = tf.train.CheckpointManager(ckpt, str(d), max_to_keep=None)
    w = tf.summary.create_file_writer(str(d / "eval"))
    losses = {100: 0.9, 200: 0.3, 300: 0.5, 400: 0.25, 500: 0.6, 600: 0.7, 700: 0.8}
    for step, loss in losses.items():
        v.assign(float(step))
        ckpt.step.assign(step)
        mgr.save(checkpoint_number=step)
        if step != 600:  # one checkpoint without an eval
            with w.as_default():
                tf.summary.write("loss", tf.constant(loss, tf.float32), step=step, metadata=_scalar_metadata())
    w.close()
    try:
        main(["prune", str(d), "--max-to-keep", "2", "--keep-best", "2", "--metric", "eval/loss"])
    except SystemExit as exc:
        assert exc.code in (0, None)
    st = tf.train.get_checkpoint_state(str(d))
    # issue 27, kept means kept: the best kept beyond max_to_keep leave the state's list (so the
    # trainer's next save cannot delete them), as TF's every-N-hours keeps do; issue 36: they move
    # into DIR/kept/, out of a running trainer's reach
    assert [os.path.basename(p) for p in st.all_model_checkpoint_paths] == ["ckpt-600", "ckpt-700"]
    assert os.path.basename(st.model_checkpoint_path) == "ckpt-700"
    assert sorted(n[:-6] for n in os.listdir(d) if n.endswith(".index")) == ["ckpt-600", "ckpt-700"]
    assert sorted(n[:-6] for n in os.listdir(d / "kept") if n.endswith(".index")) == ["ckpt-200", "ckpt-400"]
    for where, name in [("kept", "ckpt-200"), ("kept", "ckpt-400"), ("", "ckpt-600"), ("", "ckpt-700")]:
        v2 = tf.Variable(-1.0)
        tf.train.Checkpoint(v=v2, step=tf.Variable(0, dtype=tf.int64)).restore(str(d / where / name)).assert_consumed()
        assert float(v2.numpy()) == float(name.split("-")[1])
    mgr2 = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), str(d), max_to_keep=2)
    assert [os.path.basename(p) for p in mgr2.checkpoints] == ["ckpt-600", "ckpt-700"]
    mgr2.save(checkpoint_number=800)
    assert sorted(n[:-6] for n in os.listdir(d) if n.endswith(".index")) == ["ckpt-700", "ckpt-800"]
    assert sorted(n[:-6] for n in os.listdir(d / "kept") if n.endswith(".index")) == ["ckpt-200", "ckpt-400"]
