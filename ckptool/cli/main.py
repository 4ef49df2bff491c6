"""The top-level ``ckptool`` group, global options, and error handling.

Exit codes (README.md): 0 success; 1 the data or file system is at fault
(a ckptool error, a failed verification, a refused operation); 2 usage (diff, as diff(1): 1 different, 2 trouble).
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

import click

from ckptool import __version__
from ckptool.cli.common import Settings, error, escape, warn
from ckptool.errors import CkptError, CkptWarning, UsageError

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
    "man": "man",
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
        if mod is None:
            return None
        from ckptool.cli.completion import attach

        return attach(name, with_global_flags(mod.command))

    def resolve_command(self, ctx, args):
        name = args[0] if args else ""
        if name and not name.startswith("-") and not ctx.resilient_parsing and self.get_command(ctx, name) is None:
            raise NoSuchCommand(name, self.list_commands(ctx))
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click turns EPIPE into exit 1; a closed pipe (`| head`) is not a failure
            raise _PipeClosed() from None


class _PipeClosed(Exception):
    pass


def nearest_command(name: str, names: list[str]) -> str | None:
    """The command ``name`` most likely meant: the closest spelling (``inpsect``), else the one
    command it begins (``list``), else None."""
    import difflib

    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return close[0]
    starting = [n for n in names if n.startswith(name)]
    return starting[0] if len(starting) == 1 else None


class NoSuchCommand(click.UsageError):
    """A misspelt subcommand: one ``ckptool: error:`` line naming the nearest command (exit 2)."""

    def __init__(self, name: str, names: list[str]):
        near = nearest_command(name, names)
        hint = f"did you mean {near!r}?" if near else "'ckptool --help' lists them"
        super().__init__(f"no command {name!r}; {hint}")

    def show(self, file=None) -> None:
        error(self.format_message())


#: The global flags: (declarations, Settings attribute, help). The group takes them before the
#: subcommand and every subcommand after it (`ckptool prune DIR -q` == `ckptool -q prune DIR`).
GLOBAL_FLAGS = (
    (("-q", "--quiet"), "quiet", "Print no status lines, warnings or progress: only data and errors."),
    (("-v", "--verbose"), "verbose", "Say more (prune: the plan and each setting's source, as --dry-run)."),
    (("--debug",), "debug", "Show a full traceback on error."),
    (("--no-color",), "no_color", "No colour, even on a terminal (as NO_COLOR)."),
)


def _set_flag(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        root = ctx.find_root()
        if not isinstance(root.obj, Settings):
            root.obj = Settings()
        setattr(root.obj, param.name, True)


def _global_options() -> list[click.Option]:
    return [click.Option([*decls, attr], is_flag=True, expose_value=False, is_eager=True, callback=_set_flag,
                         help=help) for decls, attr, help in GLOBAL_FLAGS]


def with_global_flags(command: click.Command) -> click.Command:
    """``command`` with the global flags among its options (added once: an option that sets a
    global flag says they are there)."""
    if not any(p.callback is _set_flag for p in command.params):
        command.params.extend(_global_options())
    return command


def _group_flags(f):
    for decls, attr, help in reversed(GLOBAL_FLAGS):
        f = click.option(*decls, attr, is_flag=True, expose_value=False, is_eager=True, callback=_set_flag,
                         help=help)(f)
    return f


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="ckptool", message="%(prog)s %(version)s")
@_group_flags
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Read, write, inspect, convert, prune and rename TensorFlow checkpoints, without TensorFlow.

    CHECKPOINT arguments accept a prefix (runs/ckpt-5), its .index or any
    .data-* file, a directory with a 'checkpoint' state file (its latest
    checkpoint), a directory holding one checkpoint, or a SavedModel directory.
    The options below work before and after the subcommand.
    """
    if not isinstance(ctx.obj, Settings):
        ctx.obj = Settings()
    _install_warning_printer()


def _install_warning_printer() -> None:
    def show(message, category, filename, lineno, file=None, line=None):
        warn(str(message))  # reads --quiet when the warning comes: the flag may follow the subcommand

    warnings.showwarning = show
    warnings.simplefilter("always", CkptWarning)


def main(argv=None) -> None:
    args = sys.argv[1:] if argv is None else argv
    settings = Settings(debug="--debug" in args)  # the parsed flags refine it
    if "_CKPTOOL_COMPLETE" in os.environ:  # a completion script asking (or its source wanted)
        from ckptool.cli.completion import register

        register()
    _on_sigterm()
    try:
        cli.main(args=args, prog_name="ckptool", standalone_mode=False, obj=settings)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("ckptool: aborted", err=True)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:
        # bare `ckptool` (or a group without its command): click's help text, as written, not an error line
        click.echo(exc.ctx.get_help(), err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        message = escape(exc.format_message())  # a value given on the command line may hold a newline
        exc.format_message = lambda: message  # type: ignore[method-assign]
        exc.show()
        sys.exit(exc.exit_code)
    except (BrokenPipeError, _PipeClosed):
        _quiet_broken_pipe()
    except KeyboardInterrupt:
        click.echo("ckptool: interrupted", err=True)
        sys.exit(130)
    except CkptError as exc:
        if settings.debug:
            raise
        error(str(exc))
        # a bad argument the library finds (a regex, a rule, a cast spec) is a usage error, as click's own
        sys.exit(2 if isinstance(exc, UsageError) else settings.error_status)
    except Failed as exc:
        if exc.message:
            error(exc.message)
        sys.exit(exc.status)
    except MemoryError as exc:  # an input that asks for more than the machine has: one line, never a traceback
        if settings.debug:
            raise
        error(f"out of memory{': ' + str(exc) if str(exc) else ''} (an input declaring more than this machine holds?)")
        sys.exit(settings.error_status)
    except OSError as exc:  # the file system is at fault: one line too (permissions, disk full, ...)
        if settings.debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        error(f"{where}{exc.strerror or exc}")
        sys.exit(settings.error_status)
    else:
        _flush_or_quiet()
    finally:
        from ckptool.io.safety.atomic import remove_live_temporaries

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
    """Raised by a command to exit ``status`` (1) after it has printed what went wrong;
    ``message``, if any, is printed as the error line."""

    def __init__(self, message: str = "", status: int = 1):
        super().__init__(message)
        self.message = message
        self.status = status


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
