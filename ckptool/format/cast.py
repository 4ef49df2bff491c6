"""Explicit dtype casts (``convert --cast FROM=TO``): rounding to nearest even, as numpy's and
ml_dtypes' ``astype`` round, and overflow counted so that it can be refused.

Only the four float types cast: float16, bfloat16, float32, float64 (either way).
A finite value that becomes infinite in the target is an overflow; NaN and
infinities stay what they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ckptool.errors import RefusedError, UsageError
from ckptool.format.dtypes import CASTABLE as CASTABLE  # the one list, re-exported

if TYPE_CHECKING:
    import numpy as np


def parse_casts(specs: Iterable[object] | None) -> dict[str, str]:
    """``["float32=bfloat16", ...]`` -> ``{"float32": "bfloat16"}``; a bad spec is a UsageError."""
    out: dict[str, str] = {}
    for spec in specs or ():
        src, sep, dst = str(spec).partition("=")
        src, dst = src.strip().lower(), dst.strip().lower()
        if not sep or src not in CASTABLE or dst not in CASTABLE:
            raise UsageError(f"bad --cast {spec!r}: expected FROM=TO with FROM and TO among "
                             f"{', '.join(CASTABLE)}")
        if src == dst:
            raise UsageError(f"bad --cast {spec!r}: FROM and TO are the same dtype")
        if src in out and out[src] != dst:
            raise UsageError(f"--cast {src}=... is given twice ({src}={out[src]}, {spec})")
        out[src] = dst
    return out


def target_dtype(casts: dict[str, str], dtype: str) -> str:
    """The dtype a tensor of ``dtype`` is written as."""
    return casts.get(dtype, dtype)


def cast_array(arr: np.ndarray, to: str) -> tuple[np.ndarray, int]:
    """``(arr.astype(to), number of finite values that became infinite)``."""
    import numpy as np

    from ckptool.format import dtypes

    with np.errstate(over="ignore", invalid="ignore"):  # overflow is counted below, not warned
        out = arr.astype(dtypes.from_name(to).numpy)
    if arr.size == 0:
        return out, 0
    over = np.isinf(out)
    if over.any():
        over &= np.isfinite(arr)
        return out, int(np.count_nonzero(over))
    return out, 0


@dataclass
class Overflows:
    """Tensors whose cast overflowed, with their counts; :meth:`check` refuses them."""

    allow: bool = False
    found: list[tuple[str, int, str, str]] = field(default_factory=list)

    def add(self, name: str, count: int, src: str, dst: str) -> None:
        if count:
            self.found.append((name, count, src, dst))

    def check(self, dst: str) -> None:
        if self.found and not self.allow:
            what = ", ".join(f"{n!r} ({c} values, {a} -> {b})" for n, c, a, b in self.found)
            raise RefusedError(f"{dst}: finite values overflow to inf in the cast: {what}; nothing written "
                               "(--allow-overflow writes them as inf)")
