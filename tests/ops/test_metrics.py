"""ckptool.ops.retain.metrics: metric values by step from TF-written event files and JSON Lines."""

import json
import pathlib
import shutil
import struct
import warnings

import pytest

from ckptool.errors import CkptError, CkptWarning, MissingError
from ckptool.format.events import encode_record
from ckptool.format.protos.event_pb2 import Event
from ckptool.ops.retain import history as H
from ckptool.ops.retain import metrics as M
from ckptool.ops.retain.keep_best import BestSpec

EVENTS = pathlib.Path(__file__).parents[1] / "data" / "events"


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def write_events(path, rows):
    """An event file of (tag, step, value, wall_time) rows, TF1 style (simple_value)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = b""
    for tag, step, value, wall in rows:
        e = Event(step=step, wall_time=wall)
        e.summary.value.add(tag=tag, simple_value=value)
        out += encode_record(e.SerializeToString())
    path.write_bytes(out)


@pytest.mark.parametrize("run", ["tf1", "tf2"])
def test_series_of_tf_runs(run):
    series = H.event_series(str(EVENTS / run))
    assert set(series) >= {"loss", "eval/loss", "eval/accuracy"}
    assert series["loss"][1000] == f32(0.25)
    assert series["eval/loss"][700] == f32(0.4)
    assert sorted(series["eval/loss"]) == list(range(100, 1100, 100))


def test_tf1_restarted_evaluator_later_value_wins():
    series = H.event_series(str(EVENTS / "tf1"))
    assert series["eval/loss"][600] == f32(0.3)  # the second writer's, written later
    assert series["eval/loss"][500] == f32(0.5)
    assert "learning_rate" in series  # written by a tf.compat.v1.summary.scalar op


def test_select_series_exact_suffix_missing_ambiguous(tmp_path):
    series = H.event_series(str(EVENTS / "tf1"))
    assert M.select_series(series, "eval/loss", "d")[0] == "eval/loss"
    assert M.select_series(series, "loss", "d")[0] == "loss"  # the exact name beats eval/loss
    assert M.select_series(series, "accuracy", "d")[0] == "eval/accuracy"
    with pytest.raises(MissingError) as exc:
        M.select_series(series, "eval/top5", "d")
    assert "eval/accuracy" in str(exc.value) and "learning_rate" in str(exc.value)
    write_events(tmp_path / "a" / "events.out.tfevents.1.h", [("x", 1, 1.0, 1.0)])
    write_events(tmp_path / "b" / "events.out.tfevents.1.h", [("x", 1, 2.0, 1.0)])
    with pytest.raises(CkptError, match="ambiguous: a/x, b/x"):
        M.metric_values(str(tmp_path), "x")
    assert M.metric_values(str(tmp_path), "b/x") == ("b/x", {1: 2.0})


def test_no_event_files(tmp_path):
    with pytest.raises(MissingError, match="no events.out.tfevents"):
        M.metric_values(str(tmp_path), "loss")


def test_truncated_and_corrupt_files_warn_and_keep_the_good_part(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(EVENTS / "tf1", run)
    a = next((run / "eval").glob("*.a"))
    b = next((run / "eval").glob("*.b"))
    a.write_bytes(a.read_bytes()[:-7])  # truncated last record
    raw = bytearray(b.read_bytes())
    raw[60] ^= 1  # a flip inside the first records
    b.write_bytes(bytes(raw))
    (run / "eval" / "events.out.tfevents.9.garbage").write_bytes(b"\x00garbage")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        series = H.event_series(str(run))
    msgs = [str(x.message) for x in w if issubclass(x.category, CkptWarning)]
    assert len(msgs) == 3
    assert any(str(a) in m and "truncated" in m for m in msgs)
    assert any(str(b) in m and "bad CRC" in m for m in msgs)
    assert series["eval/loss"][100] == f32(0.9)
    assert 1000 not in series["eval/loss"]  # in the damaged file


@pytest.mark.filterwarnings("ignore::ckptool.errors.CkptWarning")
def test_jsonl(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "loss": 0.5, "acc": 0.1}\n'
                 'not json\n'
                 '{"step": 2, "loss": 0.4}\n'
                 '{"step": 1, "loss": 0.6}\n'
                 '{"step": "3", "loss": 0.1}\n'
                 '[1, 2]\n'
                 '{"step": 4.0, "loss": 1e999, "note": "x", "flag": true}\n'
                 '{"step": 5, "loss": NaN}\n\n')
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        series = H.read_history(str(p))
    assert series == {"loss": {1: 0.6, 2: 0.4, 4: float("inf")}, "acc": {1: 0.1}}
    assert len(w) == 1 and "3 line(s)" in str(w[0].message) and "line 2" in str(w[0].message)
    with pytest.raises(MissingError, match=r"no metric 'eval/loss' found \(found: acc, loss\)"):
        M.metric_values(str(tmp_path), "eval/loss", metrics=str(p))
    with pytest.raises(MissingError):
        M.metric_values(str(tmp_path), "loss", metrics=str(tmp_path / "absent.jsonl"))


def test_best_pins_from_events():
    cands = [(f"ckpt-{s}", s) for s in range(100, 1100, 100)] + [("ckpt-1234", 1234), ("odd", None)]
    got = M.best_pins(str(EVENTS / "tf2"), cands, BestSpec(2, "eval/loss", "min"))
    # 0.4 at 300 and at 700: the tie goes to the newer (700), then 300 before 0.41 at 900
    assert list(got.pins) == ["ckpt-700", "ckpt-300"]
    assert got.none_count == 2 and got.candidates == 12 and got.series == "eval/loss"
    got = M.best_pins(str(EVENTS / "tf2"), cands, BestSpec(1, "accuracy", "max"))
    assert got.pins == {"ckpt-900": 0.8}
    doc = got.to_json()
    assert doc["best"] == [{"checkpoint": "ckpt-900", "step": 900, "value": 0.8}] and doc["without_value"] == 2
    json.dumps(doc, allow_nan=False)


def test_best_pins_json_lines(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text("".join(json.dumps({"step": s, "bleu": v}) + "\n" for s, v in [(1, 3.0), (2, 5.0), (3, 5.0)]))
    got = M.best_pins(str(tmp_path), [("c-1", 1), ("c-2", 2), ("c-3", 3)], BestSpec(1, "bleu", "max", str(p)))
    assert got.pins == {"c-3": 5.0}


@pytest.mark.filterwarnings("ignore::ckptool.errors.CkptWarning")
def test_jsonl_hostile_lines(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"step": 1, "a": ' + b"[" * 100000 + b"\n\xff\xfe\n" + b'{"step": 10**400}\n'
                  + b'{"step": 2, "a": 1' + b"0" * 400 + b'}\n{"step": 3, "a": 1.5}\n')
    assert H.read_history(str(p)) == {"a": {3: 1.5}}


def test_metrics_path_may_be_an_event_directory_or_file(tmp_path):
    logs = EVENTS / "tf1"
    assert M.metric_values(str(tmp_path), "eval/loss", metrics=str(logs))[1][600] == f32(0.3)
    one = next((logs / "eval").glob("*.a"))
    name, values = M.metric_values(str(tmp_path), "loss", metrics=str(one))
    assert name == "loss" and sorted(values) == [100, 200, 300, 400, 500, 600]


def test_the_step_a_checkpoint_holds_comes_first(tmp_path):
    """A CheckpointManager that numbers by save counter (ckpt-1, ckpt-2, ...) while the
    evaluator logs global steps: the checkpoint's own step variable gives its step."""
    import numpy as np

    import ckptool

    d = tmp_path / "run"
    for n, step in ((1, 100), (2, 200), (3, 300)):
        ckptool.write(str(d / f"ckpt-{n}"), {"step/.ATTRIBUTES/VARIABLE_VALUE": np.array(step, np.int64),
                                             "w/.ATTRIBUTES/VARIABLE_VALUE": np.zeros(2, np.float32)}, sync=False)
    ckptool.write(str(d / "ckpt-4"), {"global_step": np.array(2.5, np.float32)}, sync=False)  # not an integer
    write_events(d / "eval" / "events.out.tfevents.1.h", [("loss", 100, 0.5, 1.0), ("loss", 200, 0.1, 2.0),
                                                          ("loss", 300, 0.3, 3.0), ("loss", 4, 0.05, 4.0)])
    assert M.stored_step(str(d / "ckpt-2")) == 200 and M.stored_step(str(d / "ckpt-4")) is None
    assert M.stored_step(str(d / "absent")) is None
    got = M.best_pins(str(d), [(f"ckpt-{n}", n) for n in range(1, 5)], BestSpec(2, "eval/loss"))
    assert got.pins == {"ckpt-4": f32(0.05), "ckpt-2": f32(0.1)}  # ckpt-4 by the number in its name
    assert got.steps == {"ckpt-4": 4, "ckpt-2": 200} and got.none_count == 0


def test_one_history_reader_by_step_or_epoch(tmp_path):
    """Issue 50: JSON Lines (by step or by epoch), CSVLogger files, through one streaming reader; a
    400-digit number is no value (never an OverflowError), a 400-digit epoch no line."""
    big = "9" * 400
    p = tmp_path / "h.jsonl"
    p.write_text(f'{{"epoch": 1, "val_loss": {big}}}\n{{"epoch": {big}, "val_loss": 0.5}}\n'
                 f'{{"epoch": 2, "val_loss": 0.25, "step": 7}}\nnot json\n')
    with pytest.warns(CkptWarning, match="1 line"):
        assert H.read_history(str(p), "epoch") == {"val_loss": {int(big): 0.5, 2: 0.25}, "step": {2: 7.0}}
    with pytest.warns(CkptWarning, match="3 line"):
        assert H.read_history(str(p), "step") == {"epoch": {7: 2.0}, "val_loss": {7: 0.25}}
    c = tmp_path / "log.csv"
    c.write_text("\ufeffepoch,loss,val_loss\n0,1,0.9\n1,nan,\n" + big + ",1,1\n1,0.5,0.4\n")
    assert H.read_history(str(c), "epoch") == {"loss": {0: 1.0, 1: 0.5}, "val_loss": {0: 0.9, 1: 0.4}}
    with pytest.raises(MissingError, match="no 'x' at any \"epoch\" \\(found: loss, val_loss\\)"):
        H.pick(H.read_history(str(c), "epoch"), "x", str(c), "epoch")


def test_series_keep_best_survives_a_huge_number(tmp_path):
    from ckptool.ops.retain.series_best import epoch_values

    p = tmp_path / "h.jsonl"
    p.write_text('{"epoch": 0, "val_loss": ' + "1" * 400 + '}\n{"epoch": 1, "val_loss": 0.5}\n')
    name, values = epoch_values(str(tmp_path), BestSpec(1, "val_loss", "min", str(p)), H.LOCAL)
    assert values == {2: 0.5}
