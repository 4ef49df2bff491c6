"""`prune --keep-best`: the N best by a metric kept beside the retention policy (event files or
JSON Lines, .ckptool.toml, --recursive, --dry-run/--json), and the property that keep-best never
deletes one of the N best nor one of the max_to_keep newest."""

import json
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import MissingError
from ckptool.format.events import encode_record
from ckptool.format.protos.event_pb2 import Event
from ckptool.io.control.state import CheckpointState, read_state, write_state
from ckptool.ops.retain import prune as manage
from ckptool.ops.retain.keep_best import BestSpec
from clirun import run

T0 = 1_700_000_000.0


def make(d, steps, gap=60.0):
    os.makedirs(d, exist_ok=True)
    for s in steps:
        ckptool.write(os.path.join(d, f"ckpt-{s}"), {"w": np.full(2, s, np.float32)}, sync=False)
    paths = [f"ckpt-{s}" for s in steps]
    write_state(str(d), CheckpointState(paths[-1], paths, [T0 + i * gap for i in range(len(steps))], T0 - 1))
    return d


def events(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    out = b""
    for i, (tag, step, value) in enumerate(rows):
        e = Event(step=step, wall_time=T0 + i)
        e.summary.value.add(tag=tag, simple_value=value)
        out += encode_record(e.SerializeToString())
    with open(path, "wb") as f:
        f.write(out)


def indexes(d):
    """The checkpoints that survive, in DIR or in DIR/kept/ (where prune moves what it keeps beyond
    the newest max_to_keep, out of a running trainer's reach)."""
    names = set(n[:-6] for n in os.listdir(d) if n.endswith(".index"))
    if os.path.isdir(os.path.join(d, "kept")):
        names |= set(n[:-6] for n in os.listdir(os.path.join(d, "kept")) if n.endswith(".index"))
    return sorted(names, key=lambda n: int(n.split("-")[1]))


LOSS = {1: 0.9, 2: 0.2, 3: 0.5, 4: 0.2, 5: 0.8, 6: 0.7, 7: 0.6, 8: 0.95}


def run_dir(tmp_path):
    d = str(tmp_path / "run")
    make(d, range(1, 9))
    events(os.path.join(d, "eval", "events.out.tfevents.1.host"), [("loss", s, v) for s, v in LOSS.items() if s != 5])
    return d


def test_keeps_the_newest_plus_the_best(tmp_path):
    d = run_dir(tmp_path)
    r = manage.prune(d, max_to_keep=2, best=BestSpec(2, "eval/loss", "min"), now=T0 + 3600)
    # 0.2 at 2 and at 4 (tie: both kept, the newer first), then the 2 newest
    assert indexes(d) == ["ckpt-2", "ckpt-4", "ckpt-7", "ckpt-8"]
    st = read_state(d)
    # issue 27, kept means kept: the best kept beyond max_to_keep leave the state's list (TF's next
    # CheckpointManager.save would delete them otherwise); issue 36: and move into DIR/kept/ (a running
    # trainer deletes from the list it holds in memory)
    assert st.all_model_checkpoint_paths == ["ckpt-7", "ckpt-8"]
    assert st.model_checkpoint_path == "ckpt-8"
    assert r.reasons[os.path.join(d, "kept", "ckpt-2")] == ["best"]
    assert read_state(os.path.join(d, "kept")).all_model_checkpoint_paths == ["ckpt-2", "ckpt-4"]
    assert r.best["best"] == [{"checkpoint": "ckpt-4", "step": 4, "value": pytest.approx(0.2)},
                              {"checkpoint": "ckpt-2", "step": 2, "value": pytest.approx(0.2)}]
    assert r.best["without_value"] == 1 and r.best["series"] == "eval/loss"


def test_ties_go_to_the_newer(tmp_path):
    d = run_dir(tmp_path)
    manage.prune(d, max_to_keep=1, best=BestSpec(1, "loss", "min"), now=T0 + 3600)
    assert indexes(d) == ["ckpt-4", "ckpt-8"]


def test_best_that_is_also_newest_and_max_mode(tmp_path):
    d = run_dir(tmp_path)
    r = manage.prune(d, max_to_keep=2, best=BestSpec(1, "eval/loss", "max"), now=T0 + 3600)
    assert indexes(d) == ["ckpt-7", "ckpt-8"]
    assert "best" in r.reasons[os.path.join(d, "ckpt-8")]


def test_missing_metric_is_an_error_and_deletes_nothing(tmp_path, capsys):
    d = run_dir(tmp_path)
    before = sorted(os.listdir(d))
    with pytest.raises(MissingError, match="eval/loss"):
        manage.prune(d, max_to_keep=1, best=BestSpec(1, "eval/acc"), now=T0 + 3600)
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--keep-best", "1", "--metric", "eval/acc")
    assert code == 1 and "found: eval/loss" in err and "Traceback" not in err
    assert sorted(n for n in os.listdir(d) if n != ".ckptool.lock") == before


def test_corrupt_event_file_warns_and_is_skipped(tmp_path, capsys):
    d = run_dir(tmp_path)
    with open(os.path.join(d, "eval", "events.out.tfevents.2.host"), "wb") as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage")
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep-best", "1", "--metric", "eval/loss")
    assert code == 0, err
    assert "warning" in err and "events.out.tfevents.2.host" in err
    assert indexes(d) == ["ckpt-4", "ckpt-7", "ckpt-8"]


def test_cli_dry_run_json_and_text(tmp_path, capsys):
    d = run_dir(tmp_path)
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep-best", "2", "--metric", "eval/loss",
                         "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["best"]["best"][0]["checkpoint"] == "ckpt-4" and doc["best"]["without_value"] == 1
    assert doc["reasons"][os.path.join(d, "kept", "ckpt-4")] == ["best"]
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "2", "--keep-best", "2", "--metric", "eval/loss",
                         "--dry-run")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith(os.path.join(d, "kept", "ckpt-4")))
    assert "best" in line and "0.2" in line
    assert "1 of 8" in err and "no eval/loss value" in err
    code, _, err = run(capsys, "prune", d, "--keep-best", "2")
    assert code == 2 and "--metric" in err
    code, _, err = run(capsys, "prune", d, "--metric", "loss")
    assert code == 2 and "--keep-best" in err


def test_metrics_jsonl_option(tmp_path, capsys):
    d = str(tmp_path / "run")
    make(d, range(1, 6))
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps({"step": s, "acc": a}) + "\n" for s, a in [(1, .9), (2, .1), (3, .5)]))
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--keep-best", "1", "--metric", "acc",
                         "--mode", "max", "--metrics", p)
    assert code == 0, err
    assert indexes(d) == ["ckpt-1", "ckpt-5"]


def test_toml_and_recursive(tmp_path, capsys):
    root = tmp_path / "root"
    for name, best_step in (("a", 2), ("b", 3)):
        d = str(root / name)
        make(d, range(1, 6))
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            for s in range(1, 6):
                f.write(json.dumps({"step": s, "loss": 0.1 if s == best_step else 1.0 + s}) + "\n")
    (root / ".ckptool.toml").write_text('keep_best = 1\nmetric = "loss"\nmetrics = "metrics.jsonl"\n')
    (root / "b" / ".ckptool.toml").write_text('mode = "min"\nmax_to_keep = 1\n')
    code, out, err = run(capsys, "prune", root, "--recursive", "--max-to-keep", "2", "--json")
    assert code == 0, err
    assert indexes(root / "a") == ["ckpt-2", "ckpt-4", "ckpt-5"]
    # issue 27: the flag --max-to-keep 2 beats b's max_to_keep = 1 (as git/restic: a flag beats the file)
    assert indexes(root / "b") == ["ckpt-3", "ckpt-4", "ckpt-5"]
    doc = json.loads(out)
    assert {d["directory"]: d for d in doc["directories"]}[str(root / "a")]["best"]["best"] == [{"checkpoint": "ckpt-2", "step": 2, "value": 0.1}]
    (root / "b" / ".ckptool.toml").write_text('mode = "median"\n')
    code, out, err = run(capsys, "prune", root, "--recursive")
    assert code == 1 and "mode" in err


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.sampled_from([0.0, 0.5, 1.0, 2.0])), min_size=1, max_size=9),
       max_to_keep=st.integers(1, 4), n=st.integers(1, 3), mode=st.sampled_from(["min", "max"]))
def test_never_deletes_one_of_the_n_best_nor_of_the_newest(values, max_to_keep, n, mode):
    d = tempfile.mkdtemp()
    try:
        steps = list(range(10, 10 * (len(values) + 1), 10))
        make(d, steps)
        with open(os.path.join(d, "m.jsonl"), "w") as f:
            for s, v in zip(steps, values):
                if v is not None:
                    f.write(json.dumps({"step": s, "m": v}) + "\n")
        valued = [(i, v) for i, v in enumerate(values) if v is not None]
        sign = 1 if mode == "min" else -1
        best = {f"ckpt-{steps[i]}" for i, _ in sorted(valued, key=lambda t: (sign * t[1], -t[0]))[:n]}
        newest = {f"ckpt-{s}" for s in steps[-max_to_keep:]}
        if not valued:
            with pytest.raises(MissingError):
                manage.prune(d, max_to_keep=max_to_keep, best=BestSpec(n, "m", mode, os.path.join(d, "m.jsonl")),
                             now=T0 + 3600)
            return
        manage.prune(d, max_to_keep=max_to_keep, best=BestSpec(n, "m", mode, os.path.join(d, "m.jsonl")),
                     now=T0 + 3600)
        left = set(indexes(d))
        assert left == best | newest
        st_ = read_state(d)
        assert set(st_.all_model_checkpoint_paths) == newest  # the best beyond them: on disk, unlisted
        assert st_.model_checkpoint_path == f"ckpt-{steps[-1]}"
    finally:
        shutil.rmtree(d)
