"""Verifying many checkpoints: ``ckptool verify PATH... [--recursive]`` (issue 20).

A PATH is a checkpoint in any CHECKPOINT form, or a directory: every
checkpoint it holds, V2 and V1 (``--recursive``: and every directory below it,
symlinks to directories not followed). Each is verified in full by
:func:`ckptool.ops.inspect.verify.verify`; one that cannot even be opened is reported
as damaged, and the others are still checked. A directory below PATH that cannot
be listed or entered is reported as unreadable (the report is then not ok); a tree
that holds no checkpoint at all gives an empty report, not a damaged one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.io.layout import list_checkpoints, list_v1_checkpoints
from ckptool.io.urls import storage_for
from ckptool.ops.inspect.verify import Problem, VerifyReport, verify

if TYPE_CHECKING:
    from ckptool.io.storage import Storage


@dataclass
class Unreadable:
    """A directory below a PATH that could not be listed or entered."""

    path: str
    error: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}


@dataclass
class TreeReport:
    checkpoints: list[VerifyReport] = field(default_factory=list)
    unreadable: list[Unreadable] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.checkpoints) and not self.unreadable

    @property
    def damaged(self) -> list[VerifyReport]:
        return [r for r in self.checkpoints if not r.ok]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checkpoints": len(self.checkpoints), "damaged": len(self.damaged),
                "results": [r.to_json() for r in self.checkpoints],
                "unreadable": [u.to_json() for u in self.unreadable]}


def _directories(storage: Storage, top: str, recursive: bool, unreadable: list[Unreadable]) -> Iterator[str]:
    if not recursive:
        yield top
        return
    if storage is not None and hasattr(storage, "find") and "://" in top:
        dirs = {storage.dirname(p) for p in storage.find(top)}
        yield from sorted(dirs | {top})
        return

    def cannot(exc: OSError) -> None:
        unreadable.append(Unreadable(str(exc.filename or top), exc.strerror or str(exc)))

    for d, subdirs, _ in os.walk(top, onerror=cannot, followlinks=False):
        subdirs.sort()
        if not os.access(d, os.R_OK | os.X_OK):  # listed, but its files cannot be opened
            unreadable.append(Unreadable(d, os.strerror(13)))
            continue
        yield d


def targets(path: str, recursive: bool = False, unreadable: list[Unreadable] | None = None) -> list[str]:
    """The checkpoints ``path`` names: itself when it is no directory; else every
    checkpoint in it, V2 and V1 (and, ``recursive``, below it); a directory holding none
    that CHECKPOINT resolution may still accept (a SavedModel) gives itself when not
    ``recursive``. Directories that cannot be read are appended to ``unreadable``."""
    storage, p = storage_for(path)
    if not storage.isdir(p):
        return [path]
    out: list[str] = []
    for d in _directories(storage, p, recursive, unreadable if unreadable is not None else []):
        try:
            found = list_checkpoints(storage, d, damaged=True) + list_v1_checkpoints(storage, d, damaged=True)
        except CkptError:
            continue
        if not found:  # a Keras ModelCheckpoint series: its members
            from ckptool.ops.inspect.series_view import series_targets

            found = series_targets(storage, d)
        out.extend(found)
        if not found and d == p and not recursive:
            out.append(d)
    return sorted(dict.fromkeys(out))


def verify_paths(paths: Iterable[str], recursive: bool = False,
                 progress: Callable[[str], Callable[[int, int], None] | None] | None = None,
                 workers: int | None = None) -> TreeReport:
    """Verify every checkpoint ``paths`` name (see the module docstring).

    ``progress(prefix)`` may return a ``callback(done_bytes, total_bytes)`` for that checkpoint."""
    from ckptool.ops.read.reader import open as open_checkpoint

    report = TreeReport()
    seen = set()
    for path in paths:
        for target in targets(path, recursive, report.unreadable):
            if target in seen:
                continue
            seen.add(target)
            from ckptool.ops.inspect.series_view import member_report

            r0 = member_report(target)  # a Keras series file that is not whole, or a legacy .h5
            if r0 is not None:
                report.checkpoints.append(r0)
                continue
            try:
                with open_checkpoint(target) as ck:
                    if ck.prefix in seen and ck.prefix != target:
                        continue
                    seen.add(ck.prefix)
                    r = verify(ck, progress=progress(ck.prefix) if progress else None, workers=workers)
            except CkptError as exc:
                r = VerifyReport(target, problems=[Problem("", str(exc))])
            report.checkpoints.append(r)
    return report
