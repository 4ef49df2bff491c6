"""The ``.safetensors`` header as ckptool writes and reads it: a pure codec, bytes in and out.

A file is an 8-byte little-endian header length, a JSON header, then tensor
bytes. The header maps each tensor name to ``{"dtype", "shape",
"data_offsets"}`` and holds ``"__metadata__"``, a ``{str: str}`` object.

What a TF checkpoint holds beyond numeric tensors goes in ``__metadata__``,
one key per item, the key saying what it is (``ckptool.`` keys; other keys
are left alone):

``format``
    ``"tf"`` (TensorFlow names and layouts), or ``"pt"`` with short names:
    the values transformers' loaders accept (``pt``, ``tf``, ``flax``, ``mlx``).
``ckptool.version``
    ``"1"``.
``ckptool.object_graph``
    base64 of the ``_CHECKPOINTABLE_OBJECT_GRAPH`` string (a serialized
    TrackableObjectGraph).
``ckptool.string:NAME``
    a DT_STRING tensor: JSON ``{"shape": [...], "base64": [one per element]}``.
``ckptool.names``
    JSON ``{stored name: checkpoint name}`` for every tensor stored under a
    short name (``--names short``), so the way back restores the originals.

Validation follows safetensors' own (``tensor.rs``): a header size cap,
offsets contiguous from 0 without overlap, each tensor's byte count equal to
its shape times its dtype's size, the data ending where the file does.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from ckptool.errors import CorruptError, UnsupportedError
from ckptool.format import dtypes, objkeys
from ckptool.format.entry import numel
from ckptool.format.json_doc import load_json

METADATA = "__metadata__"
FORMAT_KEY = "format"
VERSION_KEY = "ckptool.version"
OBJECT_GRAPH = "ckptool.object_graph"
STRING_PREFIX = "ckptool.string:"
NAMES_KEY = "ckptool.names"
VERSION = "1"
#: safetensors' MAX_HEADER_SIZE.
MAX_HEADER = 100_000_000

#: TensorFlow dtype name <-> safetensors dtype, both ways one to one.
TF_TO_ST = dtypes.TF_TO_SAFETENSORS
ST_TO_TF = {v: k for k, v in TF_TO_ST.items()}
ST_ITEMSIZE = {dtypes.BY_NAME[tf].safetensors: dtypes.BY_NAME[tf].itemsize for tf in TF_TO_ST}


@dataclass
class TensorInfo:
    name: str
    dtype: str  # safetensors code: "F32", ...
    shape: tuple[int, ...]
    begin: int  # offsets relative to the start of the data
    end: int

    @property
    def tf_dtype(self) -> str:
        return ST_TO_TF[self.dtype]


class Parts(Protocol):
    """Bytes not held whole (an object graph of tens of MB, still in its checkpoint)."""

    def parts(self, size: int) -> Iterator[bytes | bytearray | memoryview]:
        """The bytes, in order, ``size`` at a time (the last part shorter)."""

    def __bytes__(self) -> bytes:
        """All of them at once."""


@dataclass
class Extras:
    """What ``__metadata__`` carries for ckptool."""

    format: str = "tf"
    object_graph: bytes | memoryview | Parts | None = None
    strings: dict[str, tuple[tuple[int, ...], list[bytes]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # stored name -> checkpoint name
    other: dict[str, str] = field(default_factory=dict)  # keys that are not ckptool's


def check_name(name: str, where: str = "") -> None:
    """A tensor name a safetensors header holds distinctly (UTF-8, not the metadata key)."""
    pre = f"{where}: " if where else ""
    if name == METADATA:
        raise UnsupportedError(f"{pre}tensor {name!r}: .safetensors reserves this name for its metadata")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        label = objkeys.shown(name)
        raise UnsupportedError(f"{pre}tensor name {label!r} is not UTF-8, which a .safetensors "
                               "header (JSON) cannot hold") from None


def encode_metadata(extras: Extras) -> dict[str, str]:
    return _metadata(extras, graph=True)


def _metadata(extras: Extras, graph: bool) -> dict[str, str]:
    """:func:`encode_metadata`; without ``graph``, the object graph's value is left empty
    (in its place: :func:`_metadata_text` writes it a part at a time)."""
    meta = dict(extras.other)
    meta[FORMAT_KEY] = extras.format
    meta[VERSION_KEY] = VERSION
    if extras.object_graph is not None:
        meta[OBJECT_GRAPH] = base64.b64encode(_held(extras.object_graph)).decode("ascii") if graph else ""
    for name, (shape, values) in extras.strings.items():
        check_name(name)
        meta[STRING_PREFIX + name] = json.dumps(
            {"shape": list(shape), "base64": [base64.b64encode(v).decode("ascii") for v in values]},
            separators=(",", ":"))
    if extras.names:
        meta[NAMES_KEY] = json.dumps(extras.names, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return meta


def _b64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise CorruptError(f"{what}: not a base64 string")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise CorruptError(f"{what}: bad base64: {exc}") from None


#: numpy's limits: 64 dimensions, sizes that fit a signed 64-bit integer.
MAX_DIMS, MAX_SIZE = 64, 2**62


def _shape(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(d) is int and d >= 0 for d in value):
        raise CorruptError(f"{what}: shape {str(value)[:80]} is not a list of non-negative integers")
    if len(value) > MAX_DIMS:
        raise UnsupportedError(f"{what}: {len(value)} dimensions; numpy arrays hold at most {MAX_DIMS}")
    n = 1
    for d in value:
        n *= max(d, 1)
        if n >= MAX_SIZE:
            raise CorruptError(f"{what}: shape {value!r} is too large for an array")
    return tuple(value)


def _json(text: str, what: str) -> object:
    return load_json(text, what, max_bytes=MAX_HEADER)


def _check_restored(name: str, what: str) -> None:
    """A checkpoint name the metadata restores: not empty (the bundle header's key), not a
    slice key (they start with NUL)."""
    if not name or name.startswith("\0"):
        raise CorruptError(f"{what}: {name!r} cannot name a checkpoint tensor")


def decode_metadata(meta: dict[str, str], where: str = METADATA) -> Extras:
    out = Extras(format=meta.get(FORMAT_KEY, "tf"))
    for key, value in meta.items():
        what = f"{where}: {key!r}"
        if key == OBJECT_GRAPH:
            out.object_graph = _b64(value, what)
        elif key.startswith(STRING_PREFIX):
            doc = _json(value, what)
            if not isinstance(doc, dict) or not isinstance(doc.get("base64"), list):
                raise CorruptError(f"{what}: not a string tensor record")
            shape = _shape(doc.get("shape"), what)
            vals = [_b64(v, what) for v in doc["base64"]]
            if len(vals) != numel(shape):
                raise CorruptError(f"{what}: {len(vals)} values for shape {list(shape)}")
            name = key[len(STRING_PREFIX):]
            _check_restored(name, what)
            out.strings[name] = (shape, vals)
        elif key == NAMES_KEY:
            names = _json(value, what)
            if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in names.items()):
                raise CorruptError(f"{what}: not a {{stored: checkpoint name}} object")
            for v in names.values():
                _check_restored(v, what)
            if len(set(names.values())) != len(names):
                raise CorruptError(f"{what}: two stored names map to one checkpoint name")
            out.names = names
        elif key not in (FORMAT_KEY, VERSION_KEY):
            out.other[key] = value
    return out


def encode_header(tensors: Iterable[tuple[str, str, tuple[int, ...]]], extras: Extras) -> tuple[bytes, int]:
    """``(8-byte length + JSON header padded to 8 bytes, data size)`` for tensors written in
    the order given, each ``(name, safetensors dtype, shape)``."""
    sizes: list[int] = []
    text = b"".join(_header_text(tensors, extras, sizes))
    pad = -len(text) % 8
    _check_size(len(text) + pad, tensors)
    return (len(text) + pad).to_bytes(8, "little") + text + b" " * pad, sizes[0]


def header_pieces(tensors: Iterable[tuple[str, str, tuple[int, ...]]], extras: Extras
                  ) -> tuple[int, Iterator[bytes]]:
    """:func:`encode_header` without the header in memory: ``(data size, the header's bytes in
    pieces)``. ``tensors`` is gone through twice (give a list, or an object whose every
    ``iter()`` starts afresh): once for the header's length, which comes first, then to
    write it, a few thousand tensors at a time (300,000 tensors: tens of MB never held)."""
    sizes: list[int] = []
    length = sum(map(len, _header_text(tensors, extras, sizes)))
    pad = -length % 8
    _check_size(length + pad, tensors)

    def pieces() -> Iterator[bytes]:
        yield (length + pad).to_bytes(8, "little")
        yield from _header_text(tensors, extras, [])
        yield b" " * pad

    return sizes[0], pieces()


def _check_size(length: int, tensors: Iterable[tuple[str, str, tuple[int, ...]]]) -> None:
    """Refuse a header safetensors would refuse to load (over ``MAX_HEADER``), before anything is
    written, naming the count and the longest name (``tensors`` gone through once more)."""
    if length <= MAX_HEADER:
        return
    count, longest = 0, ""
    for name, _code, _shape in tensors:
        count += 1
        longest = max(longest, name, key=len)
    raise UnsupportedError(f"the .safetensors header would be {length:,} bytes, over safetensors' limit "
                           f"of {MAX_HEADER:,} ({count:,} tensors; the longest name "
                           f"{longest[:48]!r}{'...' if len(longest) > 48 else ''} is {len(longest):,} "
                           "characters); nothing written")


def _header_text(tensors: Iterable[tuple[str, str, tuple[int, ...]]], extras: Extras, size: list[int]
                 ) -> Iterator[bytes]:
    """The JSON header in pieces, as ``json.dumps(header, ensure_ascii=False, separators=(",",
    ":"))`` writes it (no dict per tensor); ``size`` gets the data size appended at the end."""
    from json.encoder import encode_basestring as quote  # json's own (C)

    yield from _metadata_text(extras)
    seen: set[str] = set()
    parts: list[str] = []
    offset = 0
    for name, code, shape in tensors:
        check_name(name)
        if name in seen:
            raise UnsupportedError(f"tensor {name!r} is given twice")
        seen.add(name)
        n = numel(shape) * ST_ITEMSIZE[code]
        parts.append(f',{quote(name)}:{{"dtype":{quote(code)},"shape":[{",".join(map(str, shape))}],'
                     f'"data_offsets":[{offset},{offset + n}]}}')
        offset += n
        if len(parts) >= 4096:
            yield "".join(parts).encode("utf-8")
            parts.clear()
    parts.append("}")
    yield "".join(parts).encode("utf-8")
    size.append(offset)


#: The object graph goes into the header this many bytes at a time (base64: 1 MiB of text).
GRAPH_PIECE = 3 << 18


def _metadata_text(extras: Extras) -> Iterator[bytes]:
    """``{"__metadata__":`` and ``json.dumps(encode_metadata(extras), ensure_ascii=False,
    separators=(",", ":"))`` in UTF-8, the object graph's base64 a part at a time (its base64
    is ASCII that JSON does not escape): a graph of tens of MB is never text in memory whole."""
    from json.encoder import encode_basestring as quote  # json's own (C), as json.dumps quotes

    graph = extras.object_graph
    text = "{" + quote(METADATA) + ":{"
    for i, (key, value) in enumerate(_metadata(extras, graph=False).items()):
        text += ("," if i else "") + quote(key) + ":"
        if key == OBJECT_GRAPH and graph is not None:
            yield (text + '"').encode("utf-8")
            for part in _pieces(graph, GRAPH_PIECE):  # whole groups of 3 bytes: base64 without padding
                yield base64.b64encode(part)
            text = '"'
        else:
            text += quote(value)
    yield (text + "}").encode("utf-8")


def _held(data: bytes | memoryview | Parts) -> bytes | memoryview:
    return data if isinstance(data, (bytes, memoryview)) else bytes(data)


def _pieces(data: bytes | memoryview | Parts, size: int) -> Iterator[bytes | bytearray | memoryview]:
    if not isinstance(data, (bytes, memoryview)):
        return data.parts(size)
    view = memoryview(data)
    return (view[at:at + size] for at in range(0, len(view), size))


def header_length(head: bytes | bytearray, file_size: int, where: str) -> int:
    """The JSON header's length from the first 8 bytes, checked against the file."""
    if len(head) < 8:
        raise CorruptError(f"{where}: too short to be a .safetensors file ({file_size} bytes)")
    n = int.from_bytes(head[:8], "little")
    if n > MAX_HEADER:
        raise CorruptError(f"{where}: header of {n} bytes is over safetensors' limit ({MAX_HEADER})")
    if n > file_size - 8:
        raise CorruptError(f"{where}: header length {n} runs past the end of the file ({file_size} bytes)")
    return n


def decode_header(raw: bytes | bytearray, data_size: int, where: str) -> tuple[list[TensorInfo], dict[str, str]]:
    """Tensors (in data order) and ``__metadata__`` of a header; ``data_size`` is the file's
    size after the header."""
    header = load_json(raw, where, max_bytes=MAX_HEADER, what="a safetensors header")
    if not isinstance(header, dict):
        raise CorruptError(f"{where}: safetensors header is not a JSON object")
    meta = header.pop(METADATA, None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CorruptError(f"{where}: {METADATA} is not an object of strings")
    out = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise CorruptError(f"{where}: malformed header entry for {name!r}")
        code, offs = info.get("dtype"), info.get("data_offsets")
        shape = _shape(info.get("shape"), f"{where}: tensor {name!r}")
        if code not in ST_ITEMSIZE:
            raise UnsupportedError(f"{where}: tensor {name!r} has safetensors dtype {code!r}, "
                                   "which no TensorFlow dtype holds exactly")
        if not (isinstance(offs, list) and len(offs) == 2 and all(type(x) is int for x in offs)):
            raise CorruptError(f"{where}: tensor {name!r}: bad data_offsets {offs!r}")
        out.append(TensorInfo(name, code, shape, offs[0], offs[1]))
    out.sort(key=lambda t: (t.begin, t.end))
    pos = 0
    for t in out:
        if t.begin != pos or t.end < t.begin:
            raise CorruptError(f"{where}: tensor {t.name!r} at [{t.begin}, {t.end}) does not follow the "
                               f"previous tensor (ending at {pos}): offsets overlap or leave a gap")
        if numel(t.shape) * ST_ITEMSIZE[t.dtype] != t.end - t.begin:
            raise CorruptError(f"{where}: tensor {t.name!r} ({t.dtype} {list(t.shape)}) needs "
                               f"{numel(t.shape) * ST_ITEMSIZE[t.dtype]} bytes, its offsets span "
                               f"{t.end - t.begin}")
        pos = t.end
    if pos != data_size:
        raise CorruptError(f"{where}: tensor data ends at {pos}, the file holds {data_size} bytes after "
                           "the header")
    return out, meta
