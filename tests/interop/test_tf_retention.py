"""Retention parity with TensorFlow: the same histories of saves, run by tf.train.CheckpointManager
and by ckptool (``record_save`` after each write, then ``prune``), leave the same files and the same
state file. TF's clock is replaced by a fake one so both sides see identical timestamps."""

import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tensorflow.python.checkpoint import checkpoint_management as cm  # noqa: E402

import ckptool  # noqa: E402
from ckptool.ops.retain import fleet  # noqa: E402
from ckptool.ops.retain import prune as P

T0 = 1_800_000_000.0


class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def _files(d):
    """DIR's files; what ckptool keeps in DIR/kept/ (issue 36: out of a running trainer's reach, where TF
    leaves its every-N-hours keeps in DIR) counted as DIR's."""
    kept = os.path.join(d, "kept")
    extra = [n for n in os.listdir(kept) if n != "checkpoint" and not n.startswith(".ckptool")] \
        if os.path.isdir(kept) else []
    return sorted([n for n in os.listdir(d) if not n.startswith(".ckptool") and n != "kept"] + extra)


def _state_text(d):
    with open(os.path.join(d, "checkpoint")) as f:
        return f.read()


histories = st.fixed_dictionaries({
    "gaps": st.lists(st.sampled_from([0.0, 1.0, 600.0, 1800.0, 3599.0, 3600.0, 3601.0, 7200.0, 36000.0]),
                     min_size=1, max_size=12),
    "max_to_keep": st.sampled_from([None, 1, 2, 3, 5]),
    "hours": st.sampled_from([None, 0.5, 1.0, 2.0, 10.0]),
    "prune_max_to_keep": st.sampled_from([None, 1, 2, 4]),
    "prune_hours": st.sampled_from([None, 0.5, 1.0, 3.0]),
    "prune_gap": st.sampled_from([0.0, 60.0, 7200.0]),
})


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(h=histories)
def test_checkpoint_manager_histories_and_prune(tmp_path_factory, monkeypatch_session, h):
    base = tmp_path_factory.mktemp("hist")
    a, b = str(base / "tf"), str(base / "ck")
    os.makedirs(b)
    clock = Clock(T0)
    monkeypatch_session.setattr(cm.time, "time", clock)
    # ckptool has no manager object: a state file's first last_preserved_timestamp is the first
    # save's time minus 1 s, as TF's for a manager built just before its first save.
    v = tf.Variable(tf.zeros(2))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), a, max_to_keep=h["max_to_keep"],
                                     keep_checkpoint_every_n_hours=h["hours"])
    for i, gap in enumerate(h["gaps"], start=1):
        clock.t += gap if i > 1 else 0.0
        mgr.save(checkpoint_number=i)
        ckptool.write(os.path.join(b, f"ckpt-{i}"), {"v": np.zeros(2, np.float32)}, sync=False)
        P.record_save(b, os.path.join(b, f"ckpt-{i}"), max_to_keep=h["max_to_keep"],
                           keep_every_n_hours=h["hours"], now=clock.t)
        assert _files(a) == _files(b), (i, h)
        assert _state_text(a) == _state_text(b), (i, h)
    # An external prune: a new manager with another policy, swept once, as `ckptool prune` does.
    clock.t += h["prune_gap"]
    mgr2 = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), a, max_to_keep=h["prune_max_to_keep"],
                                      keep_checkpoint_every_n_hours=h["prune_hours"])
    mgr2._sweep()
    if mgr2._maybe_delete:
        mgr2._record_state()
    P.prune(b, max_to_keep=h["prune_max_to_keep"], keep_every_n_hours=h["prune_hours"], now=clock.t)
    assert _files(a) == _files(b), h
    assert _state_text(a) == _state_text(b), h


@pytest.fixture(scope="module")
def monkeypatch_session():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_prune_of_a_tf_manager_directory_then_tf_continues(tmp_path):
    """ckptool prune on a directory TF's CheckpointManager wrote; TF picks up the state it left."""
    d = str(tmp_path / "run")
    v = tf.Variable(tf.zeros(2))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=None)
    for _i in range(6):
        mgr.save()
    r = P.prune(d, max_to_keep=2)
    assert [os.path.basename(p) for p in r.kept] == ["ckpt-5", "ckpt-6"]
    assert [os.path.basename(p) for p in r.deleted] == [f"ckpt-{i}" for i in range(1, 5)]
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=2)
    assert [os.path.basename(p) for p in mgr.checkpoints] == ["ckpt-5", "ckpt-6"]
    mgr.save(checkpoint_number=7)
    assert sorted(n for n in os.listdir(d) if n.endswith(".index")) == ["ckpt-6.index", "ckpt-7.index"]


def test_prune_of_a_tf1_saver_directory_uses_mtimes(tmp_path):
    d = str(tmp_path / "tf1")
    os.makedirs(d)
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("w", shape=[2])
        saver = tf.compat.v1.train.Saver(max_to_keep=None)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            for step in range(1, 5):
                saver.save(s, os.path.join(d, "model"), global_step=step)
    # Saver(max_to_keep=None) lists only the latest; TF1 paths are absolute.
    assert tf.train.get_checkpoint_state(d).all_model_checkpoint_paths == [os.path.join(d, "model-4")]
    r = P.prune(d, max_to_keep=2, scan=True)
    assert [os.path.basename(p) for p in r.deleted] == ["model-1", "model-2"]
    assert _files(d) == sorted(["checkpoint"] + [f"model-{s}{x}" for s in (3, 4) for x in
                                                             (".index", ".data-00000-of-00001", ".meta")])
    assert tf.train.latest_checkpoint(d) == os.path.join(d, "model-4")


def test_recursive_prune_of_tf_manager_directories_matches_tf(tmp_path):
    """Several CheckpointManager directories under one root, pruned with `prune --recursive`,
    keep exactly the files a manager with the same policy keeps after its sweep."""
    root, ref = tmp_path / "runs", tmp_path / "ref"
    v = tf.Variable(tf.zeros(2))
    for i, (n, k) in enumerate([(6, 2), (3, 5), (8, 1), (4, 3)]):
        for base in (root, ref):
            d = str(base / f"run{i}" / ("train" if i % 2 else ""))
            mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=None)
            for s in range(1, n + 1):
                mgr.save(checkpoint_number=s)
        (root / f"run{i}" / ".ckptool.toml").write_text(f"max_to_keep = {k}\n")
        d = str(ref / f"run{i}" / ("train" if i % 2 else ""))
        mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=k)
        mgr._sweep()
        mgr._record_state()
    res = fleet.prune_tree(str(root))
    assert not res.errors and len(res.runs) == 4
    for i in range(4):
        sub = f"run{i}/" + ("train" if i % 2 else "")
        assert _files(root / sub) == _files(ref / sub)
        assert [x for x in _state_text(root / sub).splitlines() if "timestamp" not in x] == \
            [x for x in _state_text(ref / sub).splitlines() if "timestamp" not in x]
