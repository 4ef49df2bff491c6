"""A SavedModel's ``keras_metadata.pb`` (written by Keras 2 / tf.keras; docs/FORMAT.md §14.3): a ``SavedMetadata``
message, ``repeated SavedObject nodes = 1``, each ``SavedObject`` holding ``node_id = 2``,
``node_path = 3`` (``root.layer_with_weights-0.cell``), ``identifier = 4``
(``_tf_keras_layer``) and ``metadata = 5`` (a JSON document with ``class_name`` and ``name``).
Decoded from the wire format directly (no generated code for it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptool.errors import CorruptError
from ckptool.format.coding import decode_varint
from ckptool.format.json_doc import load_json


@dataclass
class KerasNode:
    node_id: int
    path: str  # "root", "root.layer-0", "root.layer_with_weights-2.cell"
    identifier: str
    class_name: str
    name: str
    optimizer: dict[str, Any] | None = None  # the root's training_config.optimizer_config, if any
    model_config: dict[str, Any] | None = None  # the root's: the whole model's config (legacy serialization)
    training_config: dict[str, Any] | None = None  # the root's: what model.compile was given
    config: dict[str, Any] | None = None  # the layer's own config


def proto_fields(buf: memoryview, where: str) -> list[tuple[int, int | memoryview]]:
    """A protobuf message's fields as ``(number, value)``: varints as ints, length-delimited ones as
    views; fixed-size ones skipped; a field running past the end or a group is a CorruptError."""
    out: list[tuple[int, int | memoryview]] = []
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = decode_varint(buf, pos, end, what=where)
        wire, number = tag & 7, tag >> 3
        if wire == 0:
            value, pos = decode_varint(buf, pos, end, what=where)
            out.append((number, value))
        elif wire == 2:
            n, pos = decode_varint(buf, pos, end, what=where)
            if pos + n > end:
                raise CorruptError(f"{where}: a field runs past the end")
            out.append((number, buf[pos:pos + n]))
            pos += n
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise CorruptError(f"{where}: unsupported protobuf wire type {wire}")
    if pos != end:
        raise CorruptError(f"{where}: truncated")
    return out


def _obj(x: Any) -> dict[str, Any] | None:
    return x if isinstance(x, dict) else None


def parse(data: bytes, where: str = "keras_metadata.pb") -> list[KerasNode]:
    """The nodes of a ``keras_metadata.pb``, in file order."""
    nodes = []
    for number, value in proto_fields(memoryview(data), where):
        if number != 1 or isinstance(value, int):
            continue
        node_id, path, ident, meta = 0, "", "", ""
        for n, v in proto_fields(value, where):
            if n == 2 and isinstance(v, int):
                node_id = v
            elif isinstance(v, memoryview) and n in (3, 4, 5):
                text = bytes(v).decode("utf-8", "replace")
                path, ident, meta = (text, ident, meta) if n == 3 else (path, text, meta) if n == 4 \
                    else (path, ident, text)
        doc = load_json(meta, f"{where}: node {path!r}", what="metadata JSON") if meta else {}
        doc = doc if isinstance(doc, dict) else {}
        cls, name = doc.get("class_name", ""), doc.get("name", "")
        train, mc, cfg = (doc.get(k) for k in ("training_config", "model_config", "config"))
        opt = train.get("optimizer_config") if isinstance(train, dict) else None
        nodes.append(KerasNode(node_id, path, ident, str(cls), str(name), opt if isinstance(opt, dict) else None,
                               _obj(mc), _obj(train), _obj(cfg)))
    return nodes


__all__ = ["KerasNode", "parse", "proto_fields"]
