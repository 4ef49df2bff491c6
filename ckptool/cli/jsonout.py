"""JSON text for ``--json``, built without recursion.

``json.dumps(indent=2)`` runs Python's pure encoder, whose nested generators cost
time quadratic in the depth of a document and recurse once per level; an object
graph thousands of levels deep (``inspect --tree --json``) took seconds and needed
a raised recursion limit. :func:`dumps` walks the document with an explicit stack
and gives the same text as ``json.dumps(doc, indent=2)`` for documents up to
:data:`INDENT_DEPTH` levels; deeper documents come out on one line (indentation
alone would make the text grow with the square of the depth). Scalars go through
``json.dumps`` itself, so escaping and number formats are the standard library's.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

#: Documents nested deeper than this are written compactly (one line, ``, `` and ``: ``).
INDENT_DEPTH = 64


def depth_of(doc: Any) -> int:
    """Levels of nested lists and dicts in ``doc`` (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        elif not isinstance(node, (list, tuple)):
            continue
        deepest = max(deepest, level)
        stack.extend((c, level + 1) for c in node)
    return deepest


def dumps(doc: Any, *, ensure_ascii: bool, default: Callable[[Any], Any]) -> str:
    """``doc`` as JSON text; a non-finite float is the string "NaN", "Infinity" or
    "-Infinity" (JSON has no such numbers; protobuf's JSON mapping writes them so)."""
    indent = 2 if depth_of(doc) <= INDENT_DEPTH else None

    def scalar(value: Any) -> str:
        if isinstance(value, float) and not math.isfinite(value):
            value = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=False)

    def newline(level: int) -> str:
        return "" if indent is None else "\n" + " " * (indent * level)

    item_sep = ", " if indent is None else ","
    out: list[str] = []
    # Each frame: (iterator over the container's items, is_dict, level, closing bracket, first item?)
    stack: list[list[Any]] = []

    def open_container(value: Any, level: int) -> None:
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, dict):
            if not value:
                out.append("{}")
                return
            out.append("{")
            stack.append([iter(value.items()), True, level, "}", True])
        elif isinstance(value, list):
            if not value:
                out.append("[]")
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
