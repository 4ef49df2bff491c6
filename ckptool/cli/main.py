"""The top-level ``ckptool`` group, global options, and error handling.

Exit codes (README, ): 0 success; 1 the data or file system is at fault
(a ckptool error, a failed verification, a refused operation); 2 usage.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

import click

from ckptool import __version__
from ckptool.errors import CkptError, CkptWarning

#: subcommand -> module under ckptool.cli.commands (imported on first use, so
#: that `ckptool --version` and `--help` stay fast).
COMMANDS = {
    "list-variables": "list_variables",
    "inspect": "inspect",
    "diff": "diff",
    "save": "save",
    "convert": "convert",
    "rewrite-names": "rewrite_names",
    "prune": "prune",
    "du": "du",
    "state": "state",
    "verify": "verify",
    "average": "average",
    "rm": "rm",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(n for n in COMMANDS if self._module(n) is not None)

    def _module(self, name):
        try:
            return importlib.import_module(f"ckptool.cli.commands.{COMMANDS[name]}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ckptool.cli.commands.{COMMANDS[name]}":
                return None
            raise

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        mod = self._module(name)
        return None if mod is None else mod.command

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click turns EPIPE into exit 1; a closed pipe (`| head`) is not a failure
            raise _PipeClosed() from None


class _PipeClosed(Exception):
    pass


class Settings:
    def __init__(self, debug: bool, quiet: bool):
        self.debug = debug
        self.quiet = quiet


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="ckptool", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="Show a full traceback on error.")
@click.option("-q", "--quiet", is_flag=True, help="Print no warnings or progress, only data and errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool) -> None:
    """Read, write, inspect, convert, prune and rename TensorFlow checkpoints, without TensorFlow.

    CHECKPOINT arguments accept a prefix (runs/ckpt-5), its .index or any
    .data-* file, a directory with a 'checkpoint' state file (its latest
    checkpoint), a directory holding one checkpoint, or a SavedModel directory.
    """
    ctx.obj = Settings(debug, quiet)
    _install_warning_printer(quiet)


def _install_warning_printer(quiet: bool) -> None:
    def show(message, category, filename, lineno, file=None, line=None):
        if not quiet:
            click.echo(f"ckptool: warning: {message}", err=True)

    warnings.showwarning = show
    warnings.simplefilter("always", CkptWarning)


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    _on_sigterm()
    try:
        cli.main(args=args, prog_name="ckptool", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("ckptool: aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (BrokenPipeError, _PipeClosed):
        _quiet_broken_pipe()
    except KeyboardInterrupt:
        click.echo("ckptool: interrupted", err=True)
        sys.exit(130)
    except CkptError as exc:
        if debug:
            raise
        click.echo(f"ckptool: error: {exc}", err=True)
        sys.exit(1)
    except Failed as exc:
        if exc.message:
            click.echo(f"ckptool: error: {exc.message}", err=True)
        sys.exit(1)
    except OSError as exc:  # the file system is at fault: one line too (permissions, disk full, ...)
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"ckptool: error: {where}{exc.strerror or exc}", err=True)
        sys.exit(1)
    else:
        _flush_or_quiet()
    finally:
        from ckptool.io.atomic import remove_live_temporaries

        remove_live_temporaries()  # what an interrupted write left (its own cleanup ran first)


def _on_sigterm() -> None:
    """SIGTERM unwinds like SIGINT (every write removes its temporaries), then exit 143."""
    import signal
    import threading

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


class Failed(Exception):
    """Raised by a command to exit 1 after it has printed what went wrong."""

    def __init__(self, message: str = ""):
        super().__init__(message)
        self.message = message


def _flush_or_quiet() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    # `ckptool list-variables ... | head`: the reader went away; end quietly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    sys.exit(0)
