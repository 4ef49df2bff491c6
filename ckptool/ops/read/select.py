"""Name filters shared by the commands: globs (any of several) and a regex."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable

from ckptool.errors import UsageError


def compile_filter(globs: Iterable[str] = (), regex: str | None = None) -> Callable[[str], bool]:
    """A predicate: the name matches one of ``globs`` (if any) and ``regex`` (if given)."""
    pats = [re.compile(fnmatch.translate(g)) for g in globs]
    try:
        rx = re.compile(regex) if regex else None
    except (re.error, OverflowError, RecursionError) as exc:  # '[', 'a{99999999999}', '((((...'
        raise UsageError(f"--regex {regex!r}: bad regular expression: {exc}") from None

    def keep(name: str) -> bool:
        if pats and not any(p.match(name) for p in pats):
            return False
        return rx is None or rx.search(name) is not None

    return keep
