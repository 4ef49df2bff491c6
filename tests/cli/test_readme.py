"""The README's command list runs as written: every line of its ``## Commands`` block, in
order, in a scratch directory holding the bundled example (``cp -r examples/keras_adam
runs`` is its first line). A line exits 0 unless its comment says ``(exits N``."""

import pathlib
import re
import shlex
import shutil
import subprocess

import pytest

from clirun import completed

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _command_lines() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Commands\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no sh block under '## Commands'"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _expected_exit(line: str) -> int:
    _, _, comment = line.partition("#")
    m = re.search(r"\(exits (\d+)", comment)
    return int(m.group(1)) if m else 0


def test_the_block_is_the_whole_tour():
    lines = _command_lines()
    assert lines[0].startswith("cp -r examples/keras_adam runs")
    used = {shlex.split(line, comments=True)[1] for line in lines if line.startswith("ckptool ")}
    import click

    from ckptool.cli.main import cli

    assert used == set(cli.list_commands(click.Context(cli))), "every command appears in the README's tour, and only those"


def test_every_readme_command_runs_as_written(tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for line in _command_lines():
        if line.startswith("ckptool "):
            argv = shlex.split(line, comments=True)[1:]
            got = completed(*argv)
            code, out = got.returncode, got.stdout + got.stderr
        else:  # cp, echo: the shell's own
            got = subprocess.run(["bash", "-c", line], capture_output=True, text=True)
            code, out = got.returncode, got.stdout + got.stderr
        assert code == _expected_exit(line), f"{line}\nexit {code}:\n{out[-2000:]}"
        assert "Traceback" not in out, line
    # What the tour promised happened.
    assert (tmp_path / "back" / "ckpt-5.index").is_file()
    assert (tmp_path / "out" / "ckpt-7.index").is_file()
    assert not (tmp_path / "runs" / "ckpt-3.index").exists()  # pruned
    assert not (tmp_path / "runs" / "ckpt-4.index").exists()  # rm'd
    assert (tmp_path / "runs" / "ckpt-5.index").is_file()


@pytest.mark.parametrize("line", [ln for ln in _command_lines() if "--dry-run" in ln])
def test_dry_runs_in_the_tour_change_nothing(tmp_path, monkeypatch, example, tree_bytes, line):
    """A --dry-run line of the README leaves every file as it was (bytes and names)."""
    monkeypatch.chdir(tmp_path)
    before = tree_bytes(tmp_path)
    got = completed(*shlex.split(line, comments=True)[1:])
    assert got.returncode == _expected_exit(line), got.stderr
    assert tree_bytes(tmp_path) == before
