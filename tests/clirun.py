"""Run ckptool's own entry point in-process (its error handling and exit codes included)."""

import subprocess

from click.testing import CliRunner

from ckptool.cli.main import main


def run(capsys, *args):
    """``(exit code, stdout, stderr)`` of ``ckptool ARGS...``."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def completed(*args) -> subprocess.CompletedProcess:
    """``ckptool ARGS...`` run in-process, reported as ``subprocess.run(..., capture_output=True,
    text=True)`` would report it (for tests that need no process of their own: no signals,
    no timeouts, no memory measurement)."""
    argv = [str(a) for a in args]
    with CliRunner().isolation() as (out, err, _):
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess(["ckptool", *argv], code, stdout, stderr)
