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
    return _Writer(indent, ensure_ascii, default).dumps(doc)


def _scalar_writer(quote: Callable[[str], str]) -> Callable[[Any], str]:
    """The text of a str, None, bool, int or float, as json's own encoder writes it (in its
    order: str, None, True, False, int, float; a non-finite float as its string)."""
    float_text, int_text, isfinite = float.__repr__, int.__repr__, math.isfinite

    def scalar(value: Any) -> str:
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

    return scalar


class _Writer:
    """One document's text: containers opened on an explicit stack (one frame per open
    container: its items' iterator, whether it is a dict, its level, its closing bracket,
    whether its first item is still to come), written into ``out``."""

    def __init__(self, indent: int | None, ensure_ascii: bool, default: Callable[[Any], Any]) -> None:
        self.indent = indent
        self.quote = encode_basestring_ascii if ensure_ascii else encode_basestring
        self.scalar = _scalar_writer(self.quote)
        self.default = default
        self.item_sep = ", " if indent is None else ","
        self.out: list[str] = []
        self.stack: list[list[Any]] = []

    def newline(self, level: int) -> str:
        return "" if self.indent is None else "\n" + " " * (self.indent * level)

    def too_deep(self, level: int) -> bool:
        return self.indent is not None and level >= INDENT_DEPTH

    # Containers of scalars (and dicts of scalars and such lists: a row of --stats, a
    # tensor's listing) are written in one join each, not item by item on the stack.
    def flat_list(self, value: list, level: int) -> str:
        if not value:
            return "[]"
        pad, scalar = self.newline(level + 1), self.scalar
        return "[" + self.item_sep.join([pad + scalar(v) for v in value]) + self.newline(level) + "]"

    def flat_dict(self, value: dict, level: int) -> str | None:
        """The dict in one piece, or None when a key is no str or a value is no scalar or flat list."""
        parts = []
        pad, quote, scalar, plain = self.newline(level + 1), self.quote, self.scalar, _PLAIN
        for k, v in value.items():
            if type(k) is not str:
                return None
            t = type(v)
            if t in plain:
                parts.append(pad + quote(k) + ": " + scalar(v))
            elif t is list and not self.too_deep(level + 1) and all(type(x) in plain for x in v):
                parts.append(pad + quote(k) + ": " + self.flat_list(v, level + 1))
            else:
                return None
        return "{" + self.item_sep.join(parts) + self.newline(level) + "}"

    def open_container(self, value: Any, level: int) -> None:
        """Write ``value`` whole when it is flat, else its opening bracket and a frame for its items."""
        if self.too_deep(level):
            raise _TooDeep
        if isinstance(value, tuple):
            value = list(value)
        out = self.out
        if isinstance(value, dict):
            if not value:
                out.append("{}")
                return
            text = self.flat_dict(value, level)
            if text is not None:
                out.append(text)
                return
            out.append("{")
            self.stack.append([iter(value.items()), True, level, "}", True])
        elif isinstance(value, list):
            if not value:
                out.append("[]")
                return
            if all(type(v) in _PLAIN for v in value):
                out.append(self.flat_list(value, level))
                return
            out.append("[")
            self.stack.append([iter(value), False, level, "]", True])
        else:
            self.emit(value, level)

    def emit(self, value: Any, level: int) -> None:
        if isinstance(value, (dict, list, tuple)):
            self.open_container(value, level)
        elif value is None or isinstance(value, (str, int, float, bool)):
            self.out.append(self.scalar(value))
        else:
            self.emit(self.default(value), level)  # numpy scalars and the like: one level, never a container loop

    def dumps(self, doc: Any) -> str:
        """The text of ``doc``: the next item of the innermost open container, until none is open."""
        out, stack, scalar, newline, item_sep = self.out, self.stack, self.scalar, self.newline, self.item_sep
        self.emit(doc, 0)
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
            self.emit(value, level + 1)
        return "".join(out)


_END = object()
