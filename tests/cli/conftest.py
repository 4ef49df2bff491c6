"""Fixtures of the CLI tests: the bundled example copied into a scratch directory, the
bytes of a tree (to prove a command changed nothing), and ckptool's own entry point run
in-process (its error handling and exit codes included)."""

import pathlib
import shutil

import pytest

from clirun import run as run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "keras_adam"


@pytest.fixture
def example(tmp_path) -> pathlib.Path:
    """A copy of examples/keras_adam (ckpt-3, ckpt-4, ckpt-5 and a state file) at tmp_path/runs."""
    d = tmp_path / "runs"
    shutil.copytree(EXAMPLE, d)
    return d


@pytest.fixture
def tree_bytes():
    """``tree_bytes(d)`` -> {relative path: bytes} of every file below ``d``."""
    def snapshot(d: pathlib.Path) -> dict:
        return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    return snapshot


@pytest.fixture
def ck(capsys):
    """``ck(*argv)`` -> (exit code, stdout, stderr) of ``ckptool ARGV...``."""
    def go(*argv):
        return run_cli(capsys, *argv)
    return go
