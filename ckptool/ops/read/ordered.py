"""Work done a few at a time in threads, answered in the order it was asked for, as if done one
after another: each task's warnings are held back and said when its answer is taken (in the
caller's thread, in that order), its exception raised there; leaving the ``with`` on an exception
(a task's, or Ctrl-C in the caller) starts no task that had not started, and waits for those
that had (an object store's fleet commands: ``prune --recursive``'s runs, ``verify
--recursive``'s small checkpoints)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_local = threading.local()  # .said: the warnings of the task this thread runs, held back
_hook = threading.Lock()
_state: dict[str, Any] = {"show": None, "open": 0}  # the showwarning replaced; the Ordered pools open


def _show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    said = getattr(_local, "said", None)
    if said is not None:
        said.append((message, category, filename, lineno, file, line))
    else:
        _state["show"](message, category, filename, lineno, file, line)


class Task(Generic[T]):
    """One task of :class:`Ordered`: :meth:`result` says its warnings, then answers or raises."""

    def __init__(self, future: Future[tuple[T, list[Any]]]):
        self.future = future

    def result(self) -> T:
        try:
            value, said = self.future.result()
        except _Failed as failed:
            _say(failed.said)
            raise failed.exc from None
        _say(said)
        return value


class _Failed(Exception):
    def __init__(self, exc: BaseException, said: list[Any]):
        super().__init__(str(exc))
        self.exc, self.said = exc, said


def _say(said: list[Any]) -> None:
    for w in said:
        _show(*w)  # held back again when this thread runs a task of an Ordered pool itself


def _held_back(fn: Callable[..., T], *args: Any) -> tuple[T, list[Any]]:
    said: list[Any] = []
    _local.said = said
    try:
        return fn(*args), said
    except Exception as exc:  # noqa: BLE001 - raised by Task.result, in order, after the warnings before it
        raise _Failed(exc, said) from None
    finally:
        _local.said = None


class Ordered:
    """``with Ordered(jobs) as pool: task = pool.submit(fn, *args); ... task.result()``."""

    def __init__(self, jobs: int):
        self.pool = ThreadPoolExecutor(max_workers=jobs)

    def __enter__(self) -> Ordered:
        with _hook:
            if not _state["open"]:
                _state["show"] = warnings.showwarning
                warnings.showwarning = _show
            _state["open"] += 1
        return self

    def submit(self, fn: Callable[..., T], *args: Any) -> Task[T]:
        return Task(self.pool.submit(_held_back, fn, *args))

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self.pool.shutdown(wait=True, cancel_futures=exc_type is not None)
        finally:
            with _hook:
                _state["open"] -= 1
                if not _state["open"] and warnings.showwarning is _show:
                    warnings.showwarning = _state["show"]


__all__ = ["Ordered", "Task"]
