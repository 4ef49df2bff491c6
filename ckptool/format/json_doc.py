"""The one reader and the one writer of every JSON document ckptool takes or writes whole.

Every JSON input (``--config``, ``--template-config``, ``--vocab encoder.json``,
``rewrite-names --map``, a ``.weights.json`` shard map, a ``.keras`` member, the prune
journal, the lock object, a safetensors header's metadata, a SavedModel's
``keras_metadata.pb``) is parsed by :func:`load_json`, which bounds what a hostile or
broken file can cost and turns every way it can be wrong into one :class:`CorruptError`
naming the file:

- **size**: at most ``max_bytes`` (the caller reads at most that many plus one);
- **depth**: at most :data:`MAX_DEPTH` nested arrays and objects (Python's own parser
  would raise ``RecursionError`` a thousand deep, or crash the C stack);
- **numbers**: an integer of at most :data:`MAX_INT_DIGITS` digits (a 400-digit one
  overflows every float it meets later); ``NaN``/``Infinity`` are taken as Python's
  ``json`` takes them;
- **strings**: text only: a lone surrogate (``"\\ud800"``) that no file could be written
  with is refused here, not by a ``UnicodeEncodeError`` when the value is written out.

A JSON Lines history is not read here: its lines are read one at a time by
:mod:`ckptool.format.jsonl`, which keeps only the top-level numbers.

:func:`dump_json` is the writer: UTF-8 bytes, a newline at the end, and a value that
cannot be written as UTF-8 (a tensor name kept as surrogate escapes) as one
:class:`CorruptError` naming the file.
"""

from __future__ import annotations

import json
from typing import Any

from ckptool.errors import CorruptError

#: The deepest nesting taken; Keras configs of nested models reach a few dozen.
MAX_DEPTH = 512
#: The longest integer taken, in digits (an int64 has 19).
MAX_INT_DIGITS = 100
#: The default bound of a document's size (a Keras config of a large application is ~1 MB).
DEFAULT_MAX_BYTES = 256 << 20


def _parse_int(text: str) -> int:
    digits = len(text) - (text[0] == "-")
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS} taken)")
    return int(text)


def _lone_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_tree(doc: Any) -> str | None:
    """What is wrong with a parsed document (too deep, a string that is not text), or None;
    walked with a stack of its own, never by recursion."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _lone_surrogate(value):
                return f"a string that is not text (a lone surrogate): {value[:40]!r}"
        elif isinstance(value, (list, dict)):
            if depth >= MAX_DEPTH:
                return f"nested over {MAX_DEPTH} deep"
            if isinstance(value, dict):
                for key, item in value.items():
                    if _lone_surrogate(key):
                        return f"a key that is not text (a lone surrogate): {key[:40]!r}"
                    stack.append((item, depth + 1))
            else:
                stack.extend((item, depth + 1) for item in value)
    return None


def load_json(data: bytes | bytearray | memoryview | str, where: str, *, max_bytes: int = DEFAULT_MAX_BYTES,
              what: str = "JSON") -> Any:
    """The document ``data`` holds, within the module's bounds, or a :class:`CorruptError`
    that begins with ``where`` (the file, or the file and its member) and says ``what`` it
    should have been (``"JSON"``, ``"a Keras config"``)."""
    if len(data) > max_bytes:
        raise CorruptError(f"{where}: over {max_bytes} bytes, more than {what} this tool takes")
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptError(f"{where}: not {what}: not UTF-8 at byte {exc.start}") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        doc = json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise CorruptError(f"{where}: not {what}: nested too deep") from None
    except json.JSONDecodeError as exc:
        raise CorruptError(f"{where}: not {what}: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:
        raise CorruptError(f"{where}: not {what}: {exc}") from None
    problem = _check_tree(doc)
    if problem is not None:
        raise CorruptError(f"{where}: not {what}: {problem}")
    return doc


def dump_json(doc: Any, where: str, *, indent: int | None = 2, sort_keys: bool = False,
              compact: bool = False) -> bytes:
    """``doc`` as UTF-8 JSON bytes ending in a newline (``compact``: no spaces, no newline,
    for a document read back only by ckptool); a value that cannot be UTF-8 (a name kept as
    surrogate escapes) raises a :class:`CorruptError` naming ``where``."""
    try:
        if compact:
            text = json.dumps(doc, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))
        else:
            text = json.dumps(doc, ensure_ascii=False, sort_keys=sort_keys, indent=indent) + "\n"
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[max(0, exc.start - 20):exc.end + 20] if isinstance(exc.object, str) else ""
        raise CorruptError(f"{where}: cannot be written: {bad!r} is not text (a name that is not UTF-8?)") from None
    except RecursionError:
        raise CorruptError(f"{where}: cannot be written: nested too deep") from None


__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "DEFAULT_MAX_BYTES", "load_json", "dump_json"]
