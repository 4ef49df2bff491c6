"""The ``checkpoint`` state file: a CheckpointState in protobuf text format.

docs/FORMAT.md §5 (python/checkpoint/checkpoint_management.py). Parsing and
printing go through protobuf's ``text_format``; writes are atomic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from google.protobuf import text_format

from ckptool.errors import CkptError, CorruptError
from ckptool.format.protos.tensor_bundle_pb2 import CheckpointState as _StateProto
from ckptool.io.backends.local import LOCAL
from ckptool.io.base import ANY, Storage
from ckptool.io.layout.names import STATE_FILENAME


@dataclass
class CheckpointState:
    """The state file's fields, paths exactly as written (relative or absolute)."""

    model_checkpoint_path: str
    all_model_checkpoint_paths: list[str] = field(default_factory=list)
    all_model_checkpoint_timestamps: list[float] = field(default_factory=list)
    last_preserved_timestamp: float = 0.0

    def to_text(self) -> str:
        proto = _StateProto(
            model_checkpoint_path=self.model_checkpoint_path,
            all_model_checkpoint_paths=self.all_model_checkpoint_paths,
            all_model_checkpoint_timestamps=self.all_model_checkpoint_timestamps,
            last_preserved_timestamp=self.last_preserved_timestamp,
        )
        return text_format.MessageToString(proto)  # type: ignore[no-any-return]  # protobuf is untyped

    @classmethod
    def from_text(cls, text: str, where: str) -> CheckpointState:
        """Parsed as TF parses it (``text_format.Merge``: a field given twice, the last wins)."""
        proto = _StateProto()
        try:
            text_format.Merge(text, proto)
        except text_format.ParseError as exc:
            raise CorruptError(f"{where}: not a valid checkpoint state file: {parse_problem(exc)}") from None
        return cls(
            proto.model_checkpoint_path,
            list(proto.all_model_checkpoint_paths),
            list(proto.all_model_checkpoint_timestamps),
            proto.last_preserved_timestamp,
        )


FIELDS = ("model_checkpoint_path", "all_model_checkpoint_paths", "all_model_checkpoint_timestamps",
          "last_preserved_timestamp")


def parse_problem(exc: text_format.ParseError) -> str:
    """protobuf's complaint about a state file in the user's words: where (line, column) and
    what, never the message class's name (``Message type "ckptool.tf.CheckpointState"``)."""

    text = re.sub(r"^\d+:\d+ : ", "", str(exc))
    line, column = exc.GetLine(), exc.GetColumn()
    where = f"line {line}, column {column}: " if line else ""
    unknown = re.match(r'Message type "[^"]*" has no field named "(.*)"\.?$', text)
    if unknown:
        return f"{where}no field {unknown.group(1)!r} (a state file has {', '.join(FIELDS)})"
    return where + re.sub(r'Message type "[^"]*"', "the checkpoint state file", text)


def state_path(directory: str, storage: Storage = LOCAL, filename: str = STATE_FILENAME) -> str:
    return storage.join(directory, filename) if directory else filename


def read_state(directory: str, storage: Storage = LOCAL, filename: str = STATE_FILENAME) -> CheckpointState | None:
    """The state in ``directory``, or None when there is no state file.

    A file that does not parse, or names no checkpoint, is a CorruptError
    (TensorFlow logs and ignores the first and raises on the second).
    """
    path = state_path(directory, storage, filename)
    kind = storage.kind(path)
    if kind is None:
        return None
    if kind != "file":
        raise CkptError(f"{path}: not a regular file ({'a directory' if kind == 'dir' else 'a FIFO, socket or device'})"
                        f"; refusing to read it as the state file")
    return parse_state(storage.read_bytes(path), path)


def parse_state(raw: bytes, path: str) -> CheckpointState:
    """A state file's bytes, parsed and checked as :func:`read_state` does."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptError(f"{path}: not a valid checkpoint state file (not UTF-8 text)") from None
    state = CheckpointState.from_text(text, path)
    if not state.model_checkpoint_path:
        raise CorruptError(f"{path}: invalid checkpoint state (empty model_checkpoint_path)")
    return state


def tf_state_problem(storage: Storage, directory: str, filename: str = STATE_FILENAME) -> str | None:
    """What TF makes of DIR's state file when it is wrong, else None (also when there is none).

    As ``tf.train.get_checkpoint_state`` / ``latest_checkpoint`` (TF 2.21) read it: a file that
    cannot be read or does not parse is ignored ("Checkpoint ignored": latest_checkpoint is
    None); one that is not UTF-8 makes them raise UnicodeDecodeError; one with no
    model_checkpoint_path makes them raise ValueError; a model_checkpoint_path (relative ones
    joined to DIR; absolute ones taken as they are, a moved directory's too) that names no
    checkpoint gives None ("Couldn't match files"). A trainer then starts from scratch."""
    path = state_path(directory, storage, filename)
    kind = storage.kind(path)
    if kind is None:
        return None
    scratch = "latest_checkpoint is None: a trainer would start from scratch"
    if kind != "file":
        return f"not a file TF can read: TF ignores it ('Checkpoint ignored'), {scratch}"
    try:
        raw = storage.read_bytes(path)
    except (CkptError, OSError) as exc:
        return f"cannot be read ({exc}): TF ignores it ('Checkpoint ignored'), {scratch}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text: TF's get_checkpoint_state and latest_checkpoint raise UnicodeDecodeError on it"
    proto = _StateProto()
    try:
        text_format.Merge(text, proto)
    except text_format.ParseError as exc:
        return f"does not parse ({parse_problem(exc)}): TF ignores it ('Checkpoint ignored'), {scratch}"
    latest = proto.model_checkpoint_path
    if not latest:
        return "names no model_checkpoint_path: TF's latest_checkpoint raises ValueError ('Invalid checkpoint state')"
    prefix = resolve(directory, latest, storage)
    d, base = storage.dirname(prefix), storage.basename(prefix)
    if _found(storage, prefix):
        return None
    if any(c in base for c in "*?[") and storage.isdir(d or "."):
        try:
            if storage.glob(d, base + ".index"):  # TF globs: it returns the name, which then does not restore
                return f"its latest, {latest!r}, does not exist (TF's latest_checkpoint returns it, as a glob " \
                       f"matches another checkpoint; restoring it fails)"
        except (CkptError, OSError):
            pass
    here = storage.join(directory, base) if directory else base
    moved = " ('ckptool state --relative' points it at the checkpoint of that name here)" if (
        storage.isabs(latest) and _found(storage, here)) else ""
    return f"its latest, {latest!r}, does not exist: TF's {scratch} (\"Couldn't match files\"){moved}"


def _found(storage: Storage, prefix: str) -> bool:
    """TF's test for a checkpoint at ``prefix``: its V2 index, or the V1 file (a sharded V1 spec's
    files, as TF globs ``?????``)."""
    if storage.isfile(prefix + ".index") or storage.isfile(prefix):
        return True
    d, base = storage.dirname(prefix), storage.basename(prefix)
    if "?????" in base and storage.isdir(d or "."):
        try:
            return bool(storage.glob(d, base))
        except (CkptError, OSError):
            return False
    return False


def write_state(directory: str, state: CheckpointState, storage: Storage = LOCAL,
                filename: str = STATE_FILENAME, expect: object = ANY) -> bool:
    """Write the state file atomically (temp file, then rename over it). With ``expect``
    (the bytes read before, None for none), only if the file still holds them: False,
    nothing written, when another process changed it meanwhile."""
    if state.all_model_checkpoint_timestamps and len(state.all_model_checkpoint_timestamps) != len(
            state.all_model_checkpoint_paths):
        raise ValueError("timestamps and paths differ in number")
    return storage.write_bytes_atomic(state_path(directory, storage, filename), state.to_text().encode("utf-8"),
                                      expect)


def resolve(directory: str, path: str, storage: Storage = LOCAL) -> str:
    """A state-file path as TF resolves it: relative paths join the directory."""
    if storage.isabs(path) or "://" in path:
        return path
    return storage.join(directory, path) if directory else path


def relative_to(directory: str, path: str, storage: Storage = LOCAL) -> str:
    """``path`` relative to ``directory`` where it lies inside it (TF's relpath)."""
    if "://" in path:
        prefix = directory.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path
    if not storage.isabs(path):
        return path
    return storage.relpath(path, directory or ".")


__all__ = ["CheckpointState", "read_state", "write_state", "resolve", "relative_to", "STATE_FILENAME",
           "tf_state_problem"]
