"""Writing a Hugging Face folder as ``save_pretrained`` lays it out: ``model.safetensors``, or past
``max_shard_size`` ``model-00001-of-0000N.safetensors`` and ``model.safetensors.index.json``
(``{"metadata": {"total_size"}, "weight_map"}``), the tokenizer files, ``config.json``.

Streaming: one tensor in memory at a time (its transform's copy beside it); a weight kept as
stored is copied as its stored bytes, 8 MiB at a time (CRC-checked), never decoded; a stored
matrix only transposed is transposed as it is read, a cache-sized block of rows at a time. Each
tensor is made while the one before is written by a second thread; when syncing, the disk
writes start every 8 MiB, so that the final fsync waits for the tail alone. Every file goes to a
temporary name (on an object store: an upload that appears when closed); once all are written
and synced, an earlier export in the folder stops being loadable first (its ``config.json``
removed, then its weight files this export does not overwrite: other shards, the other layout),
and only then are the new files renamed into place, ``config.json`` last (on an object store, where
a file appears when it is closed, the old export goes before any new file is closed). So an overwrite killed
at any point leaves the old export whole, a folder without ``config.json`` (which transformers
does not load), or the new export whole; never new weights beside an old index or config, nor an
old ``model.safetensors`` beside a new sharded export.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, RefusedError, UnsupportedError, UsageError
from ckptool.format import safetensors_meta as stm
from ckptool.format.json_doc import dump_json
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination
from ckptool.ops.read.hffolder import HF_INDEX, HF_SINGLE
from ckptool.ops.transform.hf.steps import parse_op, strip_rows, transpose_rows
from ckptool.ops.transform.hf.tokenizer import Data
from ckptool.ops.transform.hf.weightmap import Placed, Plan, apply
from ckptool.ops.write.writer import ChunkedOut

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.read.spec import RawTensor

DEFAULT_SHARD = 5 * 10**9  # transformers' usual hub size; --max-shard-size
SINGLE, INDEX = HF_SINGLE, HF_INDEX  # the layout the reader knows (ckptool.ops.read.hffolder)
WEIGHT_FILE = re.compile(r"model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?")
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_CHUNK = 8 << 20
_BLOCK = 512 << 10  # rows read at once to be transposed: the block stays in the core's L2 cache


def parse_size(size: int | str | None) -> int:
    """``--max-shard-size``: bytes, or ``500MB``, ``5GB``, ``2GiB`` (as transformers reads them)."""
    if size is None:
        return DEFAULT_SHARD
    if isinstance(size, int):
        n = size
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*", size.upper())
        if m is None or m[2] not in _UNITS:
            raise UsageError(f"--max-shard-size {size!r}: a size such as 500MB, 5GB or 2GiB")
        n = int(float(m[1]) * _UNITS[m[2]])
    if n <= 0:
        raise UsageError(f"--max-shard-size {size!r}: must be positive")
    return n


def _nbytes(p: Placed) -> int:
    from ckptool.format import dtypes

    size = 1
    for d in p.shape:
        size *= d
    return size * dtypes.from_name(p.spec.dtype).itemsize


def shards(placed: list[Placed], limit: int) -> list[list[Placed]]:
    """Tensors in order, a new shard when the next would pass ``limit`` (a bigger tensor alone)."""
    out: list[list[Placed]] = [[]]
    size = 0
    for p in placed:
        n = _nbytes(p)
        if out[-1] and size + n > limit:
            out.append([])
            size = 0
        out[-1].append(p)
        size += n
    return out


def _bytes(p: Placed, config: dict[str, Any]) -> Any:
    """A tensor's bytes as written (a buffer); a weight kept as stored: a :class:`_Stored`, copied
    a chunk at a time when written (never held whole)."""
    import numpy as np

    s = p.spec
    if not p.op and not (p.rule and p.rule.fan) and s.raw is not None and not s.raw.entry.slices:
        return _Stored(s.raw)
    if s.raw is not None and _plain_transpose(p):
        return _transposed(s.raw, p)
    arr = np.asarray(apply(p.rule.parsed if p.rule else p.op, s.load(), config, p.groups, p.name))
    if tuple(arr.shape) != p.shape:
        raise CkptError(f"tensor {p.name!r}: became {list(arr.shape)}, not {list(p.shape)}")
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _plain_transpose(p: Placed) -> bool:
    """Whether ``p`` is a stored matrix (plain, fixed-size, as stored: little-endian) only transposed."""
    if (p.rule and p.rule.fan) or [st.name for st in (p.rule.parsed if p.rule else parse_op(p.op)).steps] != ["T"]:
        return False
    raw = p.spec.raw
    if raw is None:
        return False
    e = raw.entry
    return (len(e.shape) == 2 and e.size > 0 and not e.slices and e.dtype.is_fixed
            and e.dtype.itemsize in (1, 2, 4, 8) and not raw.checkpoint.header.swaps(e.dtype))


def _transposed(raw: RawTensor, p: Placed) -> Any:
    """A stored matrix, transposed as it is read: :data:`_BLOCK` bytes of rows at a time into one
    buffer that stays in cache, CRC32C-checked there (chained across the blocks, checked after
    the last) and moved into the output from there. The source matrix is never held whole, nor
    goes through main memory three times (read into memory, read for the CRC, read to be
    transposed); its elements move as unsigned integers of their width (bit patterns kept)."""
    import numpy as np

    ck, e = raw.checkpoint, raw.entry
    n, m = e.shape
    if (m, n) != p.shape:
        raise CkptError(f"tensor {p.name!r}: became {[m, n]}, not {list(p.shape)}")
    dt = np.dtype(f"<u{e.dtype.itemsize}")
    out = np.empty((m, n), dt)
    strip = strip_rows(dt.itemsize)
    k = max(1, _BLOCK // (m * dt.itemsize * strip)) * strip
    buf = np.empty(min(k, n) * m, dt)
    i = 0
    for part in ck.iter_fixed(e, buf.view(np.uint8).data, raw.verify):
        rows = np.frombuffer(part, dt).reshape(-1, m)
        transpose_rows(out, i, rows)
        i += len(rows)
    return out.reshape(-1).view(np.uint8)


class _Stored:
    """A V2 entry's stored bytes, copied into the shard :data:`_CHUNK` at a time through one
    buffer, its CRC32C checked across the chunks (a mismatch raises before the file is sealed)."""

    def __init__(self, raw: RawTensor):
        self.raw = raw

    def chunks(self) -> Iterator[Any]:
        ck, e = self.raw.checkpoint, self.raw.entry
        if not e.dtype.is_fixed or e.size <= _CHUNK:
            yield ck.read_raw(e, verify=self.raw.verify)
            return
        yield from ck.iter_fixed(e, memoryview(bytearray(_CHUNK)), self.raw.verify)


def _put(out: ChunkedOut, data: Any) -> int:
    return sum(out.put(buf) for buf in (data.chunks() if isinstance(data, _Stored) else (data,)))


def _write_shard(f: AtomicFile, group: list[Placed], config: dict[str, Any], where: str,
                 tick: Callable[[int], None], budget: int) -> int:
    """The shard's header, then its tensors: each tensor's bytes made (read, transformed) while the
    one before is written by a second thread, as long as both fit in ``budget`` bytes."""
    from concurrent.futures import Future, ThreadPoolExecutor

    header = []
    for p in group:
        code = stm.TF_TO_ST.get(p.spec.dtype)
        if code is None:
            raise UnsupportedError(f"{where}: tensor {p.name!r} has dtype {p.spec.dtype}, which a model's "
                                   ".safetensors cannot hold")
        header.append((p.hf, code, p.shape))
    head, total = stm.encode_header(header, stm.Extras(format="pt"))
    f.write(head)
    out = ChunkedOut(f)
    done = 0
    pending: Future[int] | None = None
    held = 0
    with ThreadPoolExecutor(1, thread_name_prefix="ckptool-hf-write") as pool:
        for p in group:
            n = _nbytes(p)
            if pending is not None and held + 2 * n > budget:  # a transform holds the value and its copy
                done += _settle(pending, tick)
                pending = None
            data = _bytes(p, config)
            if pending is not None:
                done += _settle(pending, tick)
            pending, held = pool.submit(_put, out, data), n
            del data
        if pending is not None:
            done += _settle(pending, tick)
    if done != total:
        raise CkptError(f"{where}: wrote {done} bytes of tensor data, the header says {total}")
    return total


def _settle(pending: Any, tick: Callable[[int], None]) -> int:
    n = int(pending.result())
    tick(n)
    return n


def _stale(storage: Storage, dst: str, written: set[str], force: bool) -> list[str]:
    """Weight files of an earlier export in ``dst`` that this one does not overwrite."""
    if not storage.isdir(dst):
        return []
    old = [n for n in storage.listdir(dst) if WEIGHT_FILE.fullmatch(n) and n not in written]
    if old and not force:
        raise RefusedError(f"{storage.join(dst, old[0])} already exists; not overwriting it without --force")
    return [storage.join(dst, n) for n in old]


def write_folder(dst: str, plan: Plan, config: dict[str, Any], extra: list[tuple[str, Data]], limit: int,
                 *, force: bool, sync: bool, progress: Callable[[int, int], None] | None,
                 sources: Sequence[str]) -> tuple[list[str], int]:
    """The folder ``dst``: ``plan``'s weights in shards of at most ``limit`` bytes, ``extra``'s
    tokenizer files, ``config``; ``(the paths written, the weights' bytes)``."""
    from ckptool.io.backends.urls import storage_for

    storage, root = storage_for(dst)
    groups = shards(plan.placed, limit)
    n = len(groups)
    names = [SINGLE] if n == 1 else [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
    small: list[tuple[str, Data]] = [*extra, *([(INDEX, b"")] if n > 1 else []),
                                     ("config.json", dump_json(config, storage.join(root, "config.json")))]
    targets = [storage.join(root, name) for name in names + [name for name, _ in small]]
    check_destination(storage, targets, force=force, sources=sources)
    stale = _stale(storage, root, set(names) | {name for name, _ in small}, force)
    make_output_dir(storage, root)
    total = sum(_nbytes(p) for p in plan.placed)
    budget = 2 * max((_nbytes(p) for p in plan.placed), default=0)  # twice the largest tensor
    done = [0]

    def tick(k: int) -> None:
        done[0] += k
        if progress:
            progress(done[0], total)

    files: list[AtomicFile] = []
    try:
        weight_map: dict[str, str] = {}
        for name, group in zip(names, groups):
            f = AtomicFile(storage, storage.join(root, name), sync=sync)
            files.append(f)
            _write_shard(f, group, config, dst, tick, budget)
            weight_map.update((p.hf, name) for p in group)
        for name, data in small:
            if name == INDEX:
                data = dump_json({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))},
                                 storage.join(root, name))
            f = AtomicFile(storage, storage.join(root, name), sync=sync)
            files.append(f)
            for part in (data,) if isinstance(data, bytes) else data():
                f.write(part)
        if all(f.atomic for f in files):  # the old export goes once the new files are sealed, before any rename
            publish(files, check=lambda: _retire(storage, root, stale, sync))
        else:  # an object store: a file appears when it is sealed, so the old export goes first
            _retire(storage, root, stale, sync)
            publish(files)
    except BaseException:
        for f in files:
            f.discard()
        raise
    return targets, total


def _retire(storage: Storage, root: str, stale: list[str], sync: bool) -> bool:
    """Make an earlier export in ``root`` unloadable before any new file is renamed in: its
    ``config.json`` first, then its weight files this export does not overwrite (the index before
    its shards). Called by ``publish`` once every new file is written and sealed."""
    config = storage.join(root, "config.json")
    old = [config] if storage.exists(config) else []
    old += sorted(stale, key=lambda p: not p.endswith(INDEX))
    for path in old:
        storage.remove(path)
    if old and sync:
        storage.fsync_dir(root)
    return True
