"""Kept means kept (issue 27): after each prune variant, TF's CheckpointManager resumes the
directory, saves, and every checkpoint the prune kept survives the trainer's own sweep."""

import json
import os

import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from ckptool.io.state import read_state, write_state  # noqa: E402
from ckptool.ops.retain import prune as P  # noqa: E402
from ckptool.ops.retain.keep_best import BestSpec  # noqa: E402

T0 = 1_800_000_000.0


def _train(d, steps, max_to_keep=None):
    v = tf.Variable(tf.zeros(2))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=max_to_keep)
    for s in steps:
        v.assign([float(s), 0.0])
        mgr.save(checkpoint_number=s)
    return v


def _indexes(d):
    return sorted(n[: -len(".index")] for n in os.listdir(d) if n.endswith(".index"))


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
    kept = set(_indexes(d))
    assert kept == {os.path.basename(p) for p in r.kept + r.preserved}
    assert r.deleted and len(kept) >= 2
    # the trainer resumes: a new manager over the directory, with its own max_to_keep, saves twice
    v = tf.Variable(tf.zeros(2))
    ckpt = tf.train.Checkpoint(v=v)
    mgr = tf.train.CheckpointManager(ckpt, d, max_to_keep=2)
    assert mgr.latest_checkpoint == os.path.join(d, "ckpt-10")
    ckpt.restore(mgr.latest_checkpoint).assert_consumed()
    assert float(v.numpy()[0]) == 10.0
    mgr.save(checkpoint_number=11)
    mgr.save(checkpoint_number=12)
    after = set(_indexes(d))
    beyond = kept - {"ckpt-9", "ckpt-10"}  # those kept beyond the newest max_to_keep
    assert beyond <= after, (variant, sorted(kept), sorted(after))
    st = read_state(d)
    assert st.model_checkpoint_path.endswith("ckpt-12")
    for name in beyond:  # readable by TF, as they were
        tf.train.load_checkpoint(os.path.join(d, name)).get_tensor("v/.ATTRIBUTES/VARIABLE_VALUE")
