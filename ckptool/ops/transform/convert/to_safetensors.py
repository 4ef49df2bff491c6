"""``convert`` to ``.safetensors``: numeric tensors as tensors, the rest in ``__metadata__``.

The header is built from the specs alone (dtypes and shapes from the source's
index), string tensors and the object graph are read first (they go in the
header), then each numeric tensor is read and written in turn: memory stays
bounded by the largest tensor. A V2 entry is copied as its stored bytes
(CRC-checked), never decoded, unless it is cast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UnsupportedError
from ckptool.format import dtypes
from ckptool.format import safetensors_meta as stm
from ckptool.format.cast import target_dtype
from ckptool.format.objgraph import (
    ATTRIBUTES,
    OBJECT_GRAPH_KEY,
    VARIABLE_VALUE,
    ObjectGraph,
)

if TYPE_CHECKING:
    import numpy as np

    from ckptool.format.bundle import Entry
    from ckptool.format.cast import Overflows
    from ckptool.ops.read.source import Opened, Spec
    from ckptool.ops.read.v2 import BundleCheckpoint
    from ckptool.ops.transform.convert.formats import ConvertResult

_SUFFIX = f"/{ATTRIBUTES}/{VARIABLE_VALUE}"


def short_name(key: str) -> str:
    """``model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE`` -> ``model/dense/kernel``."""
    return key.removesuffix(_SUFFIX)


def _string_values(arr: np.ndarray) -> list[bytes]:
    out = []
    for x in arr.reshape(-1).tolist():
        if isinstance(x, str):
            x = x.encode("utf-8")
        out.append(bytes(x))
    return out


class _Header:
    """The header's ``(name, safetensors dtype, shape)`` of each tensor, made afresh on each pass
    (write_file goes through them twice; a list of 300,000 tuples is not kept)."""

    def __init__(self, numeric: list[Spec], stored: Callable[[Spec], str], casts: dict[str, str]):
        self.numeric, self.stored, self.casts = numeric, stored, casts

    def __iter__(self) -> Iterator[tuple[str, str, tuple[int, ...]]]:
        stored, casts = self.stored, self.casts
        return ((stored(s), stm.TF_TO_ST[target_dtype(casts, s.dtype)], s.shape) for s in self.numeric)


def _own_name(s: Spec) -> str:
    return s.name


def _short_plan(specs: list[Spec], graph_bytes: bytes | None, dst: str
                ) -> tuple[list[Spec], dict[int, str], dict[str, str], bytes | None]:
    """``(specs kept, stored name per spec, names mapping, graph bytes)`` for ``--names short``:
    optimizer state dropped (from the object graph when there is one, else by name), object
    keys shortened, the object graph edited to the tensors kept."""
    from ckptool.format.slots import is_optimizer_name

    names = [s.name for s in specs]
    keys = None
    if graph_bytes is not None:
        graph, keys = ObjectGraph.parse(graph_bytes, f"{dst}: {OBJECT_GRAPH_KEY}").edited(
            {}, frozenset(), strip_optimizer=True)
        graph_bytes = graph.serialize()
    seen: dict[str, str]  # stored name -> checkpoint name
    kept, stored, mapping, seen = [], {}, {}, {}
    for s, n in zip(specs, names):
        final = keys.get(n, n) if keys is not None else (None if is_optimizer_name(n) else n)
        if final is None:
            continue
        short = short_name(final) if s.dtype != "string" else final
        if short in seen:
            raise UnsupportedError(f"{dst}: --names short gives {seen[short]!r} and {n!r} one name "
                                   f"{short!r}; use --names full")
        seen[short] = n
        if short != n or final != n:
            mapping[short] = final
        kept.append(s)
        stored[id(s)] = short if s.dtype != "string" else final
    return kept, stored, mapping, graph_bytes


class _StoredString:
    """The one string of a plain DT_STRING entry of a V2 checkpoint, read (and checked) a part
    at a time each time it is gone through: the header is made twice, the graph never held."""

    def __init__(self, ck: BundleCheckpoint, e: Entry, verify: bool):
        self.ck, self.e, self.verify = ck, e, verify

    def parts(self, size: int) -> Iterator[memoryview]:
        from ckptool.ops.read.chunks import string_parts

        return string_parts(self.ck, self.e, memoryview(bytearray(min(size, self.e.size) or 1)), self.verify)

    def __bytes__(self) -> bytes:
        return b"".join(bytes(p) for p in self.parts(GRAPH_READ))


#: The object graph is read this much at a time (a multiple of 3: see stm.GRAPH_PIECE).
GRAPH_READ = stm.GRAPH_PIECE


def _graph_bytes(graph: Spec) -> bytes | memoryview | _StoredString:
    """The object graph's string, as its spec's ``load`` reads it (checks and errors alike, here,
    before anything is written). From a V2 checkpoint in local files, left there and read again
    as the header is written (a few ms a pass, from the page cache), not held: tens of MB at
    100k objects; on an object store (where each pass would be a GET of it all), held once, as
    a view of its stored bytes (not a second copy)."""
    if graph.stored is not None:
        return graph.stored
    if graph.raw is not None:
        ck, e = graph.raw.checkpoint, graph.raw.entry
        if not e.slices and e.dtype.kind == dtypes.STRING and e.numel == 1:
            stored = _StoredString(ck, e, graph.raw.verify)
            if not ck.storage.cheap_rereads:  # each pass would transfer it all again
                held = list(stored.parts(e.size))  # one part, all of it (checked once the parts are done)
                return held[0] if held else memoryview(b"")
            for _ in stored.parts(GRAPH_READ):  # checked now, as reading it whole would
                pass
            return stored
    return _string_values(graph.load())[0]


def to_safetensors(dst: str, specs: list[Spec], result: ConvertResult, force: bool | tuple[bool, Sequence[str]],
                   progress: Callable[[int, int], None] | None, casts: dict[str, str], over: Overflows,
                   names: str, opened: Opened, sync: bool = True) -> None:
    from ckptool.ops.transform.convert.cast import value_of
    from ckptool.ops.write.stwrite import write_file

    graph = next((s for s in specs if s.name == OBJECT_GRAPH_KEY), None)
    graph_bytes = _graph_bytes(graph) if graph is not None else None
    rest = [s for s in specs if s.name != OBJECT_GRAPH_KEY]
    stored: Callable[[Spec], str] = _own_name  # full names: no map of 300,000 entries
    mapping: dict[str, str] = {}
    if names == "short":
        rest, short, mapping, graph_bytes = _short_plan(rest, None if graph_bytes is None else bytes(graph_bytes), dst)
        stored = lambda s: short[id(s)]  # noqa: E731
    extras = stm.Extras(format="pt" if names == "short" else "tf", object_graph=graph_bytes, names=mapping)
    numeric = []
    for s in rest:
        stm.check_name(stored(s), dst)
        if s.dtype == "string":
            if s.name.startswith("\0"):
                raise UnsupportedError(f"{dst}: tensor {s.name!r}: not a name .safetensors metadata holds")
            arr = s.load()
            extras.strings[stored(s)] = (tuple(arr.shape), _string_values(arr))
        else:
            numeric.append(s)
    header = _Header(numeric, stored, casts)

    def chunks() -> Iterator[Any]:
        import numpy as np

        for s in numeric:
            if s.raw is not None and s.dtype not in casts and not s.raw.entry.slices:
                e = s.raw.entry
                yield s.raw.checkpoint.read_raw(e, verify=s.raw.verify)
                continue
            arr = np.asarray(value_of(s, casts, over, result))
            if arr.dtype.byteorder == ">":
                arr = arr.astype(arr.dtype.newbyteorder("<"))
            if not arr.flags.c_contiguous:
                arr = arr.copy(order="C")
            if tuple(arr.shape) != tuple(s.shape):
                raise CkptError(f"{dst}: tensor {s.name!r} changed shape while converting")
            yield arr.reshape(-1).view(np.uint8)

    path, total = write_file(dst, header, extras, chunks(), force=force, progress=progress,
                             check=lambda: over.check(dst), sync=sync)
    result.tensors = len(numeric) + len(extras.strings) + (1 if graph_bytes is not None else 0)
    result.nbytes = total
    result.files = [path]
