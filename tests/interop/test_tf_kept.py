"""Kept means kept (issues 27, 36), with TensorFlow as the trainer and the judge.

- After each prune variant, TF's CheckpointManager resumes the directory and saves, and every
  checkpoint the prune kept survives the trainer's own sweep (in DIR or DIR/kept/).
- A trainer that is still running (a CheckpointManager saving in another process, deleting from
  the list it holds in memory) while prunes run with pins, keep-best and steps-every: every
  checkpoint a prune reported kept by one of those survives, and TF reads it from DIR/kept/
  (latest_checkpoint, load_checkpoint, restore).
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from ckptool.errors import RefusedError  # noqa: E402
from ckptool.io.control.state import read_state, write_state  # noqa: E402
from ckptool.ops.retain import prune as P  # noqa: E402
from ckptool.ops.retain.keep_best import BestSpec  # noqa: E402

T0 = 1_800_000_000.0
KEY = "v/.ATTRIBUTES/VARIABLE_VALUE"


def _train(d, steps, max_to_keep=None):
    v = tf.Variable(tf.zeros(2))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=max_to_keep)
    for s in steps:
        v.assign([float(s), 0.0])
        mgr.save(checkpoint_number=s)
    return v


def _indexes(d):
    if not os.path.isdir(d):
        return set()
    return {n[: -len(".index")] for n in os.listdir(d) if n.endswith(".index")}


VARIANTS = {
    "count": dict(max_to_keep=2),
    "pins": dict(max_to_keep=2, keep=("ckpt-3", "ckpt-5")),
    "steps-every": dict(max_to_keep=2, keep_steps_every=4),
    "every-n-hours": dict(max_to_keep=2, keep_every_n_hours=1.0, stamps=True),
    "keep-best": dict(max_to_keep=2, best="best"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_tf_resumes_after_prune_and_every_kept_checkpoint_survives(tmp_path, variant):
    d = str(tmp_path / "run")
    kept_dir = os.path.join(d, "kept")
    _train(d, range(1, 11))
    kwargs = dict(VARIANTS[variant])
    if kwargs.pop("best", None):
        with open(os.path.join(d, "m.jsonl"), "w") as f:
            for s in range(1, 11):
                f.write(json.dumps({"step": s, "loss": abs(s - 4) + 0.5}) + "\n")
        kwargs["best"] = BestSpec(2, "loss", "min", os.path.join(d, "m.jsonl"))
    if kwargs.pop("stamps", False):  # a history spread over hours (TF's clock is real here)
        st = read_state(d)
        st.all_model_checkpoint_timestamps = [T0 + 1800.0 * i for i in range(1, 11)]
        st.last_preserved_timestamp = T0
        write_state(d, st)
        r = P.prune(d, now=T0 + 1800.0 * 12, **kwargs)
    else:
        r = P.prune(d, scan=True, **kwargs)
    kept = _indexes(d) | _indexes(kept_dir)
    assert kept == {os.path.basename(p) for p in r.kept + r.preserved}
    assert r.deleted and len(kept) >= 2
    beyond = kept - {"ckpt-9", "ckpt-10"}  # those kept beyond the newest max_to_keep: moved into kept/
    assert beyond == _indexes(kept_dir) and not beyond & _indexes(d)
    # the trainer resumes: a new manager over the directory, with its own max_to_keep, saves twice
    v = tf.Variable(tf.zeros(2))
    ckpt = tf.train.Checkpoint(v=v)
    mgr = tf.train.CheckpointManager(ckpt, d, max_to_keep=2)
    assert mgr.latest_checkpoint == os.path.join(d, "ckpt-10")
    ckpt.restore(mgr.latest_checkpoint).assert_consumed()
    assert float(v.numpy()[0]) == 10.0
    mgr.save(checkpoint_number=11)
    mgr.save(checkpoint_number=12)
    assert beyond <= _indexes(kept_dir), (variant, sorted(kept))
    assert read_state(d).model_checkpoint_path.endswith("ckpt-12")
    for name in beyond:  # readable by TF, where they are now
        assert tf.train.load_checkpoint(os.path.join(kept_dir, name)).get_tensor(KEY)[0] == float(name[5:])
    if beyond:
        newest = max(beyond, key=lambda n: int(n[5:]))
        assert tf.train.latest_checkpoint(kept_dir) == os.path.join(kept_dir, newest)


TRAINER = textwrap.dedent("""
    import sys, time
    import tensorflow as tf
    d, n, keep = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    v = tf.Variable(tf.zeros(2))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=keep)
    for s in range(1, n + 1):
        v.assign([float(s), 0.0])
        mgr.save(checkpoint_number=s)
        time.sleep(0.15)
    print("trained", mgr.latest_checkpoint)
""")


def test_kept_survives_a_trainer_that_is_still_running(tmp_path):
    d = str(tmp_path / "run")
    kept_dir = os.path.join(d, "kept")
    os.makedirs(d)
    metrics = tmp_path / "m.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "loss": abs(s - 17) + 0.5}) + "\n" for s in range(1, 41)))
    with open(os.path.join(d, ".ckptool.toml"), "w") as f:  # the cron: a pin in the policy file
        f.write('keep = ["ckpt-3"]\nmax_to_keep = 2\nkeep_steps_every = 10\n')
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, d, "40", "3"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    promised: set[str] = set()  # what a prune reported kept by a lasting rule
    prunes = 0
    try:
        while trainer.poll() is None:
            if os.path.isfile(os.path.join(d, "checkpoint")):
                try:
                    r = P.prune(d, best=BestSpec(1, "loss", "min", str(metrics)), lock_timeout=5.0)
                except (RefusedError, FileNotFoundError) as exc:  # the trainer rewrote the state too often
                    print("prune refused:", exc)
                else:
                    prunes += 1
                    for path, why in r.reasons.items():
                        if {"pinned", "best", "steps-every"} & set(why):
                            promised.add(os.path.basename(path))
                    assert not r.damaged, r.damaged
            time.sleep(0.02)
    finally:
        out, err = trainer.communicate(timeout=120)
    assert trainer.returncode == 0, err[-2000:]  # TF's deletes by glob tolerate what prune moved
    assert prunes >= 5 and promised, (prunes, promised)
    P.prune(d, best=BestSpec(1, "loss", "min", str(metrics)))  # cron, after the run
    in_kept = _indexes(kept_dir)
    assert promised <= in_kept, (sorted(promised), sorted(in_kept))
    for name in promised:  # TF reads each from DIR/kept, as it was saved
        assert tf.train.load_checkpoint(os.path.join(kept_dir, name)).get_tensor(KEY)[0] == float(name[5:])
    newest = max(in_kept, key=lambda n: int(n[5:]))
    assert tf.train.latest_checkpoint(kept_dir) == os.path.join(kept_dir, newest)
    v = tf.Variable(tf.zeros(2))
    tf.train.Checkpoint(v=v).restore(tf.train.latest_checkpoint(kept_dir)).assert_consumed()
    assert float(v.numpy()[0]) == float(newest[5:])
    assert {"ckpt-3", "ckpt-10", "ckpt-20", "ckpt-30"} <= promised  # the pin, and steps-every
    # and the trainer's own directory is TF's as ever
    assert tf.train.latest_checkpoint(d) == os.path.join(d, "ckpt-40")
