"""Pieces shared by the commands: arguments, JSON output, terminal detection, formatting."""

from __future__ import annotations

import os
import sys

import click

from ckptool.format.objkeys import key_of, shown


def checkpoint_argument(name: str = "checkpoint", **kwargs):
    """A CHECKPOINT argument (completes to checkpoint prefixes, not data files)."""
    from ckptool.cli.completion import complete_checkpoint

    return click.argument(name, metavar=kwargs.pop("metavar", name.upper()), shell_complete=complete_checkpoint,
                          **kwargs)


def json_option(help: str = "Print one JSON document on stdout instead of text."):
    return click.option("--json", "as_json", is_flag=True, help=help)


def no_sync_option():
    return click.option("--no-sync", is_flag=True,
                        help="Skip the fsyncs before the renames (TF's behaviour): faster, but a power "
                             "cut may lose the output. For scratch outputs.")


#: The epilog of the commands that stream tensors from a checkpoint (with :func:`stream_jobs_option`).
REMOTE_READS = ("On an object store (s3://, gs://...), the tensors are fetched ahead: --jobs ranged GETs "
                "(default 8) of up to 8 MiB in flight, adjacent tensors in one GET, each byte once; memory "
                "is bounded by them (N x 8 MiB; 64 MiB by default). Local files are read as they are "
                "needed, on one thread; --jobs changes nothing there.")


def stream_jobs_option():
    """-j/--jobs of the commands that stream tensors (convert, average, diff, save, rewrite-names):
    requests in flight on an object store, nothing on local files."""
    return click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
                        help="On an object store (s3://, gs://...): at most N ranged GETs of up to 8 MiB "
                             "in flight (default 8), shared between the checkpoints read at once; memory "
                             "is bounded by them (N x 8 MiB). No effect on local files.")


def duration_callback(ctx, param, value):
    """A DURATION option (``--min-age 7d``: prune, du) as seconds; a bad one is a usage error."""
    if value is None:
        return None
    from ckptool.ops.retain.retention import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def given_policy(ctx: click.Context, **values) -> dict:
    """The policy flags of prune and du (``max_to_keep=...``): each value given on the command
    line, the others UNSET, so that a .ckptool.toml sets them before their defaults apply."""
    from ckptool.ops.retain.policy_args import UNSET

    return {name: value if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
            else UNSET for name, value in values.items()}


def jobs_option():
    return click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
                        help="Read and check on N threads (default: one per core; 1 on a disk "
                             "that is slow to seek). On an object store (s3://, gs://...): N ranged "
                             "GETs of up to 8 MiB in flight (default 8); memory is bounded by them "
                             "(N x 8 MiB).")


def emit_json(doc) -> None:
    """One JSON document on stdout. Names that are not valid UTF-8 (kept by the reader as
    surrogate escapes) are written as \\udcXX escapes, which Python's json reads back.
    JSON has no NaN or infinity: a non-finite float anywhere (``--atol inf``, say) is written
    as the string "NaN", "Infinity" or "-Infinity", as tensor values and diff's
    max_abs_diff are (protobuf's JSON mapping), so the document always parses."""
    from ckptool.cli.jsonout import dumps

    try:
        text = dumps(doc, ensure_ascii=False, default=_default)
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = dumps(doc, ensure_ascii=True, default=_default)
    click.echo(text)


def emit_json_rows(rows, texts=()) -> None:
    """``emit_json(list(rows))``, the same text, with memory for a few hundred rows, not every
    row (``inspect --stats --json`` of 300,000 tensors): rows are written as they come to a
    spool (in memory up to 2 MB, then a temporary file), copied to stdout once all are done,
    so that an error on the way prints nothing but the error, as emit_json does. ``texts``: every
    string the rows hold (their names): the escaping is chosen for the whole document up
    front, as emit_json chooses it."""
    import tempfile

    from ckptool.cli.jsonout import dumps

    try:
        for t in texts:
            t.encode("utf-8")
        ascii_only = False
    except UnicodeEncodeError:
        ascii_only = True
    with tempfile.SpooledTemporaryFile(max_size=2 << 20, mode="w+", encoding="utf-8") as spool:
        batch: list = []

        def flush() -> None:  # "[\n  row,\n  row\n]": its rows as the whole array's, at the same indent
            spool.write(("[\n" if not spool.tell() else ",\n")
                        + dumps(batch, ensure_ascii=ascii_only, default=_default)[2:-2])
            batch.clear()

        for row in rows:
            batch.append(row)
            if len(batch) >= 512:
                flush()
        if batch:
            flush()
        spool.write("\n]" if spool.tell() else "[]")
        spool.seek(0)
        while chunk := spool.read(1 << 20):
            click.echo(chunk, nl=False)
    click.echo("")


def _default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def color_enabled(stream=None) -> bool:
    """Colour only on a terminal, never with --no-color, NO_COLOR set (any value) or TERM=dumb."""
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not settings().no_color and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def style(text: str, **kw) -> str:
    """click.style when stdout takes colour, else the text unchanged."""
    return click.style(text, **kw) if color_enabled() else text


class Settings:
    """The global flags (-q, -v, --debug, --no-color), given before or after the subcommand."""

    def __init__(self, debug: bool = False, quiet: bool = False, verbose: bool = False, no_color: bool = False):
        self.debug = debug
        self.quiet = quiet
        self.verbose = verbose
        self.no_color = no_color
        #: the exit status of an error (a ckptool or OS error); diff makes it 2, as diff(1)
        self.error_status = 1


def settings() -> Settings:
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_root().obj if ctx is not None else None
    return obj if isinstance(obj, Settings) else _DEFAULT


_DEFAULT = Settings()


def quiet() -> bool:
    return settings().quiet


def verbose() -> bool:
    return settings().verbose


def escape(text) -> str:
    """``text`` safe for one line of human output: control characters escaped as ``ls -b``
    does (``\\n``, ``\\r``, ``\\x1b``, ...), bytes that are not UTF-8 (surrogate escapes) as
    ``\\xNN``, so a name or path from a file cannot forge a line or drive the terminal. The one
    escaping of every table, status line and error message; JSON output stays exact."""
    text = str(text)
    if text.isprintable():
        return text
    raw = shown(key_of(text))
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
                   for c in raw)


#: tensor names, as they have been escaped since the first release
display_name = escape


def note(message: str) -> None:
    """An informational line on stderr (status, totals, summaries); not shown with --quiet."""
    if not quiet():
        click.echo(escape(message), err=True)


def warn(message: str) -> None:
    """``ckptool: warning: ...`` on stderr; not shown with --quiet."""
    note(f"ckptool: warning: {message}")


def error(message: str) -> None:
    """``ckptool: error: ...``, one line on stderr (always, --quiet too)."""
    click.echo(f"ckptool: error: {escape(message)}", err=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and its noun, agreeing: '1 file', '2 files', '0 files' (``many`` for the irregular:
    plural(n, "entry", "entries")). Every count in human output goes through it."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def human_time(ts: float | None) -> str:
    """The one time format of human output: ISO 8601 UTC, one token (2026-12-02T19:06:35Z), as
    --json's "time"; "-" when there is none, the raw number when it names no representable time."""
    from ckptool.ops.inspect.summary import iso_time

    if ts is None:
        return "-"
    iso = iso_time(ts)
    return f"{ts!r} (not a valid time)" if iso is None else iso


def human_bytes(n: int | None) -> str:
    """The one size format of human output (1024-based: '973 B', '4.4 KiB'); --json has exact bytes."""
    if n is None:
        return "-"
    step = 1024.0
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < step or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= step
    return f"{n} B"  # pragma: no cover


def human_count(n: int) -> str:
    """1234567 -> '1.2M' (parameters); small numbers exactly."""
    if n < 10_000:
        return str(n)
    for unit, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)  # pragma: no cover


def format_shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
