"""How SRC's tensor bytes reach DST: the fast path links (or copies whole) SRC's data files and
writes only a new index; otherwise each kept tensor's stored bytes are copied into new data files,
so DST holds only what is kept."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ckptool.format import bundle
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.format.objkeys import key_of
from ckptool.ops.read.prefetch import prefetch

if TYPE_CHECKING:
    from ckptool.format.bundle import Entry
    from ckptool.io.base import Storage
    from ckptool.ops.transform.rename.assignment import Plan
    from ckptool.ops.write.writer import BundleWriter


def copy_raw(ck: Any, e: Entry, new: str, w: BundleWriter) -> None:
    """Entry ``e`` of ``ck`` added to ``w`` as ``new``, its stored bytes copied (a partitioned
    tensor: its full entry, then each slice under the new name's slice key)."""
    if not e.slices:
        w.add_raw(new, e, ck.read_raw(e))
        return
    w.add_raw(new, e, None)
    nk = key_of(new)
    for sl in e.slices:
        part = ck.entry(bundle.encode_tensor_name_slice(e.key, sl))
        w.add_raw(bundle.encode_tensor_name_slice(nk, sl), part, ck.read_raw(part))


def copy_tensors(ck: Any, plan: Plan, dprefix: str, storage: Storage, graph: list[bytes | bytearray], force: bool,
                 sync: bool, progress: Callable[[int, int], None] | None, jobs: int | None) -> list[str]:
    """Write DST anew: each renamed tensor's stored bytes (a V1 SRC's values, encoded), then the object
    graph (rebuilt: taken out of ``graph``, else SRC's copied as it is); the files written."""
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.write.writer import BundleWriter

    with BundleWriter(dprefix, storage=storage, force=force, sync=sync,
                      endianness=ck.header.endianness if isinstance(ck, BundleCheckpoint)
                      else bundle.HOST_ENDIANNESS) as w:
        total = sum(ck.variable(old).nbytes for old, _ in plan.renames) if progress else 0
        done = 0
        with prefetch(ck, [old for old, _ in plan.renames], jobs):  # fetched ahead from an object store
            for old, new in plan.renames:
                if isinstance(ck, BundleCheckpoint):
                    e = ck.entry(key_of(old))
                    copy_raw(ck, e, new, w)
                else:
                    w.add(new, ck.read(old))
                if progress:
                    done += ck.variable(old).nbytes
                    progress(done, total)
        if graph:
            w.add(OBJECT_GRAPH_KEY, graph.pop())
        elif plan.object_graph == "kept":
            if isinstance(ck, BundleCheckpoint):  # the graph's stored bytes, copied as they are
                e = ck.entry(key_of(OBJECT_GRAPH_KEY))
                w.add_raw(OBJECT_GRAPH_KEY, e, ck.read_raw(e))
            else:  # a V1 file holding a graph tensor: its value, re-encoded
                w.add(OBJECT_GRAPH_KEY, ck.read(OBJECT_GRAPH_KEY))
        res = w.finish()
    return res.files


def link_files(ck: Any, plan: Plan, dprefix: str, storage: Storage, graph: list[bytes | bytearray], force: Any,
               sync: bool, progress: Callable[[int, int], None] | None = None) -> tuple[list[str], bool]:
    """Link (or copy whole) SRC's data files, write the index; (files, whether all were linked).
    A rebuilt object graph, in ``graph``, is taken out of it and written to a shard of its own
    (let go before the index is made)."""
    n_src = ck.header.num_shards
    n_dst = n_src + (1 if graph else 0)
    for _ in _entries(ck, plan, []):  # every SRC entry found before anything is written
        pass
    extra: list[tuple[bytes, bytes]] = []  # the object graph's entry (kept or written anew)
    if plan.object_graph == "kept":
        k = key_of(OBJECT_GRAPH_KEY)
        extra.append((k, ck.raw_entry(k)))
    from ckptool.io.safety.atomic import link_or_copy, make_output_dir, publish
    from ckptool.ops.write.writer import index_file, retire_index

    make_output_dir(storage, storage.dirname(dprefix))
    made = []  # every file written in full under a temporary name; published at the end
    try:
        sizes = [storage.size(ck.shard_path(i)) for i in range(n_src)] if progress else []
        for i in range(n_src):
            made.append(link_or_copy(storage, ck.shard_path(i), bundle.data_filename(dprefix, i, n_dst), sync=sync))
            if progress:
                progress(sum(sizes[:i + 1]), sum(sizes))
        if graph:
            extra.append(_write_graph(storage, bundle.data_filename(dprefix, n_src, n_dst), n_src, graph.pop(),
                                      sync, made))
        linked = all(f.file is None for f in made[:n_src])  # a link has nothing to write
        made.append(index_file(storage, dprefix, n_dst, _entries(ck, plan, extra), ck.header.endianness, sync))
        finals = [f.target for f in made[:-1]]
        publish(made, check=(lambda: retire_index(storage, dprefix, finals, sync)) if force else None)
    except BaseException:
        for f in made:
            f.discard()
        raise
    return [f.target for f in made], linked


def _write_graph(storage: Storage, path: str, shard: int, value: bytes | bytearray, sync: bool,
                 made: list[Any]) -> tuple[bytes, bytes]:
    """The object graph, a string scalar, alone in shard ``shard`` (its head, then its bytes: not
    copied into one buffer); its index entry."""
    from ckptool.format import dtypes
    from ckptool.format.coding import crc32c, mask_crc
    from ckptool.format.tensors import string_scalar_head
    from ckptool.io.safety.atomic import AtomicFile

    head, crc = string_scalar_head(len(value))
    f = AtomicFile(storage, path, sync=sync)
    made.append(f)
    f.write(head)
    f.write(value)
    return key_of(OBJECT_GRAPH_KEY), bundle.encode_entry(dtypes.STRING_DTYPE, (), shard, 0, len(head) + len(value),
                                                         mask_crc(crc32c(value, crc)))


def _entries(ck: Any, plan: Plan, extra: list[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """DST's index entries: SRC's, under the new names (slices included), with ``extra`` among
    them in key order; in key order as a whole when the plan's names sort as their keys (the
    index is then written as they come: nothing sorted), made as the index takes them."""
    extra = sorted(extra)
    for old, new in plan.renames:
        ok = key_of(old)
        nk = key_of(new)
        while extra and extra[0][0] < nk:
            yield extra.pop(0)
        e = ck.entry(ok)
        yield nk, ck.raw_entry(ok)
        for sl in e.slices:
            yield bundle.encode_tensor_name_slice(nk, sl), ck.raw_entry(bundle.encode_tensor_name_slice(ok, sl))
    yield from extra


__all__ = ["copy_raw", "copy_tensors", "link_files"]
