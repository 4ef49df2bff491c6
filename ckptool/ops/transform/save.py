"""``save``: the library side of ``ckptool save`` (tensors of sources into a V2 checkpoint): each
``--from`` source (:class:`Source`, what ``convert`` reads), the directory's lock and the record of
the save in its state file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from math import prod
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, is_object_key, object_key
from ckptool.io.backends.urls import storage_for
from ckptool.io.safety.destination import checkpoint_identity
from ckptool.ops.read.prefetch import prefetch
from ckptool.ops.read.source import RawTensor, kind_of, open_specs
from ckptool.ops.write.writer import BundleWriter

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ckptool.io.base import Storage
    from ckptool.ops.retain.outcome import PruneResult


class Source:
    """One ``--from`` argument: ``names()`` without loading, ``items()`` streaming.

    It is what ``convert`` reads (:func:`ckptool.ops.read.source.open_specs`, one code
    path for both commands): a checkpoint's entries copied as stored (partitioned ones
    with their slices), a ``.safetensors`` file with what ckptool keeps in its
    ``__metadata__`` restored (the object graph, string tensors, the original names of
    ``--names short``), ``.npz``/``.npy`` members by their ``.npy`` headers.
    """

    def __init__(self, path: str, verify: bool = True):
        self.path = path
        self.kind = kind_of(path)
        self._opened = open_specs(path, keep_slices=True, verify=verify)
        self._closed = False
        self.checkpoint = self._opened.checkpoint  # the open Checkpoint of a checkpoint source

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._opened.close()

    def names(self) -> list[str]:
        return [s.name for s in self._opened.specs]

    def total_bytes(self) -> int:
        """The bytes of its tensors as stored, for progress (strings counted as written)."""
        from ckptool.format import dtypes

        total = 0
        for s in self._opened.specs:
            if isinstance(s.raw, RawTensor):
                total += s.raw.nbytes
            elif s.dtype != "string":
                total += prod(s.shape) * dtypes.from_name(s.dtype).itemsize
        return total

    def items(self) -> Iterator[tuple[str, object]]:
        """``(name, value)`` in the source's data order, one value loaded at a time."""
        for s in self._opened.specs:
            if s.raw is not None:
                yield s.name, s.raw
            elif s.stored is not None:
                yield s.name, s.stored
            else:
                yield s.name, s.load()


def open_source(path: str) -> Source:
    return Source(path)


def wait_lock(storage: Storage, prefix: str, timeout: float | None = None,
               on_wait: Callable[[str, float], None] | None = None) -> AbstractContextManager[object] | None:
    """DIR's lock, waited for (at most ``timeout`` seconds; None: the lock's default) and held
    from before the first write to the record. ``on_wait(directory, seconds)`` is called
    while another process holds it; a refusal names that process (ckptool.io.control.lock.held_refusal)."""
    from ckptool.io.control.lock import DEFAULT_TIMEOUT, lock_directory

    directory = storage.dirname(prefix) or "."
    if not storage.isdir(directory):
        return None
    lock = lock_directory(storage, directory, timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
                          on_wait=None if on_wait is None else (lambda s: on_wait(directory, s)))
    lock.__enter__()
    return lock


def record(storage: Storage, prefix: str, max_to_keep: int | None, keep_every_n_hours: float | None,
            now: float | None) -> PruneResult:
    from ckptool.ops.retain.prune import record_save

    directory = storage.dirname(prefix) or "."
    return record_save(directory, prefix, max_to_keep=max_to_keep,
                       keep_every_n_hours=keep_every_n_hours, now=now, storage=storage)


def step_prefix(prefix: str, global_step: int | None, pad_step_number: bool = False) -> str:
    """``PREFIX-N`` as ``Saver.save(global_step=N)`` names it (``%08d`` when padded)."""
    if global_step is None:
        return prefix
    if global_step < 0:
        raise CkptError(f"global step must not be negative: {global_step}")
    return f"{prefix}-{global_step:08d}" if pad_step_number else f"{prefix}-{global_step}"


@dataclass
class SaveResult:
    prefix: str
    files: list[str]
    variables: int
    nbytes: int
    sources: list[str]
    object_graph: bool = False
    retention: PruneResult | None = None  # None with state=False
    names: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "files": list(self.files),
            "variables": self.variables,
            "bytes": self.nbytes,
            "sources": list(self.sources),
            "object_graph_synthesized": self.object_graph,
            "retention": None if self.retention is None else self.retention.to_json(),
        }


def save(prefix: str, sources: list[str], *, global_step: int | None = None, pad_step_number: bool = False,
         object_based: bool = False, num_shards: int = 1, force: bool = False, state: bool = True,
         max_to_keep: int | None = None, keep_every_n_hours: float | None = None,
         now: float | None = None, sync: bool = True, lock_timeout: float | None = None,
         on_lock_wait: Callable[[str, float], None] | None = None,
         progress: Callable[[int, int], None] | None = None, jobs: int | None = None) -> SaveResult:
    """Write the tensors of ``sources`` as a V2 checkpoint; then update the state file.

    With ``object_based``, plain names become ``name/.ATTRIBUTES/VARIABLE_VALUE``
    keys (each '/' part escaped) and an object graph is synthesized; keys already
    object-based are kept. Two sources giving one name is an error. Unless
    ``state`` is False, the directory's ``checkpoint`` file records the new
    checkpoint and retention is applied when a policy is given (``ckptool.ops.retain.prune.record_save``).
    ``sync=False`` skips the fsyncs (TF's behaviour; for scratch outputs). A source that
    is the target itself is refused, even with ``force``.

    The directory's lock is waited for ``lock_timeout`` seconds (None: the lock's default,
    0: not at all), ``on_lock_wait(directory, seconds)`` called while another process
    holds it. ``progress(done_bytes, total_bytes)`` as tensors are written. ``jobs``: ranged GETs in
    flight reading a source on an object store (default 8; the sources are read one after the other).
    """
    if not sources:
        raise CkptError("nothing to save: give at least one source")
    target = step_prefix(prefix, global_step, pad_step_number)
    storage, target_path = storage_for(target)
    opened = []
    # before writing: a prune may be running
    held = wait_lock(storage, target_path, lock_timeout, on_lock_wait) if state else None
    try:
        for path in sources:
            opened.append(open_source(path))
        plan = _plan_names(opened, object_based)
        ids = [i for src in opened for i in (checkpoint_identity(src.checkpoint) if src.checkpoint is not None
                                             else [src.path])]
        total = sum(src.total_bytes() for src in opened) if progress is not None else 0
        done = 0
        with BundleWriter(target_path, num_shards=num_shards, storage=storage, force=force,
                          object_graph=True, sync=sync, sources=ids) as w:
            for src in opened:
                with prefetch(src.checkpoint, src.names(), jobs):  # fetched ahead from an object store
                    for name, value in src.items():
                        key = plan[id(src)].get(name)
                        if key is None:
                            continue  # dropped (a stale object graph)
                        if isinstance(value, RawTensor):
                            value.write_to(w, key)
                            done += value.nbytes
                        else:
                            w.add(key, value)
                            done += len(value) if isinstance(value, bytes) else getattr(value, "nbytes", 0)
                        if progress is not None:
                            progress(done, max(total, done))
            written = w.finish()
        retention = record(storage, target_path, max_to_keep, keep_every_n_hours, now) if state else None
    finally:
        for src in opened:
            src.close()
        if held is not None:
            held.__exit__(None, None, None)
    return SaveResult(target_path, written.files, written.variables, written.nbytes, list(sources),
                      written.object_graph, retention, written.keys)


def _plan_names(opened: list[Source], object_based: bool) -> dict[int, dict[str, str | None]]:
    """For each source, name -> key to write (None: skip); duplicates are an error."""
    renamed_any = False
    plan: dict[int, dict[str, str | None]] = {}
    for src in opened:
        m: dict[str, str | None] = {}
        for name in src.names():
            if object_based and name != OBJECT_GRAPH_KEY and not is_object_key(name):
                m[name] = object_key(name)
                renamed_any = True
            else:
                m[name] = name
        plan[id(src)] = m
    if renamed_any:  # a source's graph does not describe the renamed keys: synthesize a new one
        for m in plan.values():
            if OBJECT_GRAPH_KEY in m:
                m[OBJECT_GRAPH_KEY] = None
    seen: dict[str, str] = {}
    for src in opened:
        for name, key in plan[id(src)].items():
            if key is None:
                continue
            if key in seen:
                what = f"{name!r}" if name == key else f"{name!r} (as {key!r})"
                raise CkptError(f"{src.path}: tensor {what} is also given by {seen[key]}")
            seen[key] = src.path
    return plan


__all__ = ["SaveResult", "Source", "open_source", "record", "save", "step_prefix", "wait_lock"]
