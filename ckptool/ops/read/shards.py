"""A bundle's data files as its directory lists them (literal names: never a glob built
from a prefix): the shards the header counts that have no file, and the one file that
holds a shard under another count of shards (docs/FORMAT.md §1.3)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ckptool.format.bundle import DATA_RE
from ckptool.io.layout.checkpoints import names_in

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def _data_files(storage: Storage, prefix: str) -> Iterator[tuple[str, re.Match[str]]]:
    """``(name, match)`` of each data file of ``prefix`` in its directory."""
    base = storage.basename(prefix)
    for name in names_in(storage, storage.dirname(prefix)):
        m = DATA_RE.match(name)
        if m and m.group("prefix") == base:
            yield name, m


def missing_shards(storage: Storage, prefix: str, num_shards: int) -> tuple[int, list[tuple[int, int]]]:
    """``(count, ranges)`` of the shards of ``num_shards`` that have no data file, ranges as
    inclusive ``(first, last)``; from one listing of the directory."""
    present = {int(m.group("shard")) for _, m in _data_files(storage, prefix) if int(m.group("shard")) < num_shards}
    ranges, start = [], 0
    for i in sorted(present) + [num_shards]:
        if i > start:
            ranges.append((start, i - 1))
        start = i + 1
    return num_shards - len(present), ranges


def misnumbered_shard(storage: Storage, prefix: str, shard_id: int) -> str | None:
    """The path of the one data file of shard ``shard_id`` whatever count of shards its name
    says (MergeV2Checkpoints can sum num_shards over header-only inputs: the file then says
    "-of-" a smaller count); None when there is none, or more than one."""
    want = f"{shard_id:05d}"
    names = [n for n, m in _data_files(storage, prefix) if m.group("shard") == want]
    if len(names) != 1:
        return None
    d = storage.dirname(prefix)
    return storage.join(d, names[0]) if d else names[0]
