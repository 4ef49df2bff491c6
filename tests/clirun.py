"""Run ckptool's own entry point in-process (its error handling and exit codes included)."""

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
