"""Pieces shared by the commands: arguments, JSON output, terminal detection."""

from __future__ import annotations

import json
import os
import sys

import click


def checkpoint_argument(name: str = "checkpoint", **kwargs):
    """A CHECKPOINT argument (completes to checkpoint prefixes, not data files)."""
    from .completion import complete_checkpoint

    return click.argument(name, metavar=name.upper(), shell_complete=complete_checkpoint, **kwargs)


def json_option(help: str = "Print one JSON document on stdout instead of text."):
    return click.option("--json", "as_json", is_flag=True, help=help)


def emit_json(doc) -> None:
    click.echo(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False, default=_default))


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
    stream = stream or sys.stdout
    return stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def settings():
    ctx = click.get_current_context()
    return ctx.find_root().obj


def human_bytes(n: int) -> str:
    step = 1024.0
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < step or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= step
    return f"{n} B"  # pragma: no cover


def format_shape(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"
