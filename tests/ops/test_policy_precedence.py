"""Issue 27, policy precedence as git and restic have it: a flag beats .ckptool.toml, which
beats the default; --dry-run and -v say where each setting came from; prune --recursive
without policy flags prunes only runs with a policy file at or above them."""

import os

import numpy as np

import ckptool
from ckptool.io.control.policy import resolve_policy
from ckptool.ops.retain import fleet as F
from ckptool.ops.retain import prune as P
from clirun import run

T0 = 1_700_000_000.0


def make(d, n=8):
    d.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.full(4, i, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"ckpt-{i}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
    return d


def indexes(d):
    return sorted((n[: -len(".index")] for n in os.listdir(d) if n.endswith(".index")),
                  key=lambda n: int(n.rsplit("-", 1)[1]))


def test_resolve_policy_sources(tmp_path):
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / ".ckptool.toml").write_text("max_to_keep = 2\nmin_age = 60\n")
    (root / "run" / ".ckptool.toml").write_text('keep = ["ckpt-1"]\nmin_age = 30\n')
    values = {"max_to_keep": 10, "keep_every_n_hours": None, "keep_steps_every": None, "min_age": None, "keep": []}
    eff = resolve_policy(str(root), str(root / "run"), values, explicit={"max_to_keep"})
    assert eff.policy["max_to_keep"] == 10 and eff.sources["max_to_keep"] == "flag"
    assert eff.policy["min_age"] == 30 and eff.sources["min_age"] == str(root / "run" / ".ckptool.toml")
    assert eff.sources["keep_every_n_hours"] == "default" and eff.policy["keep"] == ["ckpt-1"]
    eff = resolve_policy(str(root), str(root / "run"), values)
    assert eff.policy["max_to_keep"] == 2 and eff.sources["max_to_keep"] == str(root / ".ckptool.toml")


def test_a_flag_beats_the_policy_file(tmp_path, capsys):
    d = make(tmp_path / "run")
    (d / ".ckptool.toml").write_text("max_to_keep = 2\n")
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "6", "--dry-run")
    assert code == 0, err
    assert "max_to_keep = 6  (flag)" in err and "min_age = none  (default)" in err
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "6")
    assert code == 0 and indexes(d) == [f"ckpt-{i}" for i in range(3, 9)]
    code, out, err = run(capsys, "prune", d, "-v")  # no flag: the file
    assert code == 0 and f"max_to_keep = 2  ({d / '.ckptool.toml'})" in err
    assert indexes(d) == ["ckpt-7", "ckpt-8"]


def test_library_arguments_beat_the_file_and_defaults_do_not(tmp_path):
    d = make(tmp_path / "run")
    (d / ".ckptool.toml").write_text("max_to_keep = 3\n")
    r = P.prune(str(d), dry_run=True, now=T0 + 100)
    assert r.policy["max_to_keep"] == 3
    r = P.prune(str(d), max_to_keep=7, dry_run=True, now=T0 + 100)
    assert r.policy["max_to_keep"] == 7 and r.sources["max_to_keep"] == "flag"


def test_recursive_without_flags_prunes_only_runs_with_a_policy(tmp_path, capsys):
    root = tmp_path / "root"
    a, b, c = make(root / "team" / "a"), make(root / "b"), make(root / "team" / "deep" / "c")
    (root / "team" / ".ckptool.toml").write_text("max_to_keep = 2\n")
    tree = F.prune_tree(str(root), now=T0 + 100)
    assert sorted(tree.runs) == [str(a), str(c)] and tree.no_policy == [str(b)]
    assert indexes(a) == ["ckpt-7", "ckpt-8"] and indexes(c) == ["ckpt-7", "ckpt-8"]
    assert len(indexes(b)) == 8  # left alone, not max_to_keep 5
    code, out, err = run(capsys, "prune", root, "--recursive", "--dry-run")
    assert code == 0 and "no policy" in out and str(b) in out
    tree = F.prune_tree(str(root), max_to_keep=4, now=T0 + 100)  # a policy flag: every run
    assert tree.no_policy == [] and len(indexes(b)) == 4 and indexes(a) == ["ckpt-7", "ckpt-8"]
