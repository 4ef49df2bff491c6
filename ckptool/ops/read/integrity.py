"""The cheap integrity check of one checkpoint: the one rule of "intact" that prune, rm,
inspect and the property tests share (docs/ARCHITECTURE.md, "One rule, one function").

A V2 checkpoint is intact when its ``.index`` is there and parses (header and every entry),
every data shard an entry with bytes names is there, and each data file is at least as
long as the index's entries need (offset + size). A V1 checkpoint is intact when each of
its files parses as a V1 table. Nothing is read but the index, the sizes of the data files
and the V1 tables' footers: no tensor byte and no CRC (``verify``, ``prune --verify`` read
those). TF does not fsync, so after a crash the newest checkpoint is commonly damaged in
exactly the ways this sees: a data file missing or short, the index missing or garbled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.format.objkeys import shown
from ckptool.io.layout.checkpoints import V2, Located, data_shards, is_v1_table

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def damage(storage: Storage, prefix: str, *, v1_files: tuple[str, ...] = (),
           sizes: Mapping[str, int] | None = None) -> str | None:
    """What is wrong with checkpoint ``prefix`` by the cheap check, or None when it is intact.

    ``v1_files``: the files of a V1 checkpoint (its prefix names no ``.index``). ``sizes``:
    file name -> size from a listing of the directory already made (saves a request per
    data file on an object store); files not in it are asked of ``storage``."""
    if v1_files:
        bad = [f for f in v1_files if not is_v1_table(storage, f)]
        return f"{bad[0]}: not a readable V1 checkpoint file" if bad else None
    return _v2_damage(storage, prefix, sizes)


def _size(storage: Storage, path: str, sizes: Mapping[str, int] | None) -> int | None:
    name = storage.basename(path)
    if sizes is not None and name in sizes:
        return sizes[name]
    try:
        return storage.size(path) if storage.isfile(path) else None
    except (CkptError, OSError):
        return None


def _v2_damage(storage: Storage, prefix: str, sizes: Mapping[str, int] | None) -> str | None:
    from ckptool.ops.read.v2 import BundleCheckpoint

    index = bundle.index_filename(prefix)
    if _size(storage, index, sizes) is None:
        shards = data_shards(storage, prefix)
        if shards:
            return f"{index} is missing ({len(shards)} data file{'s' if len(shards) != 1 else ''} without it: " \
                   f"an unfinished or damaged save)"
        return f"{index} is missing"
    try:
        ck = BundleCheckpoint(Located(storage, prefix, V2))
    except (CkptError, OSError) as exc:
        return f"{index}: not a readable index ({exc})"
    try:
        need: dict[int, tuple[int, bytes]] = {}  # shard -> (bytes needed, the key that needs the most)
        for e in ck.plain_entries():
            end = e.offset + e.size
            if e.size and end > need.get(e.shard_id, (0, b""))[0]:
                need[e.shard_id] = (end, e.key)
    except (CkptError, OSError) as exc:
        return f"{index}: an entry does not parse ({exc})"
    finally:
        ck.close()
    n = ck.header.num_shards
    for shard, (end, key) in sorted(need.items()):
        if shard >= n:
            return f"{index}: tensor {shown(key)!r} names data shard {shard}, but the header counts {n}"
        path = ck.shard_path(shard)
        have = _size(storage, path, sizes)
        if have is None:  # a merged bundle's file may say "-of-" a smaller count (the reader's fallback)
            d = storage.dirname(prefix)
            alike = [n for n in data_shards(storage, prefix)
                     if (m := bundle.DATA_RE.match(n)) and int(m.group("shard")) == shard]
            have = _size(storage, storage.join(d, alike[0]) if d else alike[0], sizes) if len(alike) == 1 else None
        if have is None:
            return f"{path} is missing (data shard {shard} of {n})"
        if have < end:
            return f"{path} is {have} bytes; the index needs at least {end} (tensor {shown(key)!r}): truncated"
    return None


def is_intact(storage: Storage, prefix: str, *, v1_files: tuple[str, ...] = (),
              sizes: Mapping[str, int] | None = None) -> bool:
    """Whether :func:`damage` finds nothing wrong."""
    return damage(storage, prefix, v1_files=v1_files, sizes=sizes) is None


__all__ = ["damage", "is_intact"]
