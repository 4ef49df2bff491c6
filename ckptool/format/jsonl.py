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
_CLOSE = {"[": "]", "{": "}"}


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


def _parse(s: str) -> dict[str, int | float | None]:
    pos = _WS.match(s, 0).end()  # type: ignore[union-attr]
    if s[pos:pos + 1] != "{":
        raise _Bad
    out: dict[str, int | float | None] = {}
    kinds, counts = ["{"], [1]  # the open containers, run-length: kinds[i] counts[i] times
    depth = 1
    pos += 1
    state = "key?"  # "key?" a key or '}', "key" a key, "value", "value?" a value or ']', "after"
    key = ""
    end = len(s)

    def push(kind: str, n: int) -> None:
        nonlocal depth
        if kinds[-1] == kind:
            counts[-1] += n
        else:
            kinds.append(kind)
            counts.append(n)
        depth += n

    def pop() -> None:
        nonlocal depth
        drop(1)

    def drop(n: int) -> None:
        nonlocal depth
        counts[-1] -= n
        if not counts[-1]:
            kinds.pop()
            counts.pop()
        depth -= n

    while depth:
        pos = _WS.match(s, pos).end()  # type: ignore[union-attr]
        if pos >= end:
            raise _Bad
        c = s[pos]
        top = kinds[-1]
        if state in ("key?", "key"):
            if c == "}" and state == "key?":
                pop()
                pos += 1
                state = "after"
                continue
            if c != '"':
                raise _Bad
            try:
                k, pos = scanstring(s, pos + 1, True)
            except ValueError:
                raise _Bad from None
            pos = _WS.match(s, pos).end()  # type: ignore[union-attr]
            if s[pos:pos + 1] != ":":
                raise _Bad
            pos += 1
            if depth == 1:
                key = k
            state = "value"
        elif state in ("value", "value?"):
            if c == "]" and state == "value?":
                pop()
                pos += 1
                state = "after"
                continue
            if top == "[":
                run = _ARRAY_RUN.match(s, pos)
                if run is not None:
                    pos, state = run.end(), "value"
                    continue
            if c == "[":
                run = _OPEN_RUN.match(s, pos)
                if depth == 1:
                    out[key] = None  # a later key wins, as in json.loads
                if run is not None:
                    push("[", run.group().count("["))
                    pos = run.end()
                else:
                    push("[", 1)
                    pos += 1
                state = "value?"
                continue
            if c == "{":
                if depth == 1:
                    out[key] = None
                push("{", 1)
                pos += 1
                state = "key?"
                continue
            value, pos = _scalar(s, pos)
            if depth == 1:
                out[key] = value
            state = "after"
        else:  # after a value
            if c == ",":
                pos += 1
                state = "value" if top == "[" else "key"
            elif c == "]" and top == "[":
                run = _CLOSE_RUN.match(s, pos)  # c is ']': at least one
                closers = run.group().count("]")  # type: ignore[union-attr]
                n = min(closers, counts[-1])  # the rest closes what lies below: the next turn checks it
                drop(n)
                if n == closers:
                    pos = run.end()  # type: ignore[union-attr]
                else:
                    pos = next(itertools.islice(_CLOSER.finditer(s, pos), n - 1, None)).end()
            elif c == "}" and top == "{":
                pop()
                pos += 1
            else:
                raise _Bad
    if _WS.match(s, pos).end() != end:  # type: ignore[union-attr]
        raise _Bad
    return out


__all__ = ["top_level_numbers"]
