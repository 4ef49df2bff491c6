"""Trust, round four (issue 36), with TensorFlow as the trainer and the judge:

- a damaged latest (data file missing or truncated, index missing or garbled, as a crash of a
  trainer that does not fsync leaves it): prune keeps the newest intact checkpoint, which TF
  restores, names the damaged one and exits 1;
- TF1 Saver's every-N-hours with a fake clock is the oracle for a state file without timestamps
  (hours apart and seconds apart), and the timestamps ckptool writes back are TF's to read;
- a state file TF ignores (or whose latest it cannot find) is reported by verify, exit 1, exactly
  when TF's latest_checkpoint is None or raises.
"""

import json
import os
import shutil

import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

from tensorflow.python.training import saver as saver_mod  # noqa: E402

from ckptool.io.control.state import read_state  # noqa: E402
from ckptool.ops.retain import prune as P  # noqa: E402
from clirun import run  # noqa: E402

T0 = 1_800_000_000.0
KEY = "v/.ATTRIBUTES/VARIABLE_VALUE"


def _train(d, n, max_to_keep=None):
    v = tf.Variable(tf.zeros(256))
    mgr = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), d, max_to_keep=max_to_keep)
    for s in range(1, n + 1):
        v.assign(tf.fill([256], float(s)))
        mgr.save(checkpoint_number=s)


def _indexes(d):
    return sorted(n[:-6] for n in os.listdir(d) if n.endswith(".index"))


def _restores(prefix):
    v = tf.Variable(tf.zeros(256))
    tf.train.Checkpoint(v=v).restore(prefix).assert_existing_objects_matched()
    return float(v.numpy()[0])


DAMAGE = {
    "data-missing": lambda d: os.unlink(os.path.join(d, "ckpt-4.data-00000-of-00001")),
    "data-truncated": lambda d: os.truncate(os.path.join(d, "ckpt-4.data-00000-of-00001"), 100),
    "index-missing": lambda d: os.unlink(os.path.join(d, "ckpt-4.index")),
    "index-garbled": lambda d: open(os.path.join(d, "ckpt-4.index"), "r+b").write(b"\0" * 64),
}


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_latest_never_costs_the_last_intact_checkpoint(tmp_path, capsys, how):
    d = str(tmp_path / "run")
    _train(d, 4)
    DAMAGE[how](d)
    with pytest.raises((tf.errors.OpError, ValueError, IndexError, AssertionError)):  # TF cannot restore it
        _restores(os.path.join(d, "ckpt-4"))
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--json")
    assert code == 1, err
    doc = json.loads(out)
    assert "damaged" in err and os.path.join(d, "ckpt-4") in err and "ckpt-3" in err
    assert doc["preserved"] == [os.path.join(d, "ckpt-3")]
    assert doc["reasons"][os.path.join(d, "ckpt-3")] == ["last intact"]
    assert doc["deleted"] == [os.path.join(d, "ckpt-1"), os.path.join(d, "ckpt-2")]
    assert [x["path"] for x in doc["damaged"]] == [os.path.join(d, "ckpt-4")]
    assert _restores(os.path.join(d, "ckpt-3")) == 3.0  # TF, the judge
    # the next run says it again (cron mails it) and still deletes nothing intact
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1")
    assert code == 1 and "ckpt-3" in _indexes(d)
    # rm refuses the last intact one while the latest is damaged; --force on the damaged latest lets
    # TF find ckpt-3 as the latest again
    code, out, err = run(capsys, "rm", os.path.join(d, "ckpt-3"))
    assert code == 1 and "newest intact" in err
    if how != "index-missing":  # no CHECKPOINT argument names data files without their index
        code, out, err = run(capsys, "rm", "--force", os.path.join(d, "ckpt-4"))
        assert code == 0, err
        assert tf.train.latest_checkpoint(d) == os.path.join(d, "ckpt-3")


def test_verify_and_inspect_say_what_is_true_of_a_damaged_latest(tmp_path, capsys):
    d = str(tmp_path / "run")
    _train(d, 2)
    os.truncate(os.path.join(d, "ckpt-2.data-00000-of-00001"), 100)
    code, out, err = run(capsys, "inspect", os.path.join(d, "ckpt-2"))
    assert code == 0 and "warning" in err and "ckpt-2.data-00000-of-00001 is 100 bytes" in err
    code, out, err = run(capsys, "verify", os.path.join(d, "ckpt-9"))
    assert code == 1 and "MISSING" in out and "DAMAGED" not in out and "no such checkpoint" in err


# ---------------------------------------------------------------- TF1 Saver's every-N-hours


class Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def _tf1_histories(base, gaps, max_to_keep, hours, monkeypatch):
    """TF1 Saver(max_to_keep, hours) in ``a`` (the oracle) and a Saver that keeps everything in
    ``b``, at the same fake times; ``b``'s files get those times as mtimes (a real trainer's)."""
    a, b = os.path.join(base, "a"), os.path.join(base, "b")
    os.makedirs(a)
    os.makedirs(b)
    clock = Clock(T0)
    monkeypatch.setattr(saver_mod.time, "time", clock)
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("w", shape=[2])
        oracle = tf.compat.v1.train.Saver(max_to_keep=max_to_keep, keep_checkpoint_every_n_hours=hours)
        everything = tf.compat.v1.train.Saver(max_to_keep=1000)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            for i, g in enumerate(gaps, 1):
                clock.t += g
                oracle.save(s, os.path.join(a, "model"), global_step=i)
                everything.save(s, os.path.join(b, "model"), global_step=i)
                for f in os.listdir(b):
                    if f.startswith(f"model-{i}."):
                        os.utime(os.path.join(b, f), (clock.t, clock.t))
    monkeypatch.undo()
    return a, b, clock.t


HISTORIES = {
    "seconds apart": ([0.0] + [1.0] * 7, 2, 2.0),  # the issue's: TF1 keeps 7, 8 (not 1 too)
    "hours apart": ([0.0] + [3600.0] * 9, 2, 2.0),
    "half hours, 1 h": ([0.0] + [1800.0] * 12, 3, 1.0),
    "exactly on the keep time": ([0.0, 7200.0, 7200.0, 1.0, 7199.0, 7201.0], 1, 2.0),
    "mixed": ([0.0, 7200.0, 1.0, 7199.0, 7201.0, 3600.0, 3600.0, 10.0], 1, 2.0),
}


@pytest.mark.parametrize("name", sorted(HISTORIES))
def test_tf1_saver_every_n_hours_exactly(tmp_path, monkeypatch, name):
    gaps, k, hours = HISTORIES[name]
    a, b, now = _tf1_histories(str(tmp_path), gaps, k, hours, monkeypatch)
    assert not read_state(b).all_model_checkpoint_timestamps  # TF1 Saver writes none
    r = P.prune(b, max_to_keep=k, keep_every_n_hours=hours, now=now + 1)
    survivors = _indexes(b) + (_indexes(os.path.join(b, "kept")) if os.path.isdir(os.path.join(b, "kept")) else [])
    assert sorted(survivors) == _indexes(a), (name, r.to_json())
    # the times it used are written back, and TF reads them; the next run continues: nothing more goes
    st = tf.train.get_checkpoint_state(b)
    assert len(st.all_model_checkpoint_timestamps) == len(st.all_model_checkpoint_paths) == k
    assert tf.train.latest_checkpoint(b) == os.path.join(b, f"model-{len(gaps)}")
    again = P.prune(b, max_to_keep=k, keep_every_n_hours=hours, now=now + 2)
    assert not again.deleted and not again.preserved


# ---------------------------------------------------------------- a state file TF ignores


STATES = {
    "ok": None,
    "garbage": b"this is not a proto\n",
    "unknown field": b'model_checkpoint_path: "ckpt-2"\nfoo: 1\n',
    "byte order mark": '\ufeffmodel_checkpoint_path: "ckpt-2"\n'.encode(),
    "empty": b"",
    "no latest": b'all_model_checkpoint_paths: "ckpt-2"\n',
    "not utf-8": b'model_checkpoint_path: "ckpt-2\xff"\n',
    "a missing latest": b'model_checkpoint_path: "ckpt-9"\n',
    "another directory": b'model_checkpoint_path: "/nonexistent/run/ckpt-2"\n',
    "a field twice": b'model_checkpoint_path: "ckpt-1"\nmodel_checkpoint_path: "ckpt-2"\n',
    "a directory": "dir",
}


@pytest.mark.parametrize("name", sorted(STATES))
def test_verify_reports_a_state_file_exactly_when_tf_cannot_use_it(tmp_path, capsys, name):
    d = str(tmp_path / "run")
    _train(d, 2)
    content = STATES[name]
    path = os.path.join(d, "checkpoint")
    if content == "dir":
        os.unlink(path)
        os.mkdir(path)
    elif content is not None:
        with open(path, "wb") as f:
            f.write(content)
    try:
        tf_latest = tf.train.latest_checkpoint(d)
    except Exception:  # ValueError, UnicodeDecodeError: TF raises
        tf_latest = None
    code, out, err = run(capsys, "verify", d)
    if tf_latest is None:
        assert code == 1 and "STATE" in out and "TF cannot use the state file" in err, (name, out, err)
    else:
        assert code == 0 and "STATE" not in out, (name, out, err)
    if name == "ok":
        assert tf_latest == os.path.join(d, "ckpt-2")
    shutil.rmtree(d)


# ---------------------------------------------------------------- a TF1 Saver still saving (issue 49, item 2)


def _bases(d):
    """The complete checkpoints of ``d`` and of ``d/kept`` (what survives, wherever prune put it)."""
    kept = os.path.join(d, "kept")
    return sorted(_indexes(d) + (_indexes(kept) if os.path.isdir(kept) else []))


@pytest.mark.parametrize("every,trainer_keeps,cli", [(1, 100, False), (3, 100, False), (1, None, True)],
                         ids=["every save", "every third save", "Saver(max_to_keep=None), prune --scan by the CLI"])
def test_a_live_tf1_saver_and_a_cron_prune_keep_what_tf_keeps(tmp_path, capsys, every, trainer_keeps, cli):
    """A TF1 graph-mode Saver saving every second (keeping everything: max_to_keep=100), pruned by
    ckptool between saves (after every save, or every third) with max_to_keep K and every N
    seconds; the oracle is a second live Saver(max_to_keep=K, keep_checkpoint_every_n_hours=N)
    saving the same steps at the same moments (a Saver(max_to_keep=None) lists only its latest:
    ``prune --scan``). The Saver rewrites its state file, without
    timestamps, at every save: the clock must be carried across runs (DIR/kept/), or nothing is
    ever preserved. Saves are placed a quarter second off every keep time, so that the small gap
    between the Saver's start and its first checkpoint (ckptool's start of the clock) decides
    nothing."""
    import time

    k, n_sec, saves = 2, 3.5, 16
    hours = n_sec / 3600
    trainer, oracle_dir = str(tmp_path / "trainer"), str(tmp_path / "oracle")

    def prune():
        if not cli:
            P.prune(trainer, max_to_keep=k, keep_every_n_hours=hours)
            return
        code, out, err = run(capsys, "prune", trainer, "--scan", "--max-to-keep", str(k), "--keep-every-n-hours",
                             repr(hours))
        assert code == 0, err

    with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("w", shape=[64], initializer=tf.compat.v1.zeros_initializer())
        step = tf.compat.v1.placeholder(tf.float32, [])
        assign = v.assign(tf.fill([64], step))
        oracle = tf.compat.v1.train.Saver(max_to_keep=k, keep_checkpoint_every_n_hours=hours)
        live = tf.compat.v1.train.Saver(max_to_keep=trainer_keeps)
        t0 = time.time()  # both Savers' start (TF's next keep time is t0 + N)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            for i in range(saves):
                if i:
                    time.sleep(max(0.0, t0 + i + 0.25 - time.time()))  # i + 0.25 s: never near t0 + j*N
                    # a save later than its slot by 0.25 s could fall just after a keep time, where
                    # TF (its start) and ckptool (its first checkpoint) may differ: the timing is checked
                    assert time.time() - (t0 + i + 0.25) < 0.15, "the machine is too slow for this timing"
                s.run(assign, {step: float(i)})
                oracle.save(s, os.path.join(oracle_dir, "model"), global_step=i)
                live.save(s, os.path.join(trainer, "model"), global_step=i)
                if i % every == every - 1:
                    prune()
    prune()
    want = _indexes(oracle_dir)
    assert len(want) > k + 2  # TF preserved some (4, 7, 11)
    assert _bases(trainer) == want
    for base in want:  # each one TF restores, with its own values
        where = trainer if os.path.exists(os.path.join(trainer, base + ".index")) else os.path.join(trainer, "kept")
        assert float(tf.train.load_variable(os.path.join(where, base), "w")[0]) == float(base.split("-")[1])
