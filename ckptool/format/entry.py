"""A tensor's entry in a bundle's index, as validated, and a shape's element count.

Below both :mod:`ckptool.format.bundle` (which parses entries from the index) and
:mod:`ckptool.format.tensors` (which decodes the bytes an entry points at).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ckptool.format import dtypes
from ckptool.format.slices import Slice


def numel(shape: Iterable[int]) -> int:
    """The element count of ``shape`` (1 for a scalar), as a Python int: never overflows."""
    n = 1
    for d in shape:
        n *= d
    return n


@dataclass(slots=True)  # not frozen: a frozen dataclass costs 2 us per entry to build
class Entry:
    """One BundleEntryProto, validated. Treat as immutable."""

    key: bytes
    dtype: dtypes.DType
    shape: tuple[int, ...]
    shard_id: int
    offset: int
    size: int
    crc32c: int  # masked, as stored
    slices: tuple[Slice, ...]

    @property
    def numel(self) -> int:
        return numel(self.shape)
