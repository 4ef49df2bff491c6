"""Run ckptool's own entry point in-process (its error handling and exit codes included)."""

import os
import subprocess
import sys

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


_IMPORT_PROBE = ("import sys\nfrom ckptool.cli.main import main\n"
                 "module, args = sys.argv[1], sys.argv[2:]\n"
                 "try:\n    main(args)\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
                 "print(module in sys.modules)\n")


def imports_module(module: str, *args) -> bool:
    """Whether ``ckptool ARGS...``, run to success in a fresh python, imported ``module``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, module, *(str(a) for a in args)],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=root), timeout=120)
    assert out.returncode == 0, (args, out.stderr)
    return out.stdout.splitlines()[-1] == "True"


def imports_numpy(*args) -> bool:
    """Whether ``ckptool ARGS...``, run to success in a fresh python, imported numpy."""
    return imports_module("numpy", *args)
