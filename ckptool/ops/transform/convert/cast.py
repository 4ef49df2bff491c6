"""Casting a source tensor as ``convert --cast`` asks (the rules themselves, pure, are
:mod:`ckptool.format.cast`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.format.cast import cast_array

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.cast import Overflows
    from ckptool.ops.read.source import Spec
    from ckptool.ops.transform.convert.formats import ConvertResult


def value_of(s: Spec, casts: dict[str, str], over: Overflows, result: ConvertResult) -> np.ndarray:
    """The array to write for a spec: loaded, cast when its dtype is cast."""
    arr: np.ndarray = s.load()
    to = casts.get(s.dtype)
    if to is None:
        return arr
    out, n = cast_array(arr, to)
    result.cast[s.name] = f"{s.dtype}->{to}"
    if n:
        over.add(s.name, n, s.dtype, to)
        result.overflow[s.name] = n
    return out
