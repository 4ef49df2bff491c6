"""The one JSON spelling of a float that JSON has no number for.

JSON holds no NaN and no infinity. Every ``--json`` document and every ``to_json()``
of the library writes them as the strings ``"NaN"``, ``"Infinity"`` and
``"-Infinity"``, as protobuf's JSON mapping does, so that the document always parses
(``json.loads``, ``jq``) and the value is still told apart. A timestamp that names no
time is another thing: it is absent, ``null`` (:func:`json_timestamp`).
"""

from __future__ import annotations

import math
from typing import SupportsFloat, TypeVar

NAN, INFINITY, NEG_INFINITY = "NaN", "Infinity", "-Infinity"

N = TypeVar("N", bound=SupportsFloat)


def nonfinite_text(x: float) -> str:
    """The string for a non-finite ``x``: "NaN", "Infinity" or "-Infinity"."""
    return NAN if math.isnan(x) else (INFINITY if x > 0 else NEG_INFINITY)


def json_float(x: N) -> N | str:
    """``x`` itself when finite, else its string (see the module docstring)."""
    return x if math.isfinite(x) else nonfinite_text(float(x))


def json_timestamp(t: float | None) -> float | None:
    """A timestamp as a document holds it: ``t`` when it is a finite number, else None
    (``null``): none at all, NaN or an infinity (a state file can hold any) names no time."""
    return t if isinstance(t, (int, float)) and math.isfinite(t) else None


__all__ = ["NAN", "INFINITY", "NEG_INFINITY", "nonfinite_text", "json_float", "json_timestamp"]
