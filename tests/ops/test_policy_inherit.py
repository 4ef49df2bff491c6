"""Issue 53: a single-run prune reads the .ckptool.toml files --recursive reads for that run (the
nearest at or above it sets a key, up to the file system's root or ``root = true``); every
setting's source is shown; a bad value is one typed line, said once; series templates as
written in training scripts."""

import json
import os
import time

import numpy as np
import pytest

import ckptool
from ckptool.errors import CorruptError
from ckptool.io.control.policy import parse_policy, resolve_policy
from ckptool.ops.retain import prune as P
from clirun import run

T0 = 1_700_000_000.0


def make(d, n=6):
    d.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.full(4, i, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"ckpt-{i}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
    return d


def indexes(d):
    return sorted(n[: -len(".index")] for n in os.listdir(d) if n.endswith(".index"))


def test_a_single_run_reads_the_files_above_it_as_recursive_does(tmp_path, capsys, monkeypatch):
    root = tmp_path / "root"
    run1 = make(root / "team" / "run1")
    (root / ".ckptool.toml").write_text('max_to_keep = 2\nkeep_best = 0\nmode = "max"\n')
    (root / "team" / ".ckptool.toml").write_text("min_age = 30\n")
    code, out, err = run(capsys, "prune", run1, "--dry-run")
    assert code == 0, err
    assert f"policy: max_to_keep = 2  ({root / '.ckptool.toml'})" in err
    assert f"policy: min_age = 30  ({root / 'team' / '.ckptool.toml'})" in err
    assert f"policy: keep_best = 0  ({root / '.ckptool.toml'})" in err
    assert f"policy: mode = max  ({root / '.ckptool.toml'})" in err and "policy: metric = none  (default)" in err
    assert out.count("would delete") == 4
    code, out, err = run(capsys, "prune", root, "--recursive", "--dry-run", "--json")
    tree = json.loads(out)
    code, out, err = run(capsys, "prune", run1, "--dry-run", "--json")
    doc = json.loads(out)
    assert [r["policy_sources"] for r in tree["directories"]] == [doc["policy_sources"]]  # what cron applies
    assert doc["policy"]["max_to_keep"] == 2 and doc["policy"]["mode"] == "max" and doc["policy"]["keep_best"] == 0
    assert doc["policy_sources"]["mode"] == str(root / ".ckptool.toml")
    assert doc["policy_sources"]["metric"] == "default"
    assert len(doc["deleted"]) == 4
    monkeypatch.chdir(run1)  # `prune .` inside the run: the same files
    code, out, err = run(capsys, "prune", ".")
    assert code == 0, err
    assert indexes(run1) == ["ckpt-5", "ckpt-6"]


def test_root_true_stops_the_walk_up(tmp_path):
    root = tmp_path / "root"
    run1 = make(root / "run1", 1)
    (tmp_path / ".ckptool.toml").write_text("max_to_keep = 7\nkeep_steps_every = 3\n")
    (root / ".ckptool.toml").write_text("root = true\nmax_to_keep = 2\n")
    values = {"max_to_keep": 5, "keep_every_n_hours": None, "keep_steps_every": None, "min_age": None, "keep": []}
    eff = resolve_policy(str(run1), str(run1), values)
    assert eff.policy["max_to_keep"] == 2 and eff.policy["keep_steps_every"] is None
    assert eff.files == [str(root / ".ckptool.toml")] and "root" not in eff.policy
    (root / ".ckptool.toml").write_text("max_to_keep = 2\n")
    eff = resolve_policy(str(run1), str(run1), values)
    assert eff.policy["keep_steps_every"] == 3 and eff.sources["keep_steps_every"] == str(tmp_path / ".ckptool.toml")
    assert eff.policy["max_to_keep"] == 2 and eff.files == [str(tmp_path / ".ckptool.toml"), str(root / ".ckptool.toml")]


def test_a_kept_dir_reads_only_its_own_file(tmp_path):
    run1 = make(tmp_path / "run1", 1)
    (run1 / "kept").mkdir()
    (run1 / ".ckptool.toml").write_text("max_to_keep = 2\n")
    eff = resolve_policy(str(run1 / "kept"), str(run1 / "kept"), {"max_to_keep": None, "keep": []})
    assert eff.files == [] and eff.policy["max_to_keep"] is None


@pytest.mark.parametrize("text, said", [
    ('max_to_keep = "2"', "max_to_keep: '2' is a string; give an integer"),
    ("max_to_keep = -1", "max_to_keep: -1 is out of range; give an integer (0 or more)"),
    ("max_to_keep = true", "max_to_keep: True is a boolean; give an integer"),
    ('keep = "ckpt-1"', "keep: give a list of names"),
    ("keep = [1]", "keep: give a list of names"),
    ('mode = "mean"', "mode: min or max"),
    ('min_age = "soon"', "min_age: 'soon' is not a duration"),
    ("keep_every_n_hours = 0", "keep_every_n_hours: 0 is out of range; give a number of hours above 0"),
    ('root = "yes"', "root: 'yes' is a string; give true or false"),
    ("series = 3", "series: 3 is an integer; give a ModelCheckpoint filepath"),
    ('series = "model.keras"', "series: 'model.keras': no {field}"),
])
def test_a_bad_value_says_what_the_key_takes(text, said):
    with pytest.raises(CorruptError) as e:
        parse_policy(text.encode(), "x/.ckptool.toml")
    assert str(e.value).startswith("x/.ckptool.toml: " + said), str(e.value)


def test_a_bad_value_read_by_many_runs_is_said_once(tmp_path, capsys):
    root = tmp_path / "root"
    for r in ("a", "b", "c"):
        make(root / r, 2)
    (root / ".ckptool.toml").write_text('max_to_keep = "2"\n')
    code, out, err = run(capsys, "prune", root, "--recursive", "--dry-run")
    lines = [ln for ln in err.splitlines() if ln.startswith("ckptool: error:")]
    assert code == 1 and lines == [f"ckptool: error: {root / '.ckptool.toml'}: max_to_keep: '2' is a string; "
                                   f"give an integer (0 or more)"]
    code, out, err = run(capsys, "prune", root / "a", "--dry-run")
    assert code == 1 and err.count("ckptool: error:") == 1 and "give an integer" in err


def keras_series(d, n=5, t0=None):
    import zipfile

    d.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - 10 * 3600 if t0 is None else t0
    names = []
    for e in range(1, n + 1):
        name = f"epoch{e:02d}-{1 - e / 10:.3f}.keras"
        with zipfile.ZipFile(d / name, "w") as z:
            z.writestr("metadata.json", "{}")
            z.writestr("config.json", "{}")
            z.writestr("model.weights.h5", b"")
        os.utime(d / name, (t0 + e * 60, t0 + e * 60))
        names.append(name)
    return names


def test_a_series_template_with_its_directory_part(tmp_path, capsys, monkeypatch):
    pytest.importorskip("h5py")
    proj = tmp_path / "proj"
    names = keras_series(proj / "ckpts")
    (proj / ".ckptool.toml").write_text('series = "ckpts/epoch{epoch:02d}-{val_loss:.3f}.keras"\nmax_to_keep = 2\n')
    code, out, err = run(capsys, "prune", proj / "ckpts", "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert [os.path.basename(p) for p in doc["deleted"]] == names[:3]
    code, out, err = run(capsys, "prune", proj / "ckpts", "--dry-run", "--keep-best", "1", "--mode", "max")
    assert code == 0 and "policy: metric = val_loss" in err  # the template's one metric field
    code, out, err = run(capsys, "prune", proj, "--dry-run")  # the template names proj/ckpts, not proj
    assert code == 1 and "names the files of" in err and "relative to the .ckptool.toml" in err
    monkeypatch.chdir(proj)  # the flag's directory part is taken from the working directory
    code, out, err = run(capsys, "prune", "ckpts/", "--series", "ckpts/epoch{epoch:02d}-{val_loss:.3f}.keras",
                         "--max-to-keep", "3", "--keep-best", "1", "--mode", "min", "--dry-run", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["best"]["best"][0]["checkpoint"] == names[-1] and len(doc["deleted"]) == 2
    code, out, err = run(capsys, "prune", "ckpts", "--series", "other/epoch{epoch:02d}.keras", "--dry-run")
    assert code == 2 and "taken from the working directory" in err  # a usage error, as before


def test_a_template_matching_nothing_is_said_with_exit_1(tmp_path, capsys):
    d = tmp_path / "root" / "run"
    keras_series(d)
    for args in (["--series", "model-{epoch:02d}.keras"],):
        code, out, err = run(capsys, "prune", d, *args, "--dry-run")
        assert code == 1 and "matches none of its 5 files" in err and "--series 'epoch{epoch:02d}-" in err
    (tmp_path / "root" / ".ckptool.toml").write_text('series = "model-{epoch:02d}.keras"\n')
    code, out, err = run(capsys, "prune", d, "--dry-run")
    assert code == 1 and "matches none of its 5 files" in err
    code, out, err = run(capsys, "prune", tmp_path / "root", "--recursive", "--dry-run")
    assert code == 1 and "matches none of its 5 files" in err


def test_a_young_member_not_whole_is_named(tmp_path, capsys):
    d = tmp_path / "run"
    names = keras_series(d, 3)
    (d / "epoch04-0.600.keras").write_bytes(b"PK\x03\x04 half a zip")
    code, out, err = run(capsys, "prune", d, "--series", "epoch{epoch:02d}-{val_loss:.3f}.keras", "--max-to-keep", "1")
    assert code == 0, err
    assert "epoch04-0.600.keras: save in progress, not checked" in err
    assert sorted(n for n in os.listdir(d) if not n.startswith(".")) == [names[-1], "epoch04-0.600.keras"]


def test_a_missing_metric_names_the_csvlogger_file(tmp_path, capsys):
    d = make(tmp_path / "run", 2)
    (tmp_path / "training.csv").write_text("epoch,loss\n0,1\n")
    code, out, err = run(capsys, "prune", d, "--keep-best", "1", "--metric", "val_loss", "--dry-run")
    assert code == 1 and f"a CSVLogger file is beside the run: --metrics {tmp_path / 'training.csv'}" in err


def test_a_tf_format_series_without_state_is_offered_series(tmp_path, capsys):
    d = make(tmp_path / "run", 3)
    for i in range(1, 4):
        os.rename(d / f"ckpt-{i}.index", d / f"weights.{i:02d}.index")
        os.rename(d / f"ckpt-{i}.data-00000-of-00001", d / f"weights.{i:02d}.data-00000-of-00001")
    os.remove(d / "checkpoint")
    code, out, err = run(capsys, "prune", d)
    assert code == 1 and "--series 'weights.{epoch:02d}'" in err and "--scan" in err
