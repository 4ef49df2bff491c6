"""Name filters shared by the commands: globs (any of several), a regex, globs to leave out;
and the one rule for a filter that selects nothing (an error, not an empty result)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence

from ckptool.errors import CkptError, UsageError


def compile_filter(globs: Iterable[str] = (), regex: str | None = None,
                   exclude: Iterable[str] = ()) -> Callable[[str], bool]:
    """A predicate: the name matches one of ``globs`` (if any) and ``regex`` (if given), and none
    of ``exclude``. Globs are fnmatch's, case-sensitive, matching the whole name."""
    pats = [re.compile(fnmatch.translate(g)) for g in globs]
    outs = [re.compile(fnmatch.translate(g)) for g in exclude]
    try:
        rx = re.compile(regex) if regex else None
    except (re.error, OverflowError, RecursionError) as exc:  # '[', 'a{99999999999}', '((((...'
        raise UsageError(f"--regex {regex!r}: bad regular expression: {exc}") from None

    def keep(name: str) -> bool:
        if pats and not any(p.match(name) for p in pats):
            return False
        if any(p.match(name) for p in outs):
            return False
        return rx is None or rx.search(name) is not None

    return keep


def filter_words(globs: Sequence[str] = (), regex: str | None = None, exclude: Sequence[str] = (),
                 drop: Sequence[str] = (), strip_optimizer: bool = False) -> str:
    """The options of a filter as the user gave them: ``--match 'a*' --exclude 'b'``."""
    words = [f"--match {g!r}" for g in globs] + ([f"--regex {regex!r}"] if regex else [])
    words += [f"--exclude {g!r}" for g in exclude] + [f"--drop {g!r}" for g in drop]
    return " ".join(words + ["--strip-optimizer"] * strip_optimizer)


def nothing_selected(source: str, total: int, words: str, what: str = "tensor", verb: str = "selects",
                     writes: bool = False) -> CkptError:
    """The error of a filter that leaves none of ``source``'s ``total`` names (exit 1, nothing
    written): a filter that selects nothing is a mistake (a typo, a wrong prefix) far more often
    than a wish for an empty result, so convert, diff, rewrite-names and list-variables refuse it
    rather than write or print nothing and succeed. ``verb``: "leaves" for filters that drop;
    ``writes``: the operation would have written, and says it did not."""
    many = what if total == 1 else f"{what}s"
    return CkptError(f"{words} {verb} none of the {total} {many} of {source}" + " (nothing written)" * writes)


def select(names: Iterable[str], source: str, globs: Sequence[str] = (), regex: str | None = None,
           exclude: Sequence[str] = (), what: str = "tensor", writes: bool = False) -> list[str]:
    """The names ``compile_filter`` keeps, in their order; :func:`nothing_selected` raised when a
    filter is given and keeps none of them (a source without names is not an error)."""
    names = list(names)
    keep = compile_filter(globs, regex, exclude)
    kept = [n for n in names if keep(n)]
    if names and not kept and (globs or regex or exclude):
        raise nothing_selected(source, len(names), filter_words(globs, regex, exclude), what, writes=writes)
    return kept
