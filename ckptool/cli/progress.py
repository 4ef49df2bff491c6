"""Progress on a terminal: the one progress API of the CLI.

A command wraps its ops call in :func:`progress_bar` and passes the callback it
yields as the ops function's ``progress`` parameter; the ops function calls
``progress(done, total)`` as it goes (bytes, or with ``unit="items"`` a count:
checkpoints, files). The bar goes to stderr, only when stderr is a terminal and
never with ``--quiet``; it appears at the first call (so an operation that
fails or waits first shows nothing, and a line printed before, such as a
lock-wait notice, is not drawn over) and disappears when done. rich is
imported only when a bar is drawn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ckptool.cli.common import quiet, stderr_is_terminal

Progress = Callable[[int, int], None]


@contextlib.contextmanager
def progress_bar(description: str, unit: str = "bytes") -> Iterator[Progress]:
    """Yield a ``callback(done, total)`` (``unit``: "bytes" or "items"); a bar only on a terminal."""
    if quiet() or not stderr_is_terminal():
        yield _nothing
        return
    bar = _Bar(description, unit)
    try:
        yield bar.update
    finally:
        bar.close()


class _Bar:
    def __init__(self, description: str, unit: str):
        self.description = description
        self.unit = unit
        self.progress: Any = None
        self.task: Any = None

    def _start(self) -> None:
        import os

        from rich.console import Console
        from rich.markup import escape as no_markup
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        from ckptool.cli.common import escape, settings

        description = no_markup(escape(self.description))  # a path is neither a line break nor rich markup
        console = Console(stderr=True, no_color="NO_COLOR" in os.environ or settings().no_color)
        columns: list[Any] = [TextColumn("{task.description}"), BarColumn()]
        if self.unit == "items":
            columns += [MofNCompleteColumn(), TimeRemainingColumn()]
        else:
            columns += [DownloadColumn(binary_units=True), TransferSpeedColumn(), TimeRemainingColumn()]
        self.progress = Progress(*columns, console=console, transient=True)
        self.task = self.progress.add_task(description, total=None)
        self.progress.start()

    def update(self, done: int, total: int) -> None:
        if self.progress is None:
            self._start()
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def increments(update: Progress, total: int) -> Callable[[int], None]:
    """For an ops function that reports increments (``on_bytes(n)``): ``update(done, total)``
    with the running sum."""
    done = 0

    def add(n: int) -> None:
        nonlocal done
        done += n
        update(done, total)
    return add


def _nothing(done: int, total: int) -> None:
    pass
