"""A SavedModel's ``saved_model.pb``, as far as the constants its functions capture: the object
graph (``SavedObjectGraph``: each object's children by name, a function object's concrete
functions, a constant object's ``Const`` operation), each concrete function's bound inputs and the
``Const`` nodes of the graph, whose ``TensorProto`` values are decoded on demand (strings and
integers). A tf_keras lookup layer's table is initialized from two such constants (its keys and
values): that is where a vocabulary given as a list or learnt by ``adapt()`` lives. The protobuf
is walked field by field (:func:`ckptool.format.keras_metadata.proto_fields`): nothing else of the
file is decoded, and it is read whole only below :data:`SAVED_MODEL_LIMIT`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import CorruptError
from ckptool.format import dtypes, tensor_proto
from ckptool.format.coding import decode_varint
from ckptool.format.keras_metadata import proto_fields

#: the largest saved_model.pb read (its graph and functions; the weights are in variables/)
SAVED_MODEL_LIMIT = 256 << 20
#: The dtypes of the constants decoded (a lookup table's keys and values): their enum values
_DECODED = tuple(dtypes.BY_NAME[n].value for n in ("string", "int32", "int64"))  # a tuple: a dtype field may be bytes


def _text(v: int | memoryview, where: str) -> str:
    if isinstance(v, int):
        raise CorruptError(f"{where}: a varint where a string is expected")
    return bytes(v).decode("utf-8", "replace")


def _msg(v: int | memoryview, where: str) -> list[tuple[int, int | memoryview]]:
    if isinstance(v, int):
        raise CorruptError(f"{where}: a varint where a message is expected")
    return proto_fields(v, where)


def _ints(v: int | memoryview, where: str, bits: int = 64) -> list[int]:
    """A repeated integer field's values (one varint, or packed), as signed integers of ``bits``
    bits (a wider varint truncated, as the protobuf runtime reads an int32 field)."""
    if isinstance(v, int):
        raw = [v]
    else:
        raw, pos = [], 0
        while pos < len(v):
            x, pos = decode_varint(v, pos, len(v), what=where)
            raw.append(x)
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    return [(x & mask) - ((x & sign) << 1) for x in raw]


@dataclass
class SavedObjects:
    """``children``: each object's children by name; ``functions``: a function object's concrete
    functions; ``constants``: a constant object's operation; ``bound``: a concrete function's bound
    inputs (object ids); ``tensors``: each ``Const`` node's ``TensorProto`` (undecoded)."""

    where: str
    children: list[dict[str, int]] = field(default_factory=list)
    functions: dict[int, list[str]] = field(default_factory=dict)
    constants: dict[int, str] = field(default_factory=dict)
    bound: dict[str, list[int]] = field(default_factory=dict)
    tensors: dict[str, memoryview] = field(default_factory=dict)

    def kids(self, nid: int | None) -> dict[str, int]:
        """Object ``nid``'s children by name (none for an id the graph does not hold)."""
        return self.children[nid] if nid is not None and 0 <= nid < len(self.children) else {}

    def resolve(self, path: str) -> int | None:
        """The object at a dotted path from the root (``root.layer-3.lookup_table``), or None."""
        nid: int | None = 0
        for seg in path.split(".")[1:]:
            nid = self.kids(nid).get(seg)
        return nid if nid is not None and 0 <= nid < len(self.children) else None

    def captured(self, fn: int) -> list[Any] | None:
        """The constants the one concrete function of function object ``fn`` captures, in order,
        decoded (None: not a function object of one concrete function)."""
        names = self.functions.get(fn)
        if names is None or len(names) != 1:
            return None
        out = []
        for b in self.bound.get(names[0], []):
            op = self.constants.get(b)
            if op is not None:
                if op not in self.tensors:
                    raise CorruptError(f"{self.where}: the constant {op!r} is not a Const node of the graph")
                out.append(tensor_value(self.tensors[op], f"{self.where}: constant {op!r}"))
        return out


def _object(out: SavedObjects, nid: int, v: int | memoryview) -> None:
    kids: dict[str, int] = {}
    for n, x in _msg(v, out.where):
        if n == 1:  # ObjectReference: node_id, local_name
            ref = dict(_msg(x, out.where))
            ident = ref.get(1, 0)
            if not isinstance(ident, int):
                raise CorruptError(f"{out.where}: an object reference without a node id")
            kids[_text(ref.get(2, memoryview(b"")), out.where)] = ident
        elif n == 6:  # SavedFunction: concrete_functions
            out.functions[nid] = [_text(c, out.where) for k, c in _msg(x, out.where) if k == 1]
        elif n == 9:  # SavedConstant: operation
            out.constants[nid] = next((_text(c, out.where) for k, c in _msg(x, out.where) if k == 1), "")
    out.children.append(kids)


def _object_graph(out: SavedObjects, v: int | memoryview) -> None:
    for n, x in _msg(v, out.where):
        if n == 1:
            _object(out, len(out.children), x)
        elif n == 2:  # map<string, SavedConcreteFunction>
            entry = dict(_msg(x, out.where))
            bound = [b for k, c in _msg(entry.get(2, memoryview(b"")), out.where) if k == 2
                     for b in _ints(c, out.where)]
            out.bound[_text(entry.get(1, memoryview(b"")), out.where)] = bound


def _graph(out: SavedObjects, v: int | memoryview) -> None:
    for n, x in _msg(v, out.where):
        if n != 1:
            continue
        node = _msg(x, out.where)
        op = next((_text(c, out.where) for k, c in node if k == 2), "")
        if op != "Const":
            continue
        name = next((_text(c, out.where) for k, c in node if k == 1), "")
        for k, entry in node:
            if k == 5:
                kv = dict(_msg(entry, out.where))
                if _text(kv.get(1, memoryview(b"")), out.where) == "value":
                    attr = dict(_msg(kv.get(2, memoryview(b"")), out.where))
                    tensor = attr.get(8)
                    if isinstance(tensor, memoryview):
                        out.tensors[name] = tensor


def parse(data: bytes, where: str = "saved_model.pb") -> SavedObjects:
    """The first meta graph's object graph, concrete functions' bound inputs and ``Const`` nodes."""
    out = SavedObjects(where)
    meta = next((v for n, v in proto_fields(memoryview(data), where) if n == 2), None)
    if meta is None:
        raise CorruptError(f"{where}: no meta graph")
    for n, v in _msg(meta, where):
        if n == 2:
            _graph(out, v)
        elif n == 7:
            _object_graph(out, v)
    if not out.children:
        raise CorruptError(f"{where}: no object graph (a SavedModel written by TensorFlow 2 has one)")
    return out


def tensor_value(buf: memoryview, where: str) -> list[Any] | None:
    """A ``TensorProto``'s values, flattened: strings as ``bytes``, int32/int64 as ints; None for
    another dtype. Decoded as TensorFlow reads a graph constant (:func:`ckptool.format.tensor_proto.decode`,
    :attr:`~ckptool.format.tensor_proto.Fill.REPEAT_LAST`)."""
    fields = proto_fields(buf, where)
    value = next((v for n, v in fields if n == 1), 0)
    size = 1
    for n, v in fields:
        if n == 2:
            for k, d in _msg(v, where):
                if k == 2:
                    dim = dict(_msg(d, where)).get(1, 0)
                    size *= dim if isinstance(dim, int) else 0
    if value not in _DECODED:
        return None
    dtype = dtypes.BY_VALUE[value]
    field = dtypes.PROTO_FIELDS[dtype.name]
    number = tensor_proto.FIELD_NUMBERS[field]
    content: memoryview | bytes = b""
    if field == "string_val":  # read from string_val alone
        vals: list[Any] = [v for n, v in fields if n == number and isinstance(v, memoryview)]
    else:
        first = next((v for n, v in fields if n == 4), None)  # tensor_content
        content = first if isinstance(first, memoryview) else b""
        vals = [x for n, v in fields if n == number for x in _ints(v, where, 8 * dtype.itemsize)]
    out: list[Any] = tensor_proto.decode(dtype, (size,), content, vals, where, tensor_proto.Fill.REPEAT_LAST).tolist()
    return out


__all__ = ["SAVED_MODEL_LIMIT", "SavedObjects", "parse", "tensor_value"]
