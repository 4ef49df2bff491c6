"""Progress bars: on stderr, only on a terminal, never with --quiet (rich imported only then)."""

from __future__ import annotations

import contextlib

from ckptool.cli.common import quiet, stderr_is_terminal


@contextlib.contextmanager
def progress_bar(description: str):
    """Yield a ``callback(done_bytes, total_bytes)``; draws a bar only when stderr is a terminal."""
    if quiet() or not stderr_is_terminal():
        yield _nothing
        return
    import os

    from rich.console import Console
    from rich.markup import escape as no_markup
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    from ckptool.cli.common import escape, settings

    description = no_markup(escape(description))  # a path is neither a line break nor rich markup
    console = Console(stderr=True, no_color="NO_COLOR" in os.environ or settings().no_color)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                   TransferSpeedColumn(), TimeRemainingColumn(), console=console, transient=True)
    task = bar.add_task(description, total=None)
    with bar:
        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _nothing(done: int, total: int) -> None:
    pass
