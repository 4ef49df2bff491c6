"""The one overwrite rule: an existing destination is not replaced without ``force``, and a
destination that is the source itself (the same file by identity, :meth:`Storage.same_file`:
device and inode locally, whatever path reached it, a symlink, a directory form) is refused
even with ``force``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ckptool.errors import RefusedError

if TYPE_CHECKING:
    from ckptool.io.base import Storage


def check_destination(storage: Storage, targets: Iterable[str], *, force: bool,
                      sources: Iterable[str] = (), label: str | None = None) -> None:
    """The overwrite rule shared by save, convert and rewrite-names.

    ``targets`` are the files whose existence means "the destination exists" (a
    checkpoint's ``.index``; an ``.npz`` or ``.safetensors`` file); ``sources`` the files
    that identify the source (its ``.index``, its V1 files, the file itself). Refused:
    a target that is one of the sources (:meth:`Storage.same_file`: through any path,
    symlink or directory form), even with ``force``; an existing target without
    ``force``, where anything at the name counts (a dangling symlink too: writing there
    would replace the link, so it is refused like a file)."""
    targets = list(targets)
    sources = list(sources)
    for t in targets:  # a prefix that names a source file (DST = SRC.index) is the source too
        bare = t[: -len(".index")] if t.endswith(".index") else t
        if any(storage.same_file(t, s) or storage.same_file(bare, s) for s in sources):
            raise RefusedError(f"{label or t}: is the source itself (DST is SRC; SRC is never "
                               f"modified, not even with --force)")
    if not force:
        for t in targets:
            if storage.kind(t) is not None:
                raise RefusedError(f"{t} already exists; not overwriting it without --force")


def checkpoint_identity(ck: object) -> list[str]:
    """The files that identify an open checkpoint, for :func:`check_destination`'s sources:
    a V2 checkpoint's ``.index``, a V1 checkpoint's files."""
    files = getattr(ck, "files", None)
    if getattr(ck, "format", "") == "V1" and files:
        return list(files)
    prefix = getattr(ck, "prefix", None)
    return [prefix + ".index"] if prefix else []


__all__ = ["check_destination", "checkpoint_identity"]
