"""Issue 40, a newcomer's cron day: cron mails every line a job prints, so a prune that has
nothing to do prints nothing and one that deleted prints what it did and its summary (the
plan and the policy's sources only with --dry-run or -v); a tree where no run has a policy
says so, since that cron job would never prune; the crontab line and the .ckptool.toml
template are in the README and the man page, and the template reads back as written.
Issue 39 item 6: a pin given as a flag is the flag's (``flag, FILE`` when a file pins too)."""

import os
import pathlib
import re

import numpy as np

import ckptool
from ckptool.cli import docs
from ckptool.io.control.policy import POLICY_KEYS, TEMPLATE_DEFAULTS, TEMPLATE_KEYS, parse_policy, policy_template
from ckptool.ops.retain import prune as P
from ckptool.ops.retain.policy_args import POLICY_DEFAULTS

ROOT = pathlib.Path(__file__).resolve().parents[2]
T0 = 1_700_000_000.0
NONE_WITH_A_POLICY = "none with a policy: nothing to do; see .ckptool.toml in ckptool-prune(1)"


def make(d, n=4):
    d.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        ckptool.write(str(d / f"ckpt-{i}"), {"w": np.full(4, i, np.float32)}, sync=False)
        P.record_save(str(d), str(d / f"ckpt-{i}"), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
    return d


def indexes(d):
    return sorted(n[: -len(".index")] for n in os.listdir(d) if n.endswith(".index"))


# --------------------------------------------------------------------------- silence


def test_a_tree_with_no_policy_anywhere_says_so_on_stderr(tmp_path, ck):
    root = tmp_path / "root"
    make(root / "a"), make(root / "team" / "b"), make(root / "c")
    code, out, err = ck("prune", root, "--recursive")
    assert code == 0 and out == ""
    assert err.splitlines() == [f"3 runs, {NONE_WITH_A_POLICY}"]
    assert all(len(indexes(root / d)) == 4 for d in ("a", "team/b", "c"))  # nothing touched
    code, out, err = ck("prune", root, "--recursive", "--dry-run")  # the plan lists them, the line still comes
    assert code == 0 and out.count("no policy") == 3 and f"3 runs, {NONE_WITH_A_POLICY}" in err
    code, out, err = ck("-q", "prune", root, "--recursive")
    assert (code, out, err) == (0, "", "")


def test_one_run_is_counted_in_the_singular_and_an_empty_tree_is_said_too(tmp_path, ck):
    make(tmp_path / "one" / "run")
    code, out, err = ck("prune", tmp_path / "one", "-r")
    assert code == 0 and err.splitlines() == [f"1 run, {NONE_WITH_A_POLICY}"]
    (tmp_path / "empty").mkdir()
    code, out, err = ck("prune", tmp_path / "empty", "-r")
    assert code == 0 and out == "" and err.splitlines() == [f"no checkpoint directories below {tmp_path / 'empty'}: "
                                                             "nothing to do"]


def test_a_policy_anywhere_in_the_tree_ends_the_complaint(tmp_path, ck):
    root = tmp_path / "root"
    make(root / "a"), make(root / "b")
    (root / "a" / ".ckptool.toml").write_text("max_to_keep = 4\n")  # nothing to delete yet
    code, out, err = ck("prune", root, "-r")
    assert (code, out, err) == (0, "", "")


# --------------------------------------------------------------------------- noise


def test_a_plain_prune_prints_what_it_did_and_the_summary_only(tmp_path, ck):
    d = make(tmp_path / "run")
    code, out, err = ck("prune", d, "--max-to-keep", "2")
    assert code == 0, err
    assert out.splitlines() == [f"{d / 'ckpt-1'}  deleted", f"{d / 'ckpt-2'}  deleted"]
    assert err.splitlines() == ["2 kept, 0 preserved, 2 deleted; freed " + err.split("freed ")[1].strip()]
    assert "policy:" not in out + err and " keep " not in out
    code, out, err = ck("prune", d, "--max-to-keep", "2")  # nothing left to delete: nothing at all
    assert (code, out, err) == (0, "", "")


def test_the_plan_and_the_sources_come_with_dry_run_or_verbose(tmp_path, ck):
    d = make(tmp_path / "run")
    for flags in (["--dry-run"], ["-v"]):
        code, out, err = ck("prune", d, "--max-to-keep", "3", *flags)
        assert code == 0 and "policy: max_to_keep = 3  (flag)" in err and "keep" in out, flags
    assert indexes(d) == ["ckpt-2", "ckpt-3", "ckpt-4"]  # -v did delete
    code, out, err = ck("prune", d, "--max-to-keep", "3", "-v")  # -v with nothing to do: the table still
    assert code == 0 and "max_to_keep, latest" in out and "policy:" in err


def test_quiet_prints_nothing_but_errors(tmp_path, ck):
    d = make(tmp_path / "run")
    code, out, err = ck("-q", "prune", d, "--max-to-keep", "1")
    assert (code, out, err) == (0, "", "") and indexes(d) == ["ckpt-4"]


def test_a_recursive_prune_lists_only_the_runs_it_changed(tmp_path, ck):
    root = tmp_path / "root"
    a, b, c = make(root / "a"), make(root / "b", 2), make(root / "c")
    for run in (a, b):
        (run / ".ckptool.toml").write_text("max_to_keep = 2\n")
    code, out, err = ck("prune", root, "-r")
    assert code == 0, err
    rows = [ln.split()[0] for ln in out.splitlines()]
    assert rows == ["DIRECTORY", str(a), "total"]  # b had nothing to delete; c has no policy and goes unsaid
    assert err == "" and "policy:" not in out
    assert indexes(c) == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    code, out, err = ck("prune", root, "-r")
    assert (code, out, err) == (0, "", "")
    code, out, err = ck("prune", root, "-r", "-v")
    assert {ln.split()[0] for ln in out.splitlines()} >= {str(a), str(b), str(c), "total"} and "policy:" in err


def test_the_other_commands_cron_runs_are_quiet_when_all_is_well(tmp_path, ck):
    d = make(tmp_path / "run")
    code, out, err = ck("-q", "verify", tmp_path, "--recursive")
    assert (code, out, err) == (0, "", "")
    code, out, err = ck("verify", tmp_path, "--recursive")  # without -q: a line per checkpoint, as before
    assert code == 0 and out.count("ok ") == 4
    with open(d / "ckpt-2.data-00000-of-00001", "r+b") as f:
        f.write(b"\xff\xff")
    code, out, err = ck("-q", "verify", tmp_path, "--recursive")
    assert code == 1 and out.splitlines()[0] == f"DAMAGED  {d / 'ckpt-2'}" and "ok " not in out
    assert err.startswith("ckptool: error: verify: 1 of 4 checkpoints damaged")
    code, out, err = ck("state", d, "--relative")  # relative already: nothing changed, nothing said
    assert (code, out, err) == (0, "", "")
    code, out, err = ck("state", d, "--rebuild")  # written: one status line, not the listing
    assert code == 0 and out == "" and err.splitlines() == [f"wrote 4 checkpoints into {d}/checkpoint"]
    code, out, err = ck("rm", d / "ckpt-1")
    assert code == 0 and out == "" and len(err.splitlines()) == 1 and err.startswith(f"removed {d / 'ckpt-1'}")
    code, out, err = ck("-q", "rm", d / "ckpt-2")
    assert (code, out, err) == (0, "", "")


# --------------------------------------------------------------------------- the template


def test_print_config_writes_the_template_without_a_directory(ck):
    code, out, err = ck("prune", "--print-config")
    assert code == 0 and err == "" and out == policy_template()


def test_the_template_parses_back_to_the_defaults_it_shows():
    text = policy_template()
    assert parse_policy(text.encode(), ".ckptool.toml") == TEMPLATE_DEFAULTS
    # every key prune reads is there, set (at its default) or commented out (it has none), once
    shown = re.findall(r"^(?:# )?(\w+) = ", text, flags=re.M)
    assert sorted(shown) == sorted(POLICY_KEYS) == sorted(k for k, *_ in TEMPLATE_KEYS)
    # each commented example is a valid value of its key
    for key, default, example, _ in TEMPLATE_KEYS:
        if default is None:
            assert f"# {key} = {example}\n" in text
            assert key in parse_policy(f"{key} = {example}\n".encode(), "x")


def test_the_template_defaults_are_prunes_defaults(tmp_path):
    assert TEMPLATE_DEFAULTS["max_to_keep"] == POLICY_DEFAULTS["max_to_keep"]
    for key, default, *_ in TEMPLATE_KEYS:
        if key in POLICY_DEFAULTS:
            assert (default is None) == (POLICY_DEFAULTS[key] is None), key
    # the template at ROOT: each run below is pruned, exactly as the defaults prune a run
    a, b = make(tmp_path / "t" / "a", 7), make(tmp_path / "d" / "a", 7)
    (tmp_path / "t" / ".ckptool.toml").write_text(policy_template())
    from ckptool.ops.retain.fleet import prune_tree

    by_tree = prune_tree(str(tmp_path / "t"), dry_run=True).runs[str(a)]
    by_default = ckptool.prune(str(b), dry_run=True)
    def names(paths):
        return [os.path.basename(p) for p in paths]

    assert names(by_tree.deleted) == names(by_default.deleted) == ["ckpt-1", "ckpt-2"]
    assert by_tree.sources["max_to_keep"] == str(tmp_path / "t" / ".ckptool.toml")


def test_the_readme_and_the_man_page_show_the_crontab_line_and_the_template():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n### From cron\n", 1)[1].split("\n### ", 1)[0]
    crontab = re.search(r"```crontab\n(.*?)```", section, re.S).group(1)
    assert re.fullmatch(r"(\S+ ){5} /\S+/ckptool prune \S+ --recursive.*\n", crontab), crontab
    assert re.search(r"```toml\n(.*?)```", section, re.S).group(1) == policy_template()
    page = docs.man_pages()["ckptool-prune.1"]
    notes = page.split(".SH NOTES", 1)[1]
    assert "17 * * * *" in notes and "\\-\\-print\\-config > " in notes
    for key, *_ in TEMPLATE_KEYS:
        assert key in notes


# --------------------------------------------------------------------------- issue 39 item 6


def test_a_pin_given_as_a_flag_is_the_flags(tmp_path, ck):
    d = make(tmp_path / "run")
    code, out, err = ck("prune", d, "--keep", "ckpt-1", "--max-to-keep", "1", "--dry-run")
    assert code == 0 and "policy: keep = ckpt-1  (flag)" in err
    (d / ".ckptool.toml").write_text('keep = ["ckpt-2"]\n')
    code, out, err = ck("prune", d, "--keep", "ckpt-1", "--max-to-keep", "1", "--dry-run")
    assert code == 0 and f"policy: keep = ckpt-1, ckpt-2  (flag, {d / '.ckptool.toml'})" in err
    code, out, err = ck("prune", d, "--max-to-keep", "1", "--dry-run")
    assert code == 0 and f"policy: keep = ckpt-2  ({d / '.ckptool.toml'})" in err
    code, out, err = ck("prune", tmp_path, "-r", "--keep", "ckpt-1", "--max-to-keep", "1", "--dry-run")
    assert code == 0 and f"{d}: policy: keep = ckpt-1, ckpt-2  (flag, {d / '.ckptool.toml'})" in err
    (d / ".ckptool.toml").unlink()
    code, out, err = ck("prune", d, "--max-to-keep", "1", "--dry-run")
    assert code == 0 and "policy: keep = none  (default)" in err
    assert ckptool.prune(str(d), keep=("ckpt-1",), dry_run=True).sources["keep"] == "flag"
