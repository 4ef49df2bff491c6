"""Casting a source tensor as ``convert --cast`` asks (the rules themselves, pure, are
:mod:`ckptool.format.cast`)."""

from __future__ import annotations

from ckptool.format.cast import cast_array


def value_of(s, casts, over, result):
    """The array to write for a spec: loaded, cast when its dtype is cast."""
    arr = s.load()
    to = casts.get(s.dtype)
    if to is None:
        return arr
    out, n = cast_array(arr, to)
    result.cast[s.name] = f"{s.dtype}->{to}"
    if n:
        over.add(s.name, n, s.dtype, to)
        result.overflow[s.name] = n
    return out
