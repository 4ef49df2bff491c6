"""The nodes of an object graph (:mod:`ckptool.format.objgraph`), read from and written to the
wire a node record at a time, and the index its walks use."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from ckptool.errors import CorruptError
from ckptool.format.coding import decode_varint, encode_varint
from ckptool.format.protos.tensor_bundle_pb2 import TrackableObjectGraph

_NODE = TrackableObjectGraph.TrackableObject
_NODES_TAG = 0x0A  # TrackableObjectGraph field 1 (nodes), length-delimited


@dataclass
class Attribute:
    name: str
    full_name: str
    checkpoint_key: str


@dataclass
class SlotVariable:
    original_variable_node_id: int
    slot_name: str
    slot_variable_node_id: int


@dataclass
class Node:
    id: int
    children: list[tuple[str, int]] = field(default_factory=list)  # (local name, node id)
    attributes: list[Attribute] = field(default_factory=list)
    slot_variables: list[SlotVariable] = field(default_factory=list)
    registered_saver: str = ""
    has_checkpoint_values: bool | None = None  # None: the field is absent


def parse_nodes(data: bytes, where: str) -> list[Node]:
    """Every node of a serialized TrackableObjectGraph, each record parsed on its own (the
    whole message parsed at once only when its top level holds anything but node records)."""
    data = bytes(data)
    spans = node_spans(data, where)
    shared: dict[str, str] = {}
    if spans is None:
        try:
            protos = list(TrackableObjectGraph.FromString(data).nodes)
        except DecodeError:
            raise CorruptError(f"{where}: unparsable object graph") from None
        return [node_from_proto(i, p, len(protos), where, shared) for i, p in enumerate(protos)]
    n = len(spans) - 1
    return [node_from_proto(i, parse_node(record_at(data, spans, i), where), n, where, shared) for i in range(n)]


def node_spans(data: bytes, where: str) -> array[int] | None:
    """Where each node's serialized record lies in a TrackableObjectGraph: the offset of each
    record's tag, then the end of the data (:func:`record_at` reads record ``i``), so that each
    is parsed on its own, not the whole graph at once (its Python objects and the protobuf's
    all held together cost kilobytes a node); 4 bytes a node below 4 GiB. None when the top
    level holds anything else (the caller parses the whole message, as protobuf would)."""
    spans = array("I" if len(data) < 1 << 32 else "q")
    pos, end = 0, len(data)
    try:
        while pos < end:
            if data[pos] != _NODES_TAG:
                return None
            spans.append(pos)
            size, start = decode_varint(data, pos + 1, end)
            pos = start + size
            if pos > end:
                raise CorruptError(f"{where}: unparsable object graph")
    except CorruptError:
        raise CorruptError(f"{where}: unparsable object graph") from None
    spans.append(end)
    return spans


def record_at(data: bytes, spans: array[int], i: int) -> bytes:
    """Node ``i``'s record (checked by :func:`node_spans`), its tag and length skipped."""
    start = decode_varint(data, spans[i] + 1, spans[i + 1])[1]
    return data[start:spans[i + 1]]


def parse_node(record: bytes, where: str) -> Any:
    """One node's protobuf message from its record."""
    try:
        return _NODE.FromString(record)
    except DecodeError:
        raise CorruptError(f"{where}: unparsable object graph") from None


def node_from_proto(i: int, p: Any, n: int, where: str, shared: dict[str, str]) -> Node:
    """Node ``i`` of ``n`` from its protobuf message, its references checked; names that repeat
    from node to node (attribute and local names) share one string through ``shared``."""
    node = Node(i, registered_saver=p.registered_saver.name,
                has_checkpoint_values=(p.has_checkpoint_values.value
                                       if p.HasField("has_checkpoint_values") else None))
    for c in p.children:
        if not 0 <= c.node_id < n:
            raise CorruptError(f"{where}: node {i} has child {c.local_name!r} -> missing node {c.node_id}")
        name = c.local_name
        node.children.append((shared.setdefault(name, name), c.node_id))
    for a in p.attributes:
        name = a.name
        node.attributes.append(Attribute(shared.setdefault(name, name), a.full_name, a.checkpoint_key))
    for s in p.slot_variables:
        for ref in (s.original_variable_node_id, s.slot_variable_node_id):
            if not 0 <= ref < n:
                raise CorruptError(f"{where}: node {i} has a slot variable referring to missing node {ref}")
        node.slot_variables.append(SlotVariable(s.original_variable_node_id, s.slot_name, s.slot_variable_node_id))
    return node


def node_record(node: Node) -> bytes:
    """``node`` as its TrackableObject message serializes (without the graph's tag and length)."""
    p = _NODE()
    for name, nid in node.children:
        p.children.add(node_id=nid, local_name=name)
    for a in node.attributes:
        p.attributes.add(name=a.name, full_name=a.full_name, checkpoint_key=a.checkpoint_key)
    for s in node.slot_variables:
        p.slot_variables.add(original_variable_node_id=s.original_variable_node_id,
                             slot_name=s.slot_name, slot_variable_node_id=s.slot_variable_node_id)
    if node.registered_saver:
        p.registered_saver.name = node.registered_saver
    if node.has_checkpoint_values is not None:
        p.has_checkpoint_values.value = node.has_checkpoint_values
    return p.SerializeToString()  # type: ignore[no-any-return]  # protobuf messages are untyped


def serialize_nodes(nodes: Sequence[Node]) -> bytes:
    """The TrackableObjectGraph of ``nodes``, written a node at a time (byte for byte what the whole
    message serializes to: each node a length-delimited field 1)."""
    out = bytearray()
    for node in nodes:
        rec = node_record(node)
        out.append(_NODES_TAG)
        out += encode_varint(len(rec))
        out += rec
    return bytes(out)
