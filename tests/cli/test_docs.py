"""Man pages and completions are generated from the click commands; the committed ones are current."""

import pathlib
import re

import click
import numpy as np
import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

import ckptool
from ckptool.cli import docs
from ckptool.cli.main import cli

ROOT = pathlib.Path(__file__).parents[2]
REGEN = "python -m ckptool.cli.docs ."


def _commands():
    ctx = click.Context(cli, info_name="ckptool")
    return {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}


def test_committed_man_pages_and_completions_are_current():
    want = docs.generate()
    for rel, text in want.items():
        path = ROOT / rel
        assert path.is_file(), f"{rel} is missing; run `{REGEN}`"
        assert path.read_text(encoding="utf-8") == text, f"{rel} is stale; run `{REGEN}`"
    for sub in (docs.MAN_DIR, "completions"):
        extra = {f"{sub}/{p.name}" for p in (ROOT / sub).iterdir()} - set(want)
        assert not extra, f"{sorted(extra)} no longer generated; run `{REGEN}`"


def test_every_command_in_the_contract_exists():
    assert set(_commands()) >= {"list-variables", "inspect", "diff", "save", "rewrite-names"}


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_option_is_in_help_and_in_the_man_page(name):
    cmd = _commands()[name]
    help_text = CliRunner().invoke(cli, [name, "--help"]).output
    page = docs.man_pages()[f"ckptool-{name}.1"]
    assert cmd.help and cmd.help.split("\n")[0].strip()[:40] in help_text
    for param in cmd.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                assert opt in help_text, (name, opt)
                assert opt.replace("-", "\\-") in page, (name, opt)
            assert param.help, f"{name} {param.opts[0]} has no help text"
    assert "ckptool\\-" + name.replace("-", "\\-") + "\\fR(1)" in docs.man_pages()["ckptool.1"]


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", sorted(n for n, c in _commands().items() if c.epilog))
def test_the_epilog_is_in_help_and_in_the_man_page_notes(name):
    cmd = _commands()[name]
    help_text = CliRunner().invoke(cli, [name, "--help"]).output
    page = docs.man_pages()[f"ckptool-{name}.1"]
    epilog = cmd.epilog.replace("\b\n", "")  # click's mark of a block kept as written, shown as nothing
    assert _words(epilog) in _words(help_text)
    notes = page.split(".SH NOTES\n", 1)[1].split("\n.SH ", 1)[0]
    for mark in (".PP", ".nf", ".fi"):
        notes = notes.replace(mark, "")
    assert _words(docs._roff(epilog)) in _words(notes)
    assert page.index(".SH OPTIONS") < page.index(".SH NOTES") < page.index(".SH EXIT STATUS")


def test_the_streaming_commands_have_the_remote_reads_note():
    from ckptool.cli.common import REMOTE_READS

    with_epilog = {n for n, c in _commands().items() if c.epilog == REMOTE_READS}
    assert with_epilog >= {"convert", "average", "diff", "save", "rewrite-names"}
    for name in with_epilog:
        assert "object store" in docs.man_pages()[f"ckptool-{name}.1"].split(".SH NOTES", 1)[1]


def test_a_command_without_an_epilog_has_no_notes():
    assert all(".SH NOTES" not in docs.man_pages()[f"ckptool-{n}.1"] for n, c in _commands().items()
               if not c.epilog)


def test_roff_escapes_leading_dots_and_backslashes():
    assert docs._roff(".TH x\n'quote\na\\b-c") == "\\&.TH x\n\\&'quote\na\\eb\\-c"


def _complete(args, incomplete):
    comp = ShellComplete(cli, {}, "ckptool", "_CKPTOOL_COMPLETE")
    return [c.value for c in comp.get_completions(args, incomplete)]


def test_checkpoint_arguments_complete_to_prefixes_not_data_files(tmp_path, monkeypatch):
    ckptool.write(str(tmp_path / "ckpt-1"), {"w": np.zeros(2)}, num_shards=2, sync=False)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    got = _complete(["list-variables"], "")
    assert got == ["ckpt-1", "sub/"]
    assert _complete(["inspect"], "ck") == ["ckpt-1"]


def test_tensor_names_complete_from_the_checkpoint(tmp_path):
    p = str(tmp_path / "c")
    ckptool.write(p, {"dense/kernel": np.zeros(2), "dense/bias": np.zeros(1), "step": np.int64(1)}, sync=False)
    assert _complete(["inspect", p, "--tensor"], "dense/") == ["dense/bias", "dense/kernel"]


def test_completion_scripts_call_back_into_ckptool():
    scripts = docs.completions()
    for name, text in scripts.items():
        assert "_CKPTOOL_COMPLETE" in text and re.search(r"\bckptool\b", text), name


def _readme_sh_blocks():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S)


def test_ci_runs_the_readme_install_and_test_lines_as_written():
    import subprocess

    want = [ln for block in _readme_sh_blocks()[:2] for ln in block.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]
    assert want[0].startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]'")
    got = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--print-readme-commands"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert got == want
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "--upgrade pip" not in ci


def test_man_pages_are_found_under_manpath_man():
    import shutil
    import subprocess

    assert (ROOT / docs.MAN_DIR / "ckptool-inspect.1").is_file()
    if shutil.which("man") is None:
        pytest.skip("no man(1) here")
    out = subprocess.run(["man", "-w", "ckptool-inspect"], cwd=ROOT, env={"MANPATH": "man", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip().endswith("man/man1/ckptool-inspect.1"), out
