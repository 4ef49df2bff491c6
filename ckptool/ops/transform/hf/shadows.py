"""``ExponentialMovingAverage`` shadows a family's 4.57 loader takes in place of the raw weights
(MobileNetV2's ``ema()``): an ``Arch``'s ``average`` pattern names the weights concerned."""

from __future__ import annotations

import re

SHADOW = "/ExponentialMovingAverage"
AVERAGED = "its ExponentialMovingAverage is exported in its place (as transformers 4.57's loader takes it)"


def averaged(pattern: str, names: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """For each X that ``pattern`` matches whole and that has a shadow: ``({X: why it is left out},
    {X/ExponentialMovingAverage: X, the name the rules match it as})``."""
    left: dict[str, str] = {}
    read_as: dict[str, str] = {}
    if not pattern:
        return left, read_as
    rx, have = re.compile(pattern), set(names)
    for n in names:
        base = n.removesuffix(SHADOW)
        if base != n and base in have and rx.fullmatch(base):
            left[base] = AVERAGED
            read_as[n] = base
    return left, read_as


__all__ = ["AVERAGED", "SHADOW", "averaged"]
