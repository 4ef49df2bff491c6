"""The top-level numbers of one JSON Lines record, read without building the rest.

``json.loads`` of a 24 MB line that holds, say, a list of a few million numbers
builds every one of them as a Python object: hundreds of MB for a line whose only
use is ``{"step": N, "loss": x}``. :func:`top_level_numbers` checks the whole line
as ``json.loads`` does (strings with the C ``scanstring``, numbers with its grammar,
``NaN``/``Infinity`` accepted, brackets matched, one object and nothing after it) but
keeps only the values of the top-level object: numbers as ``json.loads`` gives them,
anything else (strings, ``true``, ``null``, arrays, objects) as None. Memory: the
line and one decoded string at a time. Nested containers are matched without
recursion (``json.loads`` would give up on a line nested thousands deep; this
accepts it). Pure: text in, values out.
"""

from __future__ import annotations

import itertools
import re
import sys
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner json.loads uses

from ckptool.format.json_numbers import INFINITY, NAN, NEG_INFINITY

_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": None, "false": None, "null": None, NAN: float("nan"), INFINITY: float("inf"),
             NEG_INFINITY: float("-inf")}


class _Bad(Exception):
    pass


def _number(s: str, pos: int) -> tuple[int | float, int] | None:
    m = _NUMBER.match(s, pos)
    if m is None:
        return None
    integer, frac, exp = m.groups()
    if frac or exp:
        return float(integer + (frac or "") + (exp or "")), m.end()
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    if limit and len(integer.lstrip("-")) > limit:
        raise _Bad  # json.loads refuses it too (ValueError)
    return int(integer), m.end()


def _scalar(s: str, pos: int) -> tuple[int | float | None, int]:
    """A value that is not a container at ``s[pos]``: ``(number or None, end)``."""
    c = s[pos:pos + 1]
    if c == '"':
        try:
            _, end = scanstring(s, pos + 1, True)
        except ValueError:
            raise _Bad from None
        return None, end
    for word, value in _LITERALS.items():
        if s.startswith(word, pos):
            return value, pos + len(word)
    found = _number(s, pos)
    if found is None:
        raise _Bad
    return found


def top_level_numbers(line: str) -> dict[str, int | float | None] | None:
    """``{key: number or None}`` of the JSON object ``line`` (a later key wins, as in
    ``json.loads``), or None when the line is no JSON object."""
    try:
        return _parse(line)
    except (_Bad, IndexError):
        return None


#: Runs the parser takes with one regex match (bounded, so the regex engine's memory is too):
#: scalar elements of an array, each with its comma; opening and closing brackets.
_ARRAY_RUN = re.compile(r"(?:[ \t\n\r]*(?:-?(?:0|[1-9][0-9]{0,3000})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
                        r"|true|false|null|NaN|-?Infinity)[ \t\n\r]*,){1,4096}")
_OPEN_RUN = re.compile(r"(?:\[[ \t\n\r]*){2,4096}")
_CLOSE_RUN = re.compile(r"(?:\][ \t\n\r]*){1,4096}")
_CLOSER = re.compile(r"\]")


class _Open:
    """The containers open at a point of the line, run-length: ``kinds[i]`` (``"["`` or
    ``"{"``) opened ``counts[i]`` times in a row, so that a line nested thousands deep costs
    a few entries; ``depth`` is their number. The line's own object is the first."""

    __slots__ = ("kinds", "counts", "depth")

    def __init__(self) -> None:
        self.kinds, self.counts, self.depth = ["{"], [1], 1

    def top(self) -> str:
        return self.kinds[-1]

    def push(self, kind: str, n: int) -> None:
        if self.kinds[-1] == kind:
            self.counts[-1] += n
        else:
            self.kinds.append(kind)
            self.counts.append(n)
        self.depth += n

    def drop(self, n: int) -> None:
        """Close ``n`` of the innermost run (at most its count)."""
        self.counts[-1] -= n
        if not self.counts[-1]:
            self.kinds.pop()
            self.counts.pop()
        self.depth -= n


#: The parser's states: a key or '}' (``_KEY_OR_END``), a key, a value, a value or ']'
#: (``_VALUE_OR_END``), and what follows a value (``_AFTER``).
_KEY_OR_END, _KEY, _VALUE, _VALUE_OR_END, _AFTER = "key?", "key", "value", "value?", "after"


def _parse(s: str) -> dict[str, int | float | None]:
    pos = _WS.match(s, 0).end()  # type: ignore[union-attr]
    if s[pos:pos + 1] != "{":
        raise _Bad
    out: dict[str, int | float | None] = {}
    opened = _Open()
    pos += 1
    state = _KEY_OR_END
    key = ""  # the top-level key whose value comes next
    end = len(s)
    while opened.depth:
        pos = _WS.match(s, pos).end()  # type: ignore[union-attr]
        if pos >= end:
            raise _Bad
        if state in (_KEY_OR_END, _KEY):
            pos, state, key = _key(s, pos, state, opened, key)
        elif state in (_VALUE, _VALUE_OR_END):
            pos, state = _value(s, pos, state, opened, key, out)
        else:
            pos, state = _after(s, pos, opened)
    if _WS.match(s, pos).end() != end:  # type: ignore[union-attr]
        raise _Bad
    return out


def _key(s: str, pos: int, state: str, opened: _Open, key: str) -> tuple[int, str, str]:
    """A key and its colon (or, in ``_KEY_OR_END``, the '}' of an empty object) at ``s[pos]``:
    ``(end, next state, the top-level key)``."""
    c = s[pos]
    if c == "}" and state == _KEY_OR_END:
        opened.drop(1)
        return pos + 1, _AFTER, key
    if c != '"':
        raise _Bad
    try:
        k, pos = scanstring(s, pos + 1, True)
    except ValueError:
        raise _Bad from None
    pos = _WS.match(s, pos).end()  # type: ignore[union-attr]
    if s[pos:pos + 1] != ":":
        raise _Bad
    return pos + 1, _VALUE, (k if opened.depth == 1 else key)


def _value(s: str, pos: int, state: str, opened: _Open, key: str,
           out: dict[str, int | float | None]) -> tuple[int, str]:
    """A value at ``s[pos]`` (or, in ``_VALUE_OR_END``, the ']' of an empty array): a run of an
    array's scalars at once, a container opened (runs of '[' at once), or one scalar; a value
    of the top-level object goes into ``out`` (a container's as None; a later key wins, as in
    json.loads). ``(end, next state)``."""
    c = s[pos]
    if c == "]" and state == _VALUE_OR_END:
        opened.drop(1)
        return pos + 1, _AFTER
    if opened.top() == "[":
        run = _ARRAY_RUN.match(s, pos)
        if run is not None:
            return run.end(), _VALUE
    if c == "[":
        run = _OPEN_RUN.match(s, pos)
        if opened.depth == 1:
            out[key] = None
        if run is not None:
            opened.push("[", run.group().count("["))
            return run.end(), _VALUE_OR_END
        opened.push("[", 1)
        return pos + 1, _VALUE_OR_END
    if c == "{":
        if opened.depth == 1:
            out[key] = None
        opened.push("{", 1)
        return pos + 1, _KEY_OR_END
    value, pos = _scalar(s, pos)
    if opened.depth == 1:
        out[key] = value
    return pos, _AFTER


def _after(s: str, pos: int, opened: _Open) -> tuple[int, str]:
    """What follows a value at ``s[pos]``: a comma, or the brackets that close (runs of ']' at
    once: those of the innermost run; the rest closes what lies below, checked next turn)."""
    c = s[pos]
    top = opened.top()
    if c == ",":
        return pos + 1, (_VALUE if top == "[" else _KEY)
    if c == "]" and top == "[":
        run = _CLOSE_RUN.match(s, pos)  # c is ']': at least one
        closers = run.group().count("]")  # type: ignore[union-attr]
        n = min(closers, opened.counts[-1])
        opened.drop(n)
        if n == closers:
            return run.end(), _AFTER  # type: ignore[union-attr]
        return next(itertools.islice(_CLOSER.finditer(s, pos), n - 1, None)).end(), _AFTER
    if c == "}" and top == "{":
        opened.drop(1)
        return pos + 1, _AFTER
    raise _Bad


__all__ = ["top_level_numbers"]
