"""The keys of object-based checkpoints: ``<escaped object path>/.ATTRIBUTES/<attribute>``
(optimizer slots under ``.OPTIMIZER_SLOT``), and TF's escaping of local names
(docs/FORMAT.md §7)."""

from __future__ import annotations

import re

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
ATTRIBUTES = ".ATTRIBUTES"
OPTIMIZER_SLOT = ".OPTIMIZER_SLOT"
VARIABLE_VALUE = "VARIABLE_VALUE"


def name_of(key: bytes) -> str:
    """A tensor's name from its key in a table: UTF-8, with any byte that is not kept as a
    surrogate escape, so that :func:`key_of` gives the very key back."""
    return key.decode("utf-8", "surrogateescape")


def key_of(name: str) -> bytes:
    """The table key of a tensor name (the inverse of :func:`name_of`)."""
    return name.encode("utf-8", "surrogateescape")


def shown(key: bytes | str) -> str:
    """A tensor key (or name) as text for a message: bytes that are not UTF-8 as ``\\xNN``."""
    return (key_of(key) if isinstance(key, str) else key).decode("utf-8", "backslashreplace")


def escape(name: str) -> str:
    """trackable_utils.escape_local_name: '.' -> '..', '/' -> '.S'."""
    return name.replace(".", "..").replace("/", ".S")


def unescape(name: str) -> str:
    """The inverse of :func:`escape`: '..' -> '.', '.S' -> '/'; a '.' before any other character
    (or last) stays as it is."""
    if "." not in name:  # most names: nothing escaped
        return name
    return _ESCAPED.sub(_unescaped, name)


_ESCAPED = re.compile(r"\.(.)", re.DOTALL)


def _unescaped(m: re.Match[str]) -> str:
    c = m[1]
    return "." if c == "." else "/" if c == "S" else m[0]


def parse_object_key(key: str) -> tuple[tuple[str, ...], str, tuple[tuple[str, ...], str] | None] | None:
    """Split an object-based key into (object path, attribute name, slot).

    The object path is a tuple of unescaped local names; ``slot`` is None, or
    ``(optimizer path, slot name)`` for an optimizer slot key, whose object path
    is then the original variable's. None when ``key`` is not of the form
    ``<escaped path>/.ATTRIBUTES/<escaped attribute>``.
    """
    if key.startswith("\0"):  # an encoded slice key (docs/FORMAT.md §4.4), not a name
        return None
    parts = key.split("/")
    if len(parts) < 2 or parts[-2] != ATTRIBUTES or not parts[-1] or ATTRIBUTES in parts[:-2]:
        return None
    attr = unescape(parts[-1])
    comps = parts[:-2]
    if any(not c for c in comps):
        return None
    if OPTIMIZER_SLOT in comps:
        i = comps.index(OPTIMIZER_SLOT)
        var, rest = comps[:i], comps[i + 1:]
        if not var or len(rest) < 2 or OPTIMIZER_SLOT in rest:
            return None
        return (tuple(unescape(c) for c in var), attr,
                (tuple(unescape(c) for c in rest[:-1]), unescape(rest[-1])))
    return tuple(unescape(c) for c in comps), attr, None


def is_object_key(key: str) -> bool:
    """Whether ``key`` names an attribute of an object (``.../.ATTRIBUTES/NAME``)."""
    return parse_object_key(key) is not None


def object_key(name: str, attribute: str = VARIABLE_VALUE) -> str:
    """The object-based key of a plain name: each '/' part escaped, then /.ATTRIBUTES/<attr>."""
    path = "/".join(escape(part) for part in name.split("/"))
    return f"{path}/{ATTRIBUTES}/{escape(attribute)}" if path else f"{ATTRIBUTES}/{escape(attribute)}"
