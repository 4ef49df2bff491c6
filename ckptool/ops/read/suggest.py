""""Did you mean": the names of a checkpoint closest to a tensor name that is not in it. The one
place that decides a suggestion (every command's NAME arguments and the API's ``read``/``variable``
raise :func:`tensor_not_found`; rules that match nothing use :class:`Suggester` and :func:`listed`).

A :class:`Suggester` indexes the names once (by plain name, letter case, last part, and in sorted
order forwards and backwards); each question is then a few dict probes and a comparison with a few
dozen neighbours, never a pass over every name: 3,000 rules that miss in a checkpoint of 300,000
names ask 3 questions (the others are counted, :func:`listed`), each in microseconds."""

from __future__ import annotations

import bisect
import difflib
import heapq
import re
from collections.abc import Iterable, Sequence

from ckptool.errors import TensorNotFoundError
from ckptool.format.objkeys import ATTRIBUTES, VARIABLE_VALUE

#: what object-based checkpoints append to a variable's path (``save_counter`` is stored as this)
VALUE_SUFFIX = f"/{ATTRIBUTES}/{VARIABLE_VALUE}"

#: at most this many names are suggested at once
MAX_SUGGESTIONS = 3
#: an error about many names (rules that match nothing, template variables not filled) shows
#: this many, with their suggestions, and counts the rest
MAX_SHOWN = 3
#: a name shown in such a message is cut to this many characters
MAX_SHOWN_CHARS = 200
#: up to this many names, a typo is looked for among all of them (difflib, as before the index)
SCAN_ALL = 2000
#: else among this many neighbours on each side, in sorted order forwards and backwards (a typo
#: keeps the part before it, or the part after it)
NEIGHBOURS = 24


def plain(name: str) -> str:
    """``name`` without the object-based value suffix (``dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``
    -> ``dense/kernel``); other names as they are."""
    return name[: -len(VALUE_SUFFIX)] if name.endswith(VALUE_SUFFIX) and len(name) > len(VALUE_SUFFIX) else name


class Suggester:
    """The names of a checkpoint, indexed to answer :meth:`closest` without reading them all."""

    def __init__(self, names: Iterable[str]):
        self.by_plain: dict[str, list[str]] = {}
        for n in names:
            self.by_plain.setdefault(plain(n), []).append(n)
        self._folded: dict[str, list[str]] | None = None
        self._last: dict[str, list[str]] | None = None
        self._bare: dict[str, list[str]] | None = None
        self._sorted: tuple[list[str], list[str]] | None = None

    def _names(self, plains: Iterable[str]) -> list[str]:
        return [n for p in plains for n in self.by_plain[p]][:MAX_SUGGESTIONS]

    def closest(self, name: str) -> list[str]:
        """The names a user who typed ``name`` most likely meant, best first (at most
        :data:`MAX_SUGGESTIONS`; none when nothing is close). In order of preference: the same
        variable in the other naming (``save_counter`` <-> ``save_counter/.ATTRIBUTES/VARIABLE_VALUE``),
        the same name in other letter case, names whose last parts are ``name`` (``kernel`` ->
        ``dense/kernel``), names that differ only in punctuation and case (``model/v/1`` ->
        ``model/v1``), then the name closest by difflib's ratio (a typo), compared without the
        value suffix."""
        by_plain = self.by_plain
        want = plain(name.strip().rstrip("/")) or name
        if want in by_plain and want != name:
            return sorted(by_plain[want], key=len)[:MAX_SUGGESTIONS]
        if self._folded is None:
            self._folded = {}
            for p in by_plain:
                self._folded.setdefault(p.casefold(), []).append(p)
        folded = self._folded.get(want.casefold())
        if folded:
            return self._names(sorted(folded))
        if self._last is None:
            self._last = {}
            for p in by_plain:
                self._last.setdefault(p.rsplit("/", 1)[-1], []).append(p)
        ending = "/" + want
        tail = [p for p in self._last.get(want.rsplit("/", 1)[-1], ()) if p.endswith(ending)]
        if tail:
            return self._names(heapq.nsmallest(MAX_SUGGESTIONS, tail, key=lambda p: (len(p), p)))
        if self._bare is None:
            self._bare = {}
            for p in by_plain:
                self._bare.setdefault(_bare(p), []).append(p)
        bare = self._bare.get(_bare(want))
        if bare:
            return self._names(sorted(bare, key=lambda p: (len(p), p)))
        close = difflib.get_close_matches(want, self._typo_candidates(want), n=1, cutoff=0.6)  # the one best
        return self._names(close)

    def _typo_candidates(self, want: str) -> Sequence[str]:
        if len(self.by_plain) <= SCAN_ALL:
            return list(self.by_plain)
        if self._sorted is None:
            self._sorted = (sorted(self.by_plain), sorted(p[::-1] for p in self.by_plain))
        forward, backward = self._sorted
        out: dict[str, None] = {}
        for ordered, key, flip in ((forward, want, False), (backward, want[::-1], True)):
            i = bisect.bisect_left(ordered, key)
            for p in ordered[max(0, i - NEIGHBOURS):i + NEIGHBOURS]:
                out[p[::-1] if flip else p] = None
        return list(out)


_PUNCTUATION = re.compile(r"[\W_]+")


def _bare(name: str) -> str:
    """``name`` in lower case without punctuation (``Model/V_1`` -> ``modelv1``)."""
    return _PUNCTUATION.sub("", name.casefold())


def did_you_mean(name: str, names: Iterable[str] | Suggester) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``), or ``""`` when nothing is close."""
    close = (names if isinstance(names, Suggester) else Suggester(names)).closest(name)
    return _did_you_mean(close)


def _did_you_mean(close: list[str]) -> str:
    if not close:
        return ""
    quoted = [repr(shorten(c)) for c in close]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"


def shorten(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text``, or its first ``limit`` characters and how many more there are."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


def listed(shown: Sequence[str], total: int, sep: str = ", ") -> str:
    """``a, b, c`` (the items ``shown``, the first few of ``total``), then ``and 2,997 more``:
    an error about thousands of names stays one short line (cut long names with :func:`shorten`)."""
    rest = total - len(shown)
    return sep.join(shown) + (f" and {rest:,} more" if rest > 0 else "")


def tensor_not_found(prefix: str, name: str, names: Iterable[str]) -> TensorNotFoundError:
    """The error for a tensor ``name`` that checkpoint ``prefix`` does not hold, with the names
    it most likely meant in its message and in ``.suggestions``."""
    close = Suggester(names).closest(name)
    return TensorNotFoundError(f"{prefix}: tensor {name!r} not found in checkpoint{_did_you_mean(close)}",
                               name=name, suggestions=close)
