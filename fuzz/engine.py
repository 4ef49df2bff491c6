"""The fuzzing engine shared by ``fuzz/run.py`` and tests/robustness/.

A *seed* is a real checkpoint held in memory (file name -> bytes): the small
TF-written ones under ``fuzz/corpus/tf/``, the bundled example, fixtures in
``tests/data/`` when present, and checkpoints made here with ``ckptool.write``
(every dtype family, slices, shards, an object graph, Snappy-compressed index
blocks). A *case* mutates one seed (bytes: truncation, bit flips, overwritten
or inserted ranges, varint bombs, footer handles; protobuf level: entries
decoded and re-encoded with extreme fields, the table rebuilt with
``TableBuilder`` so every CRC is valid and the deeper code is reached; table
level: blocks shuffled, dropped or duplicated behind a valid index), writes it
to a scratch directory and runs a *target* on it.

The only outcome allowed besides success is a :class:`ckptool.errors.CkptError`.
Anything else (another exception type, a hang past the per-case deadline, an
allocation past the address-space cap) is a failure, reported with the case
number that replays it.
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"

from ckptool.errors import CkptError  # noqa: E402
from ckptool.format import bundle  # noqa: E402
from ckptool.format import table as tbl
from ckptool.format import table_build as tbl_build
from ckptool.format.coding import FIXED32, crc32c, encode_varint, mask_crc  # noqa: E402
from ckptool.format.protos.tensor_bundle_pb2 import BundleEntryProto, BundleHeaderProto  # noqa: E402
from ckptool.format.table_build import TableBuilder

TARGETS = ("open", "read", "verify", "state", "prune")


# --------------------------------------------------------------------------- seeds


@dataclass
class Seed:
    name: str
    files: dict[str, bytes]  # relative file name -> contents
    prefix: str  # the CHECKPOINT argument, relative to the case directory
    v1: bool = False

    @property
    def index_name(self) -> str | None:
        return None if self.v1 else self.prefix + ".index"

    def table_files(self) -> list[str]:
        """Files holding a LevelDB-style table (V2 index, V1 files)."""
        return [self.prefix] if self.v1 else [self.prefix + ".index"]

    def data_files(self) -> list[str]:
        return [n for n in self.files if ".data-" in n]


def _load_dir(directory: pathlib.Path, prefix: str, name: str, v1: bool = False) -> Seed:
    base = prefix
    files = {}
    for p in sorted(directory.iterdir()):
        if p.is_file() and (p.name == base or p.name.startswith(base + ".")):
            files[p.name] = p.read_bytes()
    return Seed(name, files, prefix, v1)


def _write_own(tmp: pathlib.Path) -> list[Seed]:
    """Checkpoints written with ckptool.write / BundleWriter."""
    import ml_dtypes

    from ckptool.ops.write.writer import BundleWriter, write

    seeds = []
    d = tmp / "own"
    d.mkdir()
    write(str(d / "mixed"), {
        "f16": np.array([1.0, -2.5], np.float16),
        "u8": np.arange(5, dtype=np.uint8),
        "i32": np.int32(-3),
        "bf16": np.array([[1.5, 2.0]], ml_dtypes.bfloat16),
        "f8": np.array([0.5, 1.0], ml_dtypes.float8_e4m3fn),
        "i4": np.array([1, -2, 3], ml_dtypes.int4),
        "c128": np.array([1 - 1j], np.complex128),
        "zero": np.zeros((2, 0), np.float32),
        "str": np.array([b"", b"hello", b"\x80\xff"], dtype=object),
        "scalar_str": b"s",
    }, sync=False)
    seeds.append(_load_dir(d, "mixed", "own/mixed"))
    with BundleWriter(str(d / "sliced"), sync=False) as w:
        sl1, sl2 = ((0, 2), (0, -1)), ((2, 3), (0, -1))
        w.add_sliced("p", "float32", (5, 3), [sl1, sl2])
        w.add(bundle.encode_tensor_name_slice(b"p", sl1), np.ones((2, 3), np.float32))
        w.add(bundle.encode_tensor_name_slice(b"p", sl2), np.full((3, 3), 2, np.float32))
        w.add("q", np.arange(3, dtype=np.int64))
        w.finish()
    seeds.append(_load_dir(d, "sliced", "own/sliced"))
    write(str(d / "sharded"), {f"v{i}": np.full(i + 1, i, np.int16) for i in range(5)}, num_shards=3,
          sync=False)
    seeds.append(_load_dir(d, "sharded", "own/sharded"))
    write(str(d / "obj"), {
        "model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE": np.eye(2, dtype=np.float32),
        "model/dense/bias/.ATTRIBUTES/VARIABLE_VALUE": np.zeros(2, np.float32),
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE": np.int64(1),
    }, sync=False)
    seeds.append(_load_dir(d, "obj", "own/obj"))
    # Many small blocks, then the same index with Snappy-compressed blocks.
    mixed = seeds[0]
    entries = list(tbl.TableReader(mixed.files["mixed.index"], "mixed.index"))
    many = dict(mixed.files)
    many["mixed.index"] = build_table([(k, bytes(v)) for k, v in entries], block_size=64)
    seeds.append(Seed("own/many-blocks", many, "mixed"))
    snappy = dict(mixed.files)
    snappy["mixed.index"] = build_table([(k, bytes(v)) for k, v in entries], block_size=128, snappy=True)
    seeds.append(Seed("own/snappy", snappy, "mixed"))
    return seeds


def load_seeds(tmp: pathlib.Path, max_bytes: int = 64 << 10) -> list[Seed]:
    """Every seed checkpoint: own, TF-written corpus, example, tests/data/* (small ones)."""
    seeds = _write_own(tmp)
    tfd = CORPUS / "tf"
    if tfd.is_dir():
        seeds.append(_load_dir(tfd, "mixed", "tf/mixed"))
        seeds.append(_load_dir(tfd, "sharded", "tf/sharded"))
        seeds.append(_load_dir(tfd, "v1.ckpt", "tf/v1", v1=True))
    ex = ROOT / "examples" / "keras_adam"
    if (ex / "ckpt-3.index").is_file():
        seeds.append(_load_dir(ex, "ckpt-3", "example/keras_adam"))
    data = ROOT / "tests" / "data"
    if data.is_dir():
        for index in sorted(data.rglob("*.index")):
            prefix = index.name[: -len(".index")]
            s = _load_dir(index.parent, prefix, f"data/{index.parent.relative_to(data)}/{prefix}")
            if sum(len(b) for b in s.files.values()) <= max_bytes and s.files:
                seeds.append(s)
    return seeds


# --------------------------------------------------------------------------- tables


def build_table(items, block_size: int = tbl.BLOCK_SIZE, snappy: bool = False,
                order=None) -> bytes:
    """A table of ``items`` (sorted here). ``snappy`` compresses every block;
    ``order`` permutes the data blocks on disk behind a valid index
    (a callable taking the list of (last key, contents) and returning it reordered)."""
    if not snappy and order is None:
        out = io.BytesIO()
        b = TableBuilder(out, block_size=block_size)
        for k, v in sorted(items):
            b.add(k, v)
        b.finish()
        return out.getvalue()
    # Hand-assembled: group into blocks, optionally compress and reorder them.
    blocks = []
    cur = tbl_build._BlockBuilder(tbl.RESTART_INTERVAL)
    last = None
    for k, v in sorted(items):
        cur.add(k, v)
        last = k
        if cur.size_estimate() >= block_size:
            blocks.append((last, cur.finish()))
            cur = tbl_build._BlockBuilder(tbl.RESTART_INTERVAL)
    if not cur.empty:
        blocks.append((last, cur.finish()))
    if order is not None:
        blocks = order(blocks)
    buf = bytearray()

    def raw_block(contents: bytes, compress: bool) -> tbl.BlockHandle:
        ctype = tbl.NO_COMPRESSION
        if compress:
            import cramjam

            contents = bytes(cramjam.snappy.compress_raw(contents))
            ctype = tbl.SNAPPY_COMPRESSION
        h = tbl.BlockHandle(len(buf), len(contents))
        buf.extend(contents)
        buf.extend(tbl.TRAILER.pack(ctype, mask_crc(crc32c(bytes((ctype,)), crc32c(contents)))))
        return h

    index = tbl_build._BlockBuilder(tbl.INDEX_RESTART_INTERVAL)
    handles = [(lastkey, raw_block(contents, snappy)) for lastkey, contents in blocks]
    meta = raw_block(tbl_build._BlockBuilder(tbl.RESTART_INTERVAL).finish(), snappy)
    seen = set()
    for lastkey, h in handles:
        key = lastkey
        while key in seen:  # duplicated blocks: keep index keys distinct (and out of order)
            key += b"\x00"
        seen.add(key)
        index.add(key, h.encode())
    ih = raw_block(index.finish(), snappy)
    buf.extend(tbl.write_footer(meta, ih))
    return bytes(buf)


def table_items(raw: bytes, name: str = "t"):
    return [(k, bytes(v)) for k, v in tbl.TableReader(raw, name)]


# --------------------------------------------------------------------------- mutators

INT64 = [0, 1, -1, 2, 7, 255, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**40, 2**53, 2**62, 2**63 - 1, -(2**63),
         -(2**31)]
INT32 = [0, 1, -1, 2, 3, 255, 1000, 2**31 - 1, -(2**31)]
DTYPES = list(range(0, 32)) + [100, 101, 102, 119, 120, 200, 1000, 2**31 - 1, -1]


def _pick_int(rng: random.Random, pool, near=()) -> int:
    if near and rng.random() < 0.4:
        base = rng.choice(list(near))
        return base + rng.choice((-8, -1, 1, 2, 1024))
    return rng.choice(pool)


def _clamp(v: int, bits: int) -> int:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return max(lo, min(hi, v))


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    n = len(data)
    b = bytearray(data)
    kind = rng.choice(("truncate", "flip", "flip", "overwrite", "insert", "delete", "varint",
                       "footer", "zero_tail", "splice"))
    if n == 0:
        return bytes(rng.randbytes(rng.randint(1, 64))), "random bytes into empty file"
    if kind == "truncate":
        at = rng.choice((0, 1, n - 1, n - 48, n - 49, n // 2, rng.randrange(n)))
        at = max(0, min(n, at))
        return bytes(b[:at]), f"truncate at {at}"
    if kind == "flip":
        k = rng.choice((1, 1, 2, 3, 8))
        bits = [rng.randrange(n * 8) for _ in range(k)]
        for bit in bits:
            b[bit // 8] ^= 1 << (bit % 8)
        return bytes(b), f"flip bits {bits}"
    if kind == "overwrite":
        start = rng.randrange(n)
        length = rng.choice((1, 2, 4, 8, 16, rng.randint(1, max(1, n - start))))
        fill = rng.choice(("zero", "ff", "random"))
        chunk = {"zero": b"\0" * length, "ff": b"\xff" * length}.get(fill) or rng.randbytes(length)
        b[start:start + length] = chunk[: max(0, min(length, n - start))]
        return bytes(b), f"overwrite [{start}, +{length}) with {fill}"
    if kind == "insert":
        at = rng.randrange(n + 1)
        chunk = rng.randbytes(rng.choice((1, 3, 10, 100)))
        return bytes(b[:at] + chunk + b[at:]), f"insert {len(chunk)} bytes at {at}"
    if kind == "delete":
        start = rng.randrange(n)
        length = rng.choice((1, 4, 16, 100))
        return bytes(b[:start] + b[start + length:]), f"delete [{start}, +{length})"
    if kind == "varint":
        at = rng.randrange(n)
        v = rng.choice((2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**35))
        enc = encode_varint(v) if rng.random() < 0.7 else b"\xff" * 11
        b[at:at + len(enc)] = enc
        return bytes(b), f"varint {v if len(enc) < 11 else 'unterminated'} at {at}"
    if kind == "footer" and n >= 48:
        handles = b""
        desc = []
        for _ in range(2):
            off = rng.choice((0, 1, n, n - 48, 2**31, 2**62, rng.randrange(n)))
            size = rng.choice((0, 1, 4, n, 2**31, 2**62, rng.randrange(n)))
            handles += encode_varint(off) + encode_varint(size)
            desc.append((off, size))
        b[n - 48:n - 8] = handles.ljust(40, b"\0")[:40]
        return bytes(b), f"footer handles {desc}"
    if kind == "zero_tail":
        at = rng.randrange(n)
        b[at:] = b"\0" * (n - at)
        return bytes(b), f"zero from {at}"
    # splice: copy one range over another (shuffles structure with plausible bytes)
    src = rng.randrange(n)
    dst = rng.randrange(n)
    length = rng.randint(1, min(64, n))
    b[dst:dst + length] = data[src:src + length]
    return bytes(b[:n]), f"splice [{src}, +{length}) to {dst}"


def _mutate_header(rng, value: bytes) -> tuple[bytes, str]:
    try:
        h = BundleHeaderProto.FromString(value)
    except Exception:  # an earlier op of this case left garbage there
        h = BundleHeaderProto()
    which = rng.choice(("num_shards", "endianness", "producer", "min_consumer", "bad_consumers", "garbage"))
    if which == "num_shards":
        h.num_shards = _clamp(_pick_int(rng, INT32, (h.num_shards,)), 32)
    elif which == "endianness":
        h.endianness = rng.choice((1, 2, 3, -1, 1000))
    elif which == "producer":
        h.version.producer = _clamp(rng.choice(INT32), 32)
    elif which == "min_consumer":
        h.version.min_consumer = rng.choice((1, 2, 99, 2**31 - 1))
    elif which == "bad_consumers":
        h.version.bad_consumers.extend(rng.sample((0, 1, 2, 3), 2))
    else:
        return rng.randbytes(rng.randint(0, 20)), "header garbage"
    return h.SerializeToString(), f"header {which} -> {str(h).strip()!r}"


def _entry_or_empty(value: bytes) -> BundleEntryProto:
    try:
        return BundleEntryProto.FromString(value)
    except Exception:  # an earlier op of this case left garbage there
        return BundleEntryProto()


def _mutate_entry(rng, key: bytes, value: bytes, sizes: dict[str, int]) -> tuple[bytes, str]:
    e = _entry_or_empty(value)
    which = rng.choice(("dtype", "dtype", "dims", "dims", "rank", "unknown_rank", "shard_id", "offset",
                        "offset", "size", "size", "crc", "slices", "drop_slices", "garbage"))
    fsize = max(sizes.values()) if sizes else 0
    near = (e.size, e.offset, fsize, e.offset + e.size)
    if which == "dtype":
        e.dtype = rng.choice(DTYPES)
    elif which == "dims":
        if not e.shape.dim:
            e.shape.dim.add(size=1)
        d = rng.randrange(len(e.shape.dim))
        e.shape.dim[d].size = _clamp(_pick_int(rng, INT64, (e.shape.dim[d].size,)), 64)
    elif which == "rank":
        n = rng.choice((0, 1, 5, 64, 254, 255, 300))
        del e.shape.dim[:]
        for _ in range(n):
            e.shape.dim.add(size=rng.choice((1, 1, 1, 2, 0, 2**20)))
    elif which == "unknown_rank":
        e.shape.unknown_rank = True
    elif which == "shard_id":
        e.shard_id = _clamp(_pick_int(rng, INT32, (e.shard_id,)), 32)
    elif which == "offset":
        e.offset = _clamp(_pick_int(rng, INT64, near), 64)
    elif which == "size":
        e.size = _clamp(_pick_int(rng, INT64, near), 64)
    elif which == "crc":
        e.crc32c = rng.getrandbits(32)
    elif which == "slices":
        rank = len(e.shape.dim)
        for _ in range(rng.choice((1, 2, 50))):
            sp = e.slices.add()
            for _ in range(rank if rng.random() < 0.8 else rank + 1):
                ext = sp.extent.add()
                if rng.random() < 0.8:
                    ext.start = _clamp(rng.choice(INT64), 64)
                    ext.length = _clamp(rng.choice(INT64 + [1, 2, 3]), 64)
    elif which == "drop_slices":
        del e.slices[: rng.randint(1, max(1, len(e.slices)))]
    else:
        return rng.randbytes(rng.randint(0, 40)), f"entry {key!r} garbage"
    return e.SerializeToString(), f"entry {key!r} {which} -> {str(e).strip()[:200]!r}"


def mutate_proto(rng: random.Random, seed: Seed, files: dict[str, bytes]) -> str:
    """Re-encode the index of a V2 seed with extreme fields; every CRC stays valid."""
    name = seed.index_name
    items = table_items(files[name], name)
    sizes = {n: len(b) for n, b in files.items() if ".data-" in n}
    descs = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.choice(("entry", "entry", "entry", "entry", "header", "drop", "add", "dup_value",
                         "slice_key", "data"))
        if op == "header" and items and items[0][0] == b"":
            v, d = _mutate_header(rng, items[0][1])
            items[0] = (b"", v)
        elif op == "drop" and items:
            i = rng.randrange(len(items))
            d = f"drop key {items[i][0]!r}"
            del items[i]
        elif op == "add":
            key = rng.choice((rng.randbytes(rng.randint(1, 12)), b"\xff" * 3, b"x" * 300, b"../../etc"))
            if key not in dict(items):
                items.append((key, rng.choice(items)[1] if items else b""))
            d = f"add key {key!r}"
        elif op == "dup_value" and len(items) > 2:
            i, j = rng.randrange(1, len(items)), rng.randrange(1, len(items))
            items[i] = (items[i][0], items[j][1])
            d = f"value of {items[j][0]!r} under {items[i][0]!r}"
        elif op == "slice_key" and len(items) > 1:
            i = rng.randrange(1, len(items))
            e = _entry_or_empty(items[i][1])
            sl = tuple((0, -1) if rng.random() < 0.5 else (0, 1) for _ in e.shape.dim)
            e.slices.add().extent.extend([])
            del e.slices[:]
            sp = e.slices.add()
            for start, length in sl:
                ext = sp.extent.add()
                if length != -1:
                    ext.start, ext.length = start, length
            items[i] = (items[i][0], e.SerializeToString())
            d = f"{items[i][0]!r} made partitioned with slice {sl} (no slice entry)"
        elif op == "data" and sizes and len(items) > 1:
            # Change a tensor's bytes but fix its CRC: the decoders see valid-CRC garbage.
            i = rng.randrange(1, len(items))
            try:
                e = BundleEntryProto.FromString(items[i][1])
            except Exception:
                continue
            dn = bundle.data_filename(seed.prefix, e.shard_id, max(1, len(sizes)))
            if dn in files and 0 <= e.offset and e.size > 0 and e.offset + e.size <= len(files[dn]):
                buf = bytearray(files[dn])
                pos = e.offset + rng.randrange(e.size)
                buf[pos] = rng.getrandbits(8)
                files[dn] = bytes(buf)
                e.crc32c = mask_crc(crc32c(buf[e.offset:e.offset + e.size]))
                items[i] = (items[i][0], e.SerializeToString())
                d = f"data byte {pos} of {dn} changed, CRC of {items[i][0]!r} recomputed"
            else:
                d = "data (skipped)"
        elif len(items) > 1:
            i = rng.randrange(1, len(items))
            v, d = _mutate_entry(rng, items[i][0], items[i][1], sizes)
            items[i] = (items[i][0], v)
        else:
            d = "noop"
        descs.append(d)
    dedup = dict(items)
    block = rng.choice((tbl.BLOCK_SIZE, 64, 200))
    layout = rng.choice(("plain", "plain", "snappy", "shuffle", "dup", "drop"))
    order = None
    if layout == "shuffle":
        order = lambda bl: rng.sample(bl, len(bl))  # noqa: E731
    elif layout == "dup":
        order = lambda bl: bl + bl[:1]  # noqa: E731
    elif layout == "drop":
        order = lambda bl: bl[1:] if len(bl) > 1 else bl  # noqa: E731
    files[name] = build_table(list(dedup.items()), block_size=block, snappy=layout == "snappy", order=order)
    return "; ".join(descs) + f"; table {layout} block_size={block}"


def mutate_case(rng: random.Random, seed: Seed) -> tuple[dict[str, bytes], str]:
    files = dict(seed.files)
    r = rng.random()
    if not seed.v1 and r < 0.45:
        return files, "proto: " + mutate_proto(rng, seed, files)
    if r < 0.55 and len(files) > 1:
        victim = rng.choice(sorted(files))
        del files[victim]
        return files, f"remove file {victim}"
    if seed.v1:
        targets = seed.table_files()
    else:
        targets = seed.table_files() * 3 + seed.data_files()
    victim = rng.choice(targets)
    files[victim], d = mutate_bytes(rng, files[victim])
    return files, f"bytes {victim}: {d}"


# --------------------------------------------------------------------------- guards


class CaseTimeout(BaseException):
    """A case ran past its deadline (BaseException: no `except Exception` swallows it)."""


@contextlib.contextmanager
def deadline(seconds: float):
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum, frame):
        raise CaseTimeout(f"case ran past its {seconds}s deadline")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@contextlib.contextmanager
def memory_cap(extra_bytes: int):
    """Cap the address space at what is mapped now plus ``extra_bytes``.

    numpy's ``np.empty`` of a size read from a corrupt file would otherwise
    succeed lazily under overcommit and go unnoticed; under the cap it raises
    MemoryError, which is not a CkptError, so the case fails.
    """
    current = _vm_size()
    if extra_bytes <= 0 or not current:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# --------------------------------------------------------------------------- targets


def _cli(argv) -> int:
    """Run the CLI in-process; its exit code. Non-CkptError exceptions propagate."""
    from ckptool.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
    text = err.getvalue()
    if code not in (0, 1):
        raise AssertionError(f"CLI {argv} exited {code}: {text[-500:]}")
    if "Traceback" in text:
        raise AssertionError(f"CLI {argv} printed a traceback: {text[-500:]}")
    if code == 1 and "ckptool: error:" not in text:
        raise AssertionError(f"CLI {argv} exited 1 without an error line: {text[-500:]}")
    return code


def _has_command(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(f"ckptool.cli.commands.{name}") is not None


def run_open(path: str, rng: random.Random) -> str:
    import ckptool

    with ckptool.open(path) as ck:
        vs = ck.variables()
        ck.names()
        _ = "nope" in ck
        return f"{len(vs)} variables"


def run_read(path: str, rng: random.Random) -> str:
    import ckptool

    ok = bad = 0
    with ckptool.open(path) as ck:
        for v in ck.variables():
            for verify in (True, False):
                try:
                    ck.read(v.name, verify=verify)
                    ok += 1
                except CkptError:
                    bad += 1
        if ck.is_object_based:
            try:
                g = ck.object_graph()
                if g is not None:
                    list(g.paths()) if hasattr(g, "paths") else None
            except CkptError:
                bad += 1
    return f"{ok} reads, {bad} refused"


def run_verify(path: str, rng: random.Random) -> str:
    import ckptool

    with ckptool.open(path) as ck:
        results = list(ck.verify())
    if rng.random() < 0.2:
        if _has_command("inspect"):
            _cli(["inspect", "--verify", path])
        _cli(["list-variables", "--json", path])
    return f"{sum(1 for _, e in results if e)} of {len(results)} corrupt"


CHECKPOINT_TARGETS = {"open": run_open, "read": run_read, "verify": run_verify}


# ---- state files

def state_texts(rng: random.Random, names: list[str], outside: str) -> tuple[str, str]:
    """A mutated or hostile checkpoint state text, and its description."""
    from ckptool.io.control.state import CheckpointState

    hostile = ["..", "../x", "../../etc/passwd", "/", "/etc/passwd", outside, outside + "/ckpt-1",
               "a" * 5000, "a\0b", "ckpt\n-1", "\x00", "", ".", "./", "link/ckpt-1", "ckpt-1\\..\\..",
               "s3://bucket/x", "file:///etc/passwd", "~/x", "ckpt-1/../../x"]
    pool = names + hostile
    kind = rng.choice(("valid", "hostile", "bytes", "bytes", "text"))
    paths = [rng.choice(pool) for _ in range(rng.randint(0, 4))]
    ts = [rng.choice((0.0, -1.0, 1e300, float("nan"), float("inf"), 1.7e9)) for _ in paths]
    st = CheckpointState(rng.choice(pool), paths, ts if rng.random() < 0.5 else [],
                         rng.choice((0.0, 1.7e9, -5.0)))
    text = st.to_text()
    if kind in ("valid", "hostile"):
        return text, f"{kind} state {st!r}"[:300]
    if kind == "bytes":
        data, d = mutate_bytes(rng, text.encode("utf-8", "surrogateescape"))
        return data.decode("latin-1"), f"bytes: {d}"
    junk = rng.choice(('model_checkpoint_path: "a" model_checkpoint_path: "b"', "all_model_checkpoint_paths: 3",
                       'unknown_field: "x"', 'model_checkpoint_path: "\\xff\\xfe"', "{" * 200,
                       'model_checkpoint_path: "' + "\\" * 99 + '"', "model_checkpoint_path: ''",
                       'last_preserved_timestamp: 1e999', "\ufeffmodel_checkpoint_path: \"a\""))
    return junk, f"text {junk[:60]!r}"


class Scratch:
    """A per-run scratch tree: ``case/`` (the directory given), and ``outside/`` beside it."""

    def __init__(self):
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="ckptool-fuzz-", dir=base))
        self.case = self.root / "case"
        self.outside = self.root / "outside"

    def reset(self) -> pathlib.Path:
        if self.case.exists():
            shutil.rmtree(self.case)
        self.case.mkdir()
        return self.case

    def make_outside(self) -> dict[str, bytes]:
        """A checkpoint and a file outside the case directory, that must stay untouched."""
        if self.outside.exists():
            shutil.rmtree(self.outside)
        self.outside.mkdir()
        from ckptool.ops.write.writer import write

        write(str(self.outside / "ckpt-1"), {"keep": np.arange(2, dtype=np.int8)}, sync=False)
        (self.outside / "precious").write_bytes(b"precious")
        return snapshot(self.outside)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def snapshot(directory: pathlib.Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(directory))] = p.read_bytes()
    return out


def _write_files(directory: pathlib.Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        p = directory / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def _small_dir(directory: pathlib.Path, steps=(1, 2, 3, 4)) -> list[str]:
    from ckptool.ops.write.writer import write

    for s in steps:
        write(str(directory / f"ckpt-{s}"), {"w": np.full(2, s, np.float32)}, sync=False)
    return [f"ckpt-{s}" for s in steps]


def _maybe_symlinks(rng, directory: pathlib.Path, outside: pathlib.Path) -> None:
    if rng.random() < 0.3:
        os.symlink(outside, directory / "link")
    if rng.random() < 0.2:
        os.symlink(outside / "ckpt-1.index", directory / "ckpt-9.index")
        os.symlink(outside / "ckpt-1.data-00000-of-00001", directory / "ckpt-9.data-00000-of-00001")


def run_state(scratch: Scratch, rng: random.Random, seed_files) -> str:
    from ckptool.io.control import state
    from ckptool.io.layout import checkpoints as paths

    d = scratch.reset()
    names = _small_dir(d, (1, 2))
    text, desc = state_texts(rng, names, str(scratch.outside))
    (d / "checkpoint").write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    try:
        state.read_state(str(d))
    except CkptError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loc = paths.locate(str(d))
        _check_inside(loc.prefix, d, scratch, desc)
    except CkptError:
        pass
    if _has_command("state") and rng.random() < 0.2:
        _cli(["state", "--json", str(d)])
    return desc


def _check_inside(prefix: str, d: pathlib.Path, scratch: Scratch, desc: str) -> None:
    real = os.path.realpath(prefix)
    if not real.startswith(os.path.realpath(d) + os.sep):
        # Reading outside is what TF does for an absolute path in the state file; it is
        # reported here only when it reaches our sentinel directory.
        if real.startswith(os.path.realpath(scratch.outside)):
            raise AssertionError(f"located {prefix!r} outside the directory given ({desc})")


def run_prune(scratch: Scratch, rng: random.Random, seed_files) -> str:
    """Prune a directory whose state file is hostile or mutated, whose checkpoints may be
    corrupt: only CkptErrors, and nothing outside the directory is deleted or changed."""
    import importlib

    manage = importlib.import_module("ckptool.ops.retain.prune")
    before_out = scratch.make_outside()
    d = scratch.reset()
    names = _small_dir(d, (1, 2, 3, 4))
    _maybe_symlinks(rng, d, scratch.outside)
    text, desc = state_texts(rng, names, str(scratch.outside))
    if rng.random() < 0.8:
        (d / "checkpoint").write_bytes(text.encode("utf-8", "surrogateescape"))
    if rng.random() < 0.3:
        victim = d / f"ckpt-{rng.randint(1, 4)}.index"
        data, d2 = mutate_bytes(rng, victim.read_bytes())
        victim.write_bytes(data)
        desc += f"; index {victim.name}: {d2}"
    kwargs = {"max_to_keep": rng.choice((1, 2, 3, None)), "dry_run": rng.random() < 0.2}
    if rng.random() < 0.3:
        kwargs["scan"] = True
    try:
        _prune_call(manage, str(d), kwargs)
    except CkptError:
        pass
    after_out = snapshot(scratch.outside)
    if after_out != before_out:
        raise AssertionError(f"prune changed files outside the directory ({desc}; {kwargs})")
    return desc + f"; {kwargs}"


def _prune_call(manage, directory: str, kwargs: dict):
    import inspect as _inspect

    fn = manage.prune
    params = _inspect.signature(fn).parameters
    use = {k: v for k, v in kwargs.items() if k in params}
    return fn(directory, **use)


# --------------------------------------------------------------------------- running


@dataclass
class Stats:
    target: str
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)

    def line(self) -> str:
        top = ", ".join(f"{k} {v}" for k, v in self.outcomes.most_common(6))
        return f"{self.target}: {self.cases} cases, {len(self.failures)} failures ({top})"


def run(target: str, cases: int, seed: int = 0, timeout: float = 10.0, mem_cap: int = 1 << 30,
        seeds: list[Seed] | None = None, start: int = 0, stop_after: int = 20, log=None) -> Stats:
    """Run ``cases`` cases of ``target``; case ``i`` is replayable from (seed, i)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; one of {', '.join(TARGETS)}")
    stats = Stats(target)
    scratch = Scratch()
    tmp = scratch.root / "seeds"
    tmp.mkdir()
    try:
        if target == "prune":
            import importlib.util

            if importlib.util.find_spec("ckptool.ops.retain.prune") is None:
                stats.outcomes["skipped: ckptool.ops.retain.prune not present"] = cases
                return stats
        if seeds is None and target in CHECKPOINT_TARGETS:
            seeds = load_seeds(tmp)
        for i in range(start, start + cases):
            rng = random.Random(seed * 1_000_003 + i)
            desc = ""
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with deadline(timeout), memory_cap(mem_cap):
                        if target in CHECKPOINT_TARGETS:
                            s = seeds[i % len(seeds)]
                            files, desc = mutate_case(rng, s)
                            desc = f"{s.name}: {desc}"
                            d = scratch.reset()
                            _write_files(d, files)
                            CHECKPOINT_TARGETS[target](str(d / s.prefix), rng)
                        elif target == "state":
                            desc = run_state(scratch, rng, None)
                        else:
                            desc = run_prune(scratch, rng, None)
                stats.outcomes["ok"] += 1
            except CkptError as exc:
                stats.outcomes[type(exc).__name__] += 1
            except (Exception, CaseTimeout) as exc:  # noqa: BLE001 - that is the point
                stats.outcomes["FAIL " + type(exc).__name__] += 1
                stats.failures.append((i, desc, "".join(traceback.format_exception(exc))[-2500:]))
                if log:
                    print(f"FAIL case {i} (seed {seed}): {desc}\n{stats.failures[-1][2]}", file=log)
                if len(stats.failures) >= stop_after:
                    stats.cases += 1
                    break
            stats.cases += 1
    finally:
        scratch.close()
    return stats


def main_check(stats: Stats) -> None:  # pragma: no cover - used by run.py
    print(stats.line())
    for i, desc, tb in stats.failures[:5]:
        print(f"--- case {i}: {desc}\n{tb}", file=sys.stderr)


__all__ = ["run", "load_seeds", "mutate_case", "build_table", "Seed", "Stats", "TARGETS", "deadline",
           "memory_cap", "struct", "FIXED32"]
