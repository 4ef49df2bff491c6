"""The TensorFlow version strings of a MetaGraphDef (a ``.meta`` file), through the
two-message declaration in ``protos/meta_graph.proto``: everything else in the file
is skipped by protobuf as unknown fields."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from ckptool.errors import CorruptError
from ckptool.format.coding import BytesLike
from ckptool.format.protos.meta_graph_pb2 import MetaGraphDef


def tf_versions(buf: BytesLike) -> dict[str, str | None]:
    """``{"tensorflow_version": ..., "tensorflow_git_version": ...}`` of a serialized
    MetaGraphDef (MetaInfoDef fields 5 and 6; None where absent; bytes that are not UTF-8
    shown as U+FFFD). A file that does not parse is a :class:`CorruptError`."""
    try:
        meta = MetaGraphDef.FromString(bytes(buf))
    except (DecodeError, RecursionError):
        raise CorruptError("meta graph: unable to parse") from None
    info = meta.meta_info_def
    out: dict[str, str | None] = {}
    for field in ("tensorflow_version", "tensorflow_git_version"):
        out[field] = bytes(getattr(info, field)).decode("utf-8", "replace") if info.HasField(field) else None
    return out


__all__ = ["tf_versions"]
