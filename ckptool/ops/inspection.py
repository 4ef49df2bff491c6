"""Looking inside a checkpoint: summary, values as JSON, statistics, verification, tree.

Everything here streams: statistics and verification read each tensor in
chunks of at most :data:`CHUNK_BYTES` (string and variant tensors, V1
checkpoints and, for ordered reads, partitioned tensors are read whole),
so memory stays bounded by the chunk size or the largest tensor.

The JSON forms returned here are the ones ``ckptool inspect --json``
prints (CONTRACT.md: stable across releases):

- tensor values (:func:`json_value`): nested lists in row-major order, a
  scalar for shape ``[]``; integers and booleans as JSON numbers and
  booleans (64-bit integers exactly, which some JSON readers round);
  floating-point values of every width (bfloat16 and float8 included) as
  numbers, written in the shortest form that reads back to the same value of
  that dtype; non-finite ones as the strings ``"NaN"``, ``"Infinity"`` and
  ``"-Infinity"`` (protobuf's JSON mapping), so the document stays valid
  JSON; complex values as ``{"real": x, "imag": y}``; string elements as
  text where they are valid UTF-8, else ``{"base64": "..."}``; variant
  elements always as ``{"base64": "..."}`` of their serialized bytes.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ckptool.errors import ChecksumError, CkptError, CorruptError
from ckptool.format import bundle, dtypes
from ckptool.format.coding import crc32c, unmask_crc
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, VARIABLE_VALUE
from ckptool.io.layout import checkpoint_files, list_checkpoints, meta_graph_filename, resolve_recorded, step_of
from ckptool.io.state import read_state, resolve, state_path

#: Largest read made at once by statistics, verification and diff.
CHUNK_BYTES = 8 << 20


def _shown(key: bytes) -> str:
    return key.decode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- summary


@dataclass
class CheckpointInfo:
    """One checkpoint of a directory's state, as ``inspect`` shows it."""

    prefix: str
    path: str  # as recorded in the state file ("" for checkpoints found on disk only)
    step: int | None
    timestamp: float | None  # from the state file, else the .index modification time
    bytes: int | None  # every file of the checkpoint; None when it is not on disk
    status: str  # "latest", "kept", "preserved", "untracked" or "missing"

    def to_json(self) -> dict:
        return {"prefix": self.prefix, "path": self.path, "step": self.step, "timestamp": self.timestamp,
                "time": iso_time(self.timestamp), "bytes": self.bytes, "status": self.status,
                "latest": self.status == "latest"}


def iso_time(ts: float | None) -> str | None:
    if ts is None:
        return None
    import datetime

    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def directory_state(directory: str, storage) -> dict | None:
    """The ``checkpoint`` state of ``directory`` with every checkpoint there, or None.

    Each checkpoint named by the state file or found on disk gets a status:
    ``latest`` (model_checkpoint_path), ``kept`` (listed, managed by
    retention), ``preserved`` (on disk, no longer listed, at or before
    ``last_preserved_timestamp``, as ``keep_checkpoint_every_n_hours`` leaves
    them), ``untracked`` (on disk, not listed, newer than that: from another
    run or written with ``--no-state``), ``missing`` (listed, not on disk).
    """
    state = read_state(directory, storage)
    if state is None:
        return None
    on_disk = set(list_checkpoints(storage, directory))

    def where(p: str) -> str:
        # a recorded absolute path of a moved directory: the same name inside it (the layout's rule)
        rec = resolve_recorded(storage, directory, p, warn=False)
        return storage.join(directory, rec.base) if rec.base else resolve(directory, p, storage)

    latest = where(state.model_checkpoint_path)
    listed = [where(p) for p in state.all_model_checkpoint_paths]
    if latest not in listed:
        listed.append(latest)
    stamps = dict(zip([where(p) for p in state.all_model_checkpoint_paths], state.all_model_checkpoint_timestamps))
    recorded = dict(zip(listed, list(state.all_model_checkpoint_paths) + [state.model_checkpoint_path]))
    out = []
    order = lambda p: (step_of(p) is None, step_of(p) or 0, p not in listed, p)  # noqa: E731
    for prefix in sorted(on_disk | set(listed), key=order):
        present = prefix in on_disk or storage.isfile(prefix + bundle.INDEX_SUFFIX)
        size = None
        mtime = None
        if present:
            files = checkpoint_files(storage, prefix)
            size = sum(storage.size(f) for f in files)
            idx = prefix + bundle.INDEX_SUFFIX
            mtime = storage.mtime(idx) if storage.isfile(idx) else (storage.mtime(files[0]) if files else None)
        ts = stamps.get(prefix, mtime)
        if not present:
            status = "missing"
        elif prefix == latest:
            status = "latest"
        elif prefix in listed:
            status = "kept"
        elif state.last_preserved_timestamp and ts is not None and ts <= state.last_preserved_timestamp + 1e-3:
            status = "preserved"
        else:
            status = "untracked"
        out.append(CheckpointInfo(prefix, recorded.get(prefix, ""), step_of(prefix), ts, size, status))
    return {
        "path": state_path(directory, storage),
        "model_checkpoint_path": state.model_checkpoint_path,
        "last_preserved_timestamp": state.last_preserved_timestamp or None,
        "checkpoints": [c.to_json() for c in out],
    }


def summary(ck, path: str | None = None) -> dict:
    """What ``inspect`` prints by default, as a JSON-ready dict.

    ``path`` is the CHECKPOINT argument as given: when it is a directory with
    a ``checkpoint`` state file, the state is included.
    """
    storage = ck.storage
    variables = ck.variables()
    by_dtype: dict[str, dict] = {}
    for v in variables:
        d = by_dtype.setdefault(v.dtype, {"variables": 0, "parameters": 0, "bytes": 0})
        d["variables"] += 1
        d["parameters"] += v.numel
        d["bytes"] += v.nbytes
    doc = {
        "prefix": ck.prefix,
        "format": ck.format,
        "object_based": ck.is_object_based,
        "variables": len(variables),
        "parameters": sum(v.numel for v in variables),
        "bytes": sum(v.nbytes for v in variables),
        "partitioned": sum(1 for v in variables if v.num_slices),
        "dtypes": dict(sorted(by_dtype.items(), key=lambda kv: (-kv[1]["bytes"], kv[0]))),
    }
    if ck.format == "V2":
        h = ck.header
        doc["index"] = {"path": ck.index_path, "bytes": ck.index_size}
        doc["shards"] = [{"path": p, "bytes": storage.size(p) if storage.isfile(p) else None}
                         for p in ck.shard_paths()]
        doc["bundle"] = {"producer": h.producer, "min_consumer": h.min_consumer,
                         "endianness": "big" if h.big_endian else "little"}
    else:
        doc["files"] = [{"path": p, "bytes": storage.size(p)} for p in ck.files]
    meta = meta_graph_filename(ck.prefix)
    doc["meta_graph"] = None
    if storage.isfile(meta):
        doc["meta_graph"] = {"path": meta, "bytes": storage.size(meta), **_meta_versions(storage, meta)}
    doc["state"] = None
    if path is not None and storage.isdir(path.rstrip("/") or "/"):
        doc["state"] = directory_state(path.rstrip("/") or "/", storage)
    return doc


#: A .meta file is read for its version strings only up to this size.
META_READ_LIMIT = 256 << 20


def _meta_versions(storage, path: str) -> dict:
    """tensorflow_version / tensorflow_git_version from a MetaGraphDef's MetaInfoDef (fields 1 -> 5, 6)."""
    out = {"tensorflow_version": None, "tensorflow_git_version": None}
    if storage.size(path) > META_READ_LIMIT:
        return out
    try:
        info = _proto_field(storage.read_bytes(path), 1)
        if info is not None:
            for num, key in ((5, "tensorflow_version"), (6, "tensorflow_git_version")):
                raw = _proto_field(info, num)
                if raw is not None:
                    out[key] = bytes(raw).decode("utf-8", "replace")
    except CkptError:
        pass
    return out


def _proto_field(buf, number: int):
    """The last length-delimited field ``number`` of a serialized message, or None."""
    from ckptool.format.coding import decode_varint

    view = memoryview(buf)
    pos, end, found = 0, len(view), None
    while pos < end:
        tag, pos = decode_varint(view, pos, end, what="meta graph")
        wire = tag & 7
        if wire == 0:
            _, pos = decode_varint(view, pos, end, what="meta graph")
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            n, pos = decode_varint(view, pos, end, what="meta graph")
            if pos + n > end:
                raise CorruptError("meta graph: field runs past the end")
            if tag >> 3 == number:
                found = view[pos:pos + n]
            pos += n
        else:
            raise CorruptError(f"meta graph: unsupported wire type {wire}")
    return found


# --------------------------------------------------------------------------- values as JSON

_NONFINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def json_value(arr: np.ndarray, dtype: str | None = None):
    """A tensor value as JSON-ready nested lists (see the module docstring)."""
    arr = np.asarray(arr)
    shape = arr.shape
    flat = arr.reshape(-1)
    if arr.dtype == object:
        variant = dtype == "variant"
        items = [_json_bytes(x, variant) for x in flat.tolist()]
    elif arr.dtype.names:  # TF's quantized types: one-field structured dtypes
        return json_value(arr[arr.dtype.names[0]])
    elif arr.dtype.kind in "biu":
        return arr.tolist()
    elif arr.dtype.kind == "c":
        items = [{"real": _json_float(z.real), "imag": _json_float(z.imag)} for z in flat.tolist()]
    elif arr.dtype.kind == "f":
        if arr.dtype == np.float64:
            items = flat.tolist()
        else:  # shortest text that reads back to the same float16/float32
            items = [float(s) for s in flat.astype(str).tolist()]
        if not np.isfinite(flat).all():
            items = [_json_float(x) for x in items]
    else:  # ml_dtypes: bfloat16, float8, float4 give floats, int4 / int2 give ints
        items = flat.tolist()
        if items and isinstance(items[0], float):
            items = [_json_float(x) for x in items]
    if not shape:
        return items[0]
    return _nest(items, shape)


def _json_float(x: float):
    if math.isfinite(x):
        return x
    return _NONFINITE["nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")]


def _json_bytes(b, variant: bool):
    b = bytes(b)
    if not variant:
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return {"base64": base64.b64encode(b).decode("ascii")}


def _nest(items: list, shape: tuple):
    if len(shape) == 1:
        return items
    if 0 in shape:
        # numpy's tolist of a zero-size array: nested empties down to the first zero
        def empty(dims):
            if not dims or dims[0] == 0:
                return []
            return [empty(dims[1:]) for _ in range(dims[0])]

        return empty(shape)
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape).tolist()


def tensor_json(ck, name: str) -> dict:
    """``{"name", "dtype", "shape", "value"}`` for one tensor."""
    v = ck.variable(name)
    return {"name": v.name, "dtype": v.dtype, "shape": list(v.shape),
            "value": json_value(ck.read(name), v.dtype)}


# --------------------------------------------------------------------------- chunked reads


def _byteswap(arr: np.ndarray, itemsize: int) -> np.ndarray:
    if arr.dtype.kind == "c":
        return arr.byteswap()
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64}[itemsize]
    return arr.view(width).byteswap().view(arr.dtype)


def entry_chunks(ck, e, verify: bool = True, chunk_bytes: int = CHUNK_BYTES,
                 on_bytes: Callable[[int], None] | None = None) -> Iterator[np.ndarray]:
    """Flat chunks of a plain fixed-size V2 entry, its CRC32C checked across them.

    The chunks share one buffer: use each before asking for the next. A
    mismatch raises ChecksumError after the last chunk.
    """
    reader = ck._reader(e.shard_id, e.key)
    ck._check_bounds(e, reader)
    itemsize = e.dtype.itemsize
    numel = e.numel
    per = max(1, chunk_bytes // itemsize)
    buf = np.empty(min(per, numel), dtype=e.dtype.numpy)
    crc = 0
    done = 0
    swap = ck.header.big_endian and itemsize > 1
    while done < numel:
        n = min(per, numel - done)
        arr = buf[:n]
        raw = arr.view(np.uint8)
        reader.readinto(e.offset + done * itemsize, raw)
        if verify:
            crc = crc32c(raw, crc)
        if on_bytes is not None:
            on_bytes(n * itemsize)
        yield _byteswap(arr, itemsize) if swap else arr
        done += n
    if verify and crc != unmask_crc(e.crc32c):
        raise ChecksumError(
            f"{reader.path}: checksum does not match for tensor {_shown(e.key)!r}: stored "
            f"{unmask_crc(e.crc32c):08x}, calculated {crc:08x} on {e.size} bytes at offset {e.offset}")


def tensor_chunks(ck, name: str, ordered: bool = True, verify: bool = True,
                  chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The elements of tensor ``name`` as flat chunks.

    Fixed-size tensors of a V2 bundle are read ``chunk_bytes`` at a time;
    with ``ordered=False`` a partitioned tensor's slices are streamed one
    after the other (element order then follows the slices, which is all
    statistics need). Anything else is read whole and then cut up.
    """
    v = ck.variable(name)
    if ck.format == "V2":
        e = ck._lookup(name)
        if e.dtype.is_fixed and not e.slices:
            yield from entry_chunks(ck, e, verify, chunk_bytes)
            return
        if e.dtype.is_fixed and not ordered:
            parts = [ck._slice_entry(e, sl) for sl in e.slices]
            stored = sum(p.numel for p in parts)
            if stored != e.numel:
                ck.read(name, verify=verify)  # raises the reader's own "insufficient slices" error
                raise CorruptError(f"{ck.index_path}: slices of {name!r} hold {stored} elements, "
                                   f"the tensor {e.numel}")
            for p in parts:
                yield from entry_chunks(ck, p, verify, chunk_bytes)
            return
    arr = ck.read(name, verify=verify).reshape(-1)
    itemsize = max(1, arr.dtype.itemsize)
    per = max(1, chunk_bytes // itemsize)
    for i in range(0, max(v.numel, 0), per):
        yield arr[i:i + per]


# --------------------------------------------------------------------------- statistics


@dataclass
class _Acc:
    count: int = 0
    finite: int = 0
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations, divided by scale**2 (no overflow near float64 max)
    scale: float = 1.0  # a power of two >= every |value| seen
    lo: object = None
    hi: object = None
    nan: int = 0
    inf: int = 0
    zeros: int = 0

    def add_float(self, f: np.ndarray) -> None:
        self.count += f.size
        if f.size == 0:
            return
        fin = np.isfinite(f)
        nfin = int(fin.sum())
        if nfin != f.size:
            self.nan += int(np.isnan(f).sum())
            self.inf += int(np.isinf(f).sum())
            f = f[fin]
        self.zeros += int(np.count_nonzero(f == 0))
        if nfin:
            lo, hi = float(f.min()), float(f.max())
            self.lo = lo if self.lo is None else min(self.lo, lo)
            self.hi = hi if self.hi is None else max(self.hi, hi)
            self._add_finite(f, max(abs(lo), abs(hi)))

    def add_int(self, a: np.ndarray) -> None:
        self.count += a.size
        if a.size == 0:
            return
        lo, hi = a.min().item(), a.max().item()
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.zeros += int(np.count_nonzero(a == 0))
        self._add_finite(a.astype(np.float64), float(max(abs(lo), abs(hi))))

    def _add_finite(self, f: np.ndarray, biggest: float) -> None:
        """Chan et al.'s parallel update of (count, mean, M2), in units of ``scale``."""
        scale = max(self.scale, math.ldexp(1.0, min(math.frexp(biggest)[1], 1023)) if biggest else 1.0)
        if scale != self.scale:
            self.m2 *= (self.scale / scale) ** 2
            self.scale = scale
        g = f / scale
        mean = float(g.mean())
        m2 = float(((g - mean) ** 2).sum())
        n, tot = f.size, self.finite + f.size
        delta = mean - self.mean / scale
        self.mean = (self.mean / scale + delta * n / tot) * scale
        self.m2 += m2 + delta * delta * self.finite * n / tot
        self.finite = tot

    def std(self) -> float:
        return math.sqrt(max(self.m2, 0.0) / self.finite) * self.scale


def tensor_stats(ck, name: str, chunk_bytes: int = CHUNK_BYTES) -> dict:
    """min, max, mean, std, NaN, Inf and zero counts of one tensor, read in chunks.

    min/max/mean/std are over the finite elements (std is the population
    standard deviation); complex tensors give them over the magnitudes;
    booleans count as 0 and 1; string and variant tensors give counts only.
    """
    v = ck.variable(name)
    doc = {"name": v.name, "dtype": v.dtype, "shape": list(v.shape), "count": v.numel,
           "min": None, "max": None, "mean": None, "std": None, "nan": 0, "inf": 0, "zeros": 0}
    dt = dtypes.from_name(v.dtype)
    if not dt.is_fixed:
        doc["nan"] = doc["inf"] = doc["zeros"] = None
        return doc
    acc = _Acc()
    for chunk in tensor_chunks(ck, name, ordered=False, chunk_bytes=chunk_bytes):
        if chunk.dtype.names:
            chunk = chunk[chunk.dtype.names[0]]
        kind = chunk.dtype.kind
        if kind == "b":
            acc.add_int(chunk.view(np.uint8))
        elif kind in "iu":
            acc.add_int(chunk)
        elif kind == "c":
            acc.add_float(np.abs(chunk).astype(np.float64))
        elif kind == "f":
            acc.add_float(chunk.astype(np.float64, copy=False))
        else:  # ml_dtypes
            f = chunk.astype(np.float64)
            if dt.name.startswith(("int", "uint")):
                acc.add_int(f.astype(np.int64))
            else:
                acc.add_float(f)
    doc.update(nan=acc.nan, inf=acc.inf, zeros=acc.zeros)
    if acc.finite:
        doc.update(min=acc.lo, max=acc.hi, mean=acc.mean, std=acc.std())
    return doc


# --------------------------------------------------------------------------- verification


@dataclass
class Problem:
    name: str  # the tensor (or "" for the checkpoint as a whole)
    error: str

    def to_json(self) -> dict:
        return {"name": self.name, "error": self.error}


@dataclass
class VerifyReport:
    prefix: str
    tensors: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"prefix": self.prefix, "ok": self.ok, "tensors": self.tensors, "bytes": self.bytes,
                "errors": [p.to_json() for p in self.problems]}


def verify(ck, progress: Callable[[int, int], None] | None = None,
           chunk_bytes: int = CHUNK_BYTES) -> VerifyReport:
    """Read every stored byte and check every checksum; collect each problem.

    ``progress(done_bytes, total_bytes)`` is called as data is read. The
    index (every block CRC, every entry) was already checked when ``ck`` was
    opened; here each entry is parsed again so that one bad entry does not
    hide the others.
    """
    report = VerifyReport(ck.prefix)
    if ck.format != "V2":
        return _verify_v1(ck, report, progress)
    entries, owners = [], {}
    for key in ck.keys():
        try:
            e = ck.entry(key)
        except CkptError as exc:
            report.problems.append(Problem(_shown(key), str(exc)))
            continue
        entries.append(e)
    for e in entries:
        for sl in e.slices:
            owners[bundle.encode_tensor_name_slice(e.key, sl)] = _shown(e.key)
            try:
                ck._slice_entry(e, sl)
            except CkptError as exc:
                report.problems.append(Problem(_shown(e.key), str(exc)))
    plain = [e for e in entries if not e.slices]
    total = sum(e.size for e in plain)
    done = 0
    if progress:
        progress(0, total)
    for e in plain:
        name = owners.get(e.key, _shown(e.key))
        start = done

        def tick(n):
            nonlocal done
            done += n
            if progress:
                progress(done, total)

        try:
            if e.dtype.is_fixed:
                for _ in entry_chunks(ck, e, True, chunk_bytes, tick):
                    pass
            else:
                ck._read_plain(e, True)
        except CkptError as exc:
            report.problems.append(Problem(name, str(exc)))
        done = start + e.size
        if progress:
            progress(done, total)
        if e.key not in owners:
            report.tensors += 1
        report.bytes += e.size
    report.tensors += sum(1 for e in entries if e.slices)
    return report


def _verify_v1(ck, report: VerifyReport, progress) -> VerifyReport:
    variables = ck.variables()
    total = sum(v.nbytes for v in variables)
    done = 0
    for v in variables:
        try:
            ck.read(v.name, verify=True)
        except CkptError as exc:
            report.problems.append(Problem(v.name, str(exc)))
        done += v.nbytes
        report.tensors += 1
        report.bytes += v.nbytes
        if progress:
            progress(done, total)
    return report


# --------------------------------------------------------------------------- tree


@dataclass
class TreeNode:
    """A node of the object graph (or of the name hierarchy of a name-based checkpoint).

    ``parameters`` and ``bytes`` total the subtree: the node's own tensors,
    its children's, and, for an optimizer, the slot variables it owns (shown
    under the variables they belong to, in ``slots``).
    """

    name: str
    path: str
    tensor: dict | None = None  # {"key", "dtype", "shape", "parameters", "bytes"}
    attributes: list[dict] = field(default_factory=list)  # other attributes: {"name", ...tensor}
    slots: list[dict] = field(default_factory=list)  # {"slot", "optimizer", ...tensor}
    children: list["TreeNode"] = field(default_factory=list)
    alias_of: str | None = None  # a second edge to an object shown elsewhere
    parameters: int = 0
    bytes: int = 0
    owned_slots: int = 0

    def to_json(self) -> dict:
        out = {"name": self.name, "path": self.path, "parameters": self.parameters, "bytes": self.bytes}
        if self.alias_of is not None:
            out["alias_of"] = self.alias_of
        if self.tensor is not None:
            out["tensor"] = self.tensor
        if self.attributes:
            out["attributes"] = self.attributes
        if self.slots:
            out["slots"] = self.slots
        if self.owned_slots:
            out["owned_slots"] = self.owned_slots
        out["children"] = [c.to_json() for c in self.children]
        return out


def _tensor_doc(var, key: str) -> dict:
    return {"key": key, "dtype": var.dtype, "shape": list(var.shape), "parameters": var.numel,
            "bytes": var.nbytes}


def tree(ck) -> TreeNode:
    """The object graph as a tree (object-based), else the '/'-scopes of the names."""
    graph = ck.object_graph()
    if graph is None:
        return _name_tree(ck)
    return _object_tree(ck, graph)


def _object_tree(ck, graph) -> TreeNode:
    variables = {v.name: v for v in ck.variables()}
    used = set()
    nodes = graph.nodes
    view: dict[int, TreeNode] = {}
    paths = graph.paths()
    # spanning tree in breadth-first order: the first edge to reach a node owns it
    root = TreeNode("", "")
    view[0] = root
    aliases: list[tuple[TreeNode, int]] = []
    order = [0]
    i = 0
    while i < len(order):
        nid = order[i]
        i += 1
        for local, child in nodes[nid].children:
            if child in view:
                alias = TreeNode(local, _join(view[nid].path, local), alias_of=view[child].path)
                aliases.append((alias, child))
                view[nid].children.append(alias)
                continue
            tn = TreeNode(local, paths.get(child, _join(view[nid].path, local)))
            view[child] = tn
            view[nid].children.append(tn)
            order.append(child)
    owners = graph.slot_owners()
    for nid, tn in view.items():
        for a in nodes[nid].attributes:
            var = variables.get(a.checkpoint_key)
            if var is None:
                continue
            used.add(a.checkpoint_key)
            doc = _tensor_doc(var, a.checkpoint_key)
            if a.name == VARIABLE_VALUE and tn.tensor is None:
                tn.tensor = doc
            else:
                tn.attributes.append({"name": a.name, **doc})
    for slot_id, (opt_id, var_id, slot_name) in sorted(owners.items()):
        target = view.get(var_id)
        opt = view.get(opt_id)
        for a in nodes[slot_id].attributes:
            var = variables.get(a.checkpoint_key)
            if var is None:
                continue
            used.add(a.checkpoint_key)
            doc = {"slot": slot_name, "optimizer": opt.path if opt else None, **_tensor_doc(var, a.checkpoint_key)}
            (target or root).slots.append(doc)
            if opt is not None:
                opt.owned_slots += 1
                opt.parameters += var.numel
                opt.bytes += var.nbytes
            else:
                root.parameters += var.numel
                root.bytes += var.nbytes
    for alias, target in aliases:  # an alias shows what it points at (counted once, where it lives)
        alias.tensor = view[target].tensor
    for name, var in variables.items():
        if name not in used:  # the object graph itself, or tensors no object claims
            root.attributes.append({"name": name, **_tensor_doc(var, name)})
    _total(root)
    return root


def _join(base: str, local: str) -> str:
    from ckptool.format.objgraph import escape

    return f"{base}/{escape(local)}" if base else escape(local)


def _total(node: TreeNode) -> tuple[int, int]:
    p, b = node.parameters, node.bytes
    for t in ([node.tensor] if node.tensor else []) + node.attributes:
        p += t["parameters"]
        b += t["bytes"]
    for c in node.children:
        if c.alias_of is None:
            cp, cb = _total(c)
            p += cp
            b += cb
    node.parameters, node.bytes = p, b
    return p, b


def _name_tree(ck) -> TreeNode:
    root = TreeNode("", "")
    index: dict[str, TreeNode] = {"": root}
    for v in ck.variables():
        parts = v.name.split("/")
        node = root
        for depth in range(len(parts)):
            path = "/".join(parts[:depth + 1])
            nxt = index.get(path)
            if nxt is None:
                nxt = TreeNode(parts[depth], path)
                index[path] = nxt
                node.children.append(nxt)
            node = nxt
        if node.tensor is None:
            node.tensor = _tensor_doc(v, v.name)
        else:  # pragma: no cover - names are unique
            node.attributes.append({"name": v.name, **_tensor_doc(v, v.name)})
    _total(root)
    return root


__all__ = ["summary", "directory_state", "json_value", "tensor_json", "tensor_chunks", "entry_chunks",
           "tensor_stats", "verify", "VerifyReport", "Problem", "tree", "TreeNode", "CHUNK_BYTES",
           "OBJECT_GRAPH_KEY"]
