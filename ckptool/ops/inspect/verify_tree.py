"""Verifying many checkpoints: ``ckptool verify PATH... [--recursive]``.

A PATH is a checkpoint in any CHECKPOINT form, or a directory: every
checkpoint it holds, V2 and V1 (``--recursive``: and every directory below it,
symlinks to directories not followed). Each is verified in full by
:func:`ckptool.ops.inspect.verify.verify`; one that cannot even be opened is reported
as damaged, and the others are still checked. A directory below PATH that cannot
be listed or entered is reported as unreadable (the report is then not ok); a tree
that holds no checkpoint at all gives an empty report, not a damaged one. A PATH
with nothing at all there is reported as missing ("no such checkpoint"), not damaged.

A directory is one run: its ``kept/`` (where prune keeps what a running trainer must not
delete) is verified with it, and its ``checkpoint`` state file is read as TF reads it
(:func:`ckptool.io.control.state.tf_state_problem`): one TF ignores, or whose latest TF cannot
find (``latest_checkpoint`` None: a trainer would start from scratch), is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, ResourceError
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.state import STATE_FILENAME, tf_state_problem
from ckptool.io.layout.checkpoints import list_checkpoints, list_v1_checkpoints, names_in, owns
from ckptool.io.layout.keptdir import kept_path
from ckptool.io.layout.walk import TREE_READS
from ckptool.ops.inspect.verify import Problem, VerifyReport, verify
from ckptool.ops.read.hffolder import hf_weights
from ckptool.ops.read.ordered import Ordered

if TYPE_CHECKING:
    from ckptool.io.base import Storage


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
    missing: list[Unreadable] = field(default_factory=list)  # a PATH with nothing there
    states: list[Unreadable] = field(default_factory=list)  # a state file as TF reads it: what is wrong

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.checkpoints) and not self.unreadable and not self.missing and not self.states

    @property
    def damaged(self) -> list[VerifyReport]:
        return [r for r in self.checkpoints if not r.ok]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checkpoints": len(self.checkpoints), "damaged": len(self.damaged),
                "results": [r.to_json() for r in self.checkpoints],
                "unreadable": [u.to_json() for u in self.unreadable],
                "missing": [u.to_json() for u in self.missing], "state_files": [u.to_json() for u in self.states]}


def _directories(storage: Storage, top: str, recursive: bool, unreadable: list[Unreadable]) -> Iterator[str]:
    if not recursive:
        yield top
        return
    yield from storage.walk_dirs(top, lambda path, reason: unreadable.append(Unreadable(path, reason)))


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
            kept = kept_path(storage, d)
            if not recursive and storage.isdir(kept):  # part of the run (--recursive enters it anyway)
                found += list_checkpoints(storage, kept, damaged=True)
        except ResourceError:
            raise
        except CkptError:
            continue
        if not found:  # a Keras ModelCheckpoint series: its members
            from ckptool.ops.inspect.series_view import series_targets

            found = series_targets(storage, d)
        if not found and hf_weights(storage, d) is not None:  # a Hugging Face folder: one model
            found = [d]
        out.extend(found)
        if not found and d == p and not recursive:
            out.append(d)
    return sorted(dict.fromkeys(out))


def verify_paths(paths: Iterable[str], recursive: bool = False,
                 progress: Callable[[str], Callable[[int, int], None] | None] | None = None,
                 workers: int | None = None) -> TreeReport:
    """Verify every checkpoint ``paths`` name (see the module docstring).

    ``progress(prefix)`` may return a ``callback(done_bytes, total_bytes)`` for that checkpoint."""
    report = TreeReport()
    seen: set[str] = set()
    for path in paths:
        try:
            storage, top = storage_for(path)  # --recursive on an object store: one listing of the tree
            with storage.listed(top, TREE_READS) if recursive else nullcontext():
                _verify_path(path, recursive, report, seen, progress, workers)
        except ResourceError as exc:  # too many open files: the run's trouble, no verdict
            raise ResourceError(str(exc) if str(exc).startswith("could not check")
                                else f"could not check {path}: {exc}") from None
    return report


def _verify_path(path: str, recursive: bool, report: TreeReport, seen: set[str],
                 progress: Callable[[str], Callable[[int, int], None] | None] | None,
                 workers: int | None) -> None:
    """One PATH argument of :func:`verify_paths`: its state files, then its checkpoints (on an
    object store, ``recursive``: the small ones :data:`AT_ONCE` at a time; reported in order)."""
    storage, p = storage_for(path)
    if storage.isdir(p):
        for d in _directories(storage, p, recursive, []):
            problem = tf_state_problem(storage, d)
            if problem is not None:
                report.states.append(Unreadable(storage.join(d, STATE_FILENAME), problem))
    elif not storage.exists(p) and not any(owns(storage.basename(p), n)
                                           for n in names_in(storage, storage.dirname(p))):
        report.missing.append(Unreadable(path, "no such checkpoint or directory"))
        return
    todo = [t for t in dict.fromkeys(targets(path, recursive, report.unreadable)) if t not in seen]
    seen.update(todo)
    small = _small(storage, todo) if recursive and getattr(storage, "fetch_listed", None) is not None else set()
    with Ordered(AT_ONCE) as pool:  # Ctrl-C: no check started after it; each one's warnings said in order
        ahead = {t: pool.submit(_check, t, None, None, workers) for t in todo if t in small}
        for target in todo:
            if target in ahead:
                prefix, r = ahead[target].result()
                if prefix in seen and prefix != target:
                    continue
                seen.add(prefix)
            else:
                prefix, r = _check(target, seen, progress, workers)
            if r is not None:
                report.checkpoints.append(r)


#: Checkpoints an object store's ``verify --recursive`` checks at once, those of at most
#: :data:`SMALL_BYTES` each: a fleet of small runs is bound by its requests, not its bytes (one
#: after another at 30 ms a request, 1,000 runs of 3 checkpoints took 125 s; 32 at once, 26 s, most
#: of it botocore's CPU). A larger one is checked alone, its reads already parallel (``workers``),
#: at the data's line rate: memory grows by at most AT_ONCE x SMALL_BYTES (32 MiB).
AT_ONCE = 32
SMALL_BYTES = 1 << 20


def _small(storage: Storage, todo: list[str]) -> set[str]:
    """The checkpoints of ``todo`` whose files (by the listing's sizes) total at most SMALL_BYTES."""
    names: dict[str, list[str]] = {}
    out = set()
    for t in todo:
        d, base = storage.dirname(t), storage.basename(t)
        files = [n for n in names.setdefault(d, names_in(storage, d)) if owns(base, n)]
        if files and sum(storage.size(storage.join(d, n)) for n in files) <= SMALL_BYTES:
            out.add(t)
    return out


def _check(target: str, seen: set[str] | None, progress: Callable[[str], Callable[[int, int], None] | None] | None,
           workers: int | None) -> tuple[str, VerifyReport | None]:
    """``(its prefix, the report)`` of one target; the report None when ``seen`` (given) holds its
    prefix already, another target having named the same checkpoint."""
    from ckptool.ops.inspect.series_view import member_report
    from ckptool.ops.read.reader import open as open_checkpoint

    r0 = member_report(target)  # a Keras series file that is not whole, or a legacy .h5
    if r0 is not None:
        return target, r0
    try:
        with open_checkpoint(target) as ck:
            if seen is not None:
                if ck.prefix in seen and ck.prefix != target:
                    return ck.prefix, None
                seen.add(ck.prefix)
            return ck.prefix, verify(ck, progress=progress(ck.prefix) if progress else None, workers=workers)
    except ResourceError as exc:  # too many open files: the run's trouble, no verdict
        raise ResourceError(str(exc) if str(exc).startswith("could not check")
                            else f"could not check {target}: {exc}") from None
    except CkptError as exc:
        return target, VerifyReport(target, problems=[Problem("", str(exc))])
