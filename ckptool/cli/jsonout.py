"""JSON text for ``--json``, built without recursion.

``json.dumps(indent=2)`` runs Python's pure encoder, whose nested generators cost
time quadratic in the depth of a document and recurse once per level; an object
graph thousands of levels deep (``inspect --tree --json``) took seconds and needed
a raised recursion limit. :func:`dumps` walks the document with an explicit stack
and gives the same text as ``json.dumps(doc, indent=2)`` for documents up to
:data:`INDENT_DEPTH` levels; deeper documents come out on one line (indentation
alone would make the text grow with the square of the depth). Scalars are written
by the standard library's own functions (its C string escapers, ``float.__repr__``,
``int.__repr__``), as ``json.dumps`` writes them, without building an encoder for each.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from ckptool.format.json_numbers import nonfinite_text

#: Documents nested deeper than this are written compactly (one line, ``, `` and ``: ``).
INDENT_DEPTH = 64


class _TooDeep(Exception):
    pass


#: The types written by :func:`scalar` as they are (exact types: subclasses go the long way).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def dumps(doc: Any, *, ensure_ascii: bool, default: Callable[[Any], Any]) -> str:
    """``doc`` as JSON text; a non-finite float is the string "NaN", "Infinity" or
    "-Infinity" (JSON has no such numbers; protobuf's JSON mapping writes them so)."""
    try:
        return _dumps(doc, 2, ensure_ascii, default)
    except _TooDeep:  # found on the way down: no pass over the document beforehand
        return _dumps(doc, None, ensure_ascii, default)


def _dumps(doc: Any, indent: int | None, ensure_ascii: bool, default: Callable[[Any], Any]) -> str:
    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    float_text, int_text, isfinite = float.__repr__, int.__repr__, math.isfinite
    plain = _PLAIN

    def scalar(value: Any) -> str:
        # The order of json's own encoder: str, None, True, False, int, float.
        if isinstance(value, str):
            return quote(value)
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, int):
            return int_text(value)
        if isfinite(value):
            return float_text(value)
        return '"' + nonfinite_text(value) + '"'

    def newline(level: int) -> str:
        return "" if indent is None else "\n" + " " * (indent * level)

    item_sep = ", " if indent is None else ","
    out: list[str] = []
    # Each frame: (iterator over the container's items, is_dict, level, closing bracket, first item?)
    stack: list[list[Any]] = []

    # Containers of scalars (and dicts of scalars and such lists: a row of --stats, a
    # tensor's listing) are written in one join each, not item by item on the stack.
    def flat_list(value: list, level: int) -> str:
        if not value:
            return "[]"
        pad = newline(level + 1)
        return "[" + item_sep.join([pad + scalar(v) for v in value]) + newline(level) + "]"

    def flat_dict(value: dict, level: int) -> str | None:
        parts = []
        pad = newline(level + 1)
        for k, v in value.items():
            if type(k) is not str:
                return None
            t = type(v)
            if t in plain:
                parts.append(pad + quote(k) + ": " + scalar(v))
            elif t is list and not too_deep(level + 1) and all(type(x) in plain for x in v):
                parts.append(pad + quote(k) + ": " + flat_list(v, level + 1))
            else:
                return None
        return "{" + item_sep.join(parts) + newline(level) + "}"

    def too_deep(level: int) -> bool:
        return indent is not None and level >= INDENT_DEPTH

    def open_container(value: Any, level: int) -> None:
        if too_deep(level):
            raise _TooDeep
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, dict):
            if not value:
                out.append("{}")
                return
            text = flat_dict(value, level)
            if text is not None:
                out.append(text)
                return
            out.append("{")
            stack.append([iter(value.items()), True, level, "}", True])
        elif isinstance(value, list):
            if not value:
                out.append("[]")
                return
            if all(type(v) in plain for v in value):
                out.append(flat_list(value, level))
                return
            out.append("[")
            stack.append([iter(value), False, level, "]", True])
        else:
            emit(value, level)

    def emit(value: Any, level: int) -> None:
        if isinstance(value, (dict, list, tuple)):
            open_container(value, level)
        elif value is None or isinstance(value, (str, int, float, bool)):
            out.append(scalar(value))
        else:
            emit(default(value), level)  # numpy scalars and the like: one level, never a container loop

    emit(doc, 0)
    while stack:
        frame = stack[-1]
        items, is_dict, level, close, first = frame
        item: Any = next(items, _END)
        if item is _END:
            stack.pop()
            out.append(newline(level) + close)
            continue
        if not first:
            out.append(item_sep)
        frame[4] = False
        out.append(newline(level + 1))
        if is_dict:
            key, value = item
            if not isinstance(key, str):  # the standard library's coercion of a key
                key = next(iter(json.loads(json.dumps({key: None}))))
            out.append(scalar(key) + ": ")
        else:
            value = item
        emit(value, level + 1)
    return "".join(out)


_END = object()
