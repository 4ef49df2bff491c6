"""The retention engine: which checkpoints are kept, preserved or deleted.

Pure (no I/O, no clock): callers give the checkpoints, their timestamps and
"now". The core is TensorFlow's own decision, step for step (docs/FORMAT.md §6.3):

- :func:`recover` is what ``tf.train.CheckpointManager.__init__`` does with a
  state file (which entries it manages, the ``last_preserved_timestamp``);
- :func:`sweep` is ``CheckpointManager._sweep``: while more than
  ``max_to_keep`` are managed, pop the oldest; keep it on disk ("preserved",
  no longer listed) when ``keep_every_n_hours`` says so, else delete it.
  ``max_to_keep`` None or 0 keeps everything. With ``tf1``, the every-N-hours
  test is TF1 ``Saver._MaybeDeleteOldCheckpoints``' instead (a checkpoint is
  preserved when its time is strictly after the next keep time, which then
  advances by N hours; ``last_preserved`` is then that next time less N hours).

A damaged checkpoint is never counted as one of ``max_to_keep`` (``health``):
the window kept is the shortest run of the newest entries that holds
``max_to_keep`` intact ones (TF's last ``max_to_keep`` when none is damaged);
the extra intact ones it holds are kept for reason :data:`LAST_INTACT`, and
a damaged one rotated out is deleted, never preserved. An entry whose files
are all gone is counted as TF counts it, but :func:`plan` never deletes the
newest intact checkpoint (:data:`LAST_INTACT` again).

:func:`plan` adds the rules beyond TF that ``ckptool prune`` offers (the
latest is never deleted, ``keep_steps_every``, ``min_age``, pinned names);
with none of them it decides exactly as :func:`sweep`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ckptool.io.control.policy import parse_duration

#: Why a checkpoint is kept (the human table and --json "reasons" name these).
LATEST = "latest"
MAX_TO_KEEP = "max_to_keep"
EVERY_N_HOURS = "every-n-hours"
STEPS_EVERY = "steps-every"
MIN_AGE = "min-age"
PINNED = "pinned"
UNMANAGED = "unmanaged"  # TF dropped it from management (timestamp <= last_preserved): never deleted
LAST_INTACT = "last intact"  # kept in place of a damaged newer one (damaged ones are not counted)
DAMAGED = "damaged"  # kept, but damaged (the latest, or in the window): prune says so and exits 1

#: ``health(name)`` answers: intact, damaged (files there, incomplete or short), gone (no file at all).
INTACT, BROKEN, GONE = "intact", "damaged", "gone"
Health = Callable[[str], str]


@dataclass(frozen=True)
class Entry:
    """One checkpoint: its name (as the caller keys it), timestamp (Unix seconds) and step."""

    name: str
    timestamp: float
    step: int | None = None


@dataclass(frozen=True)
class Policy:
    max_to_keep: int | None = 5
    keep_every_n_hours: float | None = None
    keep_steps_every: int | None = None
    min_age: float | None = None  # seconds
    pinned: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {"max_to_keep": self.max_to_keep, "keep_every_n_hours": self.keep_every_n_hours,
                "keep_steps_every": self.keep_steps_every, "min_age": self.min_age,
                "keep": sorted(self.pinned)}


@dataclass
class Decision:
    """The outcome. ``kept`` stays in the state file (oldest first); ``preserved`` stays
    on disk but leaves the state file; ``deleted`` goes. ``reasons`` says why each
    kept or preserved checkpoint stays."""

    kept: list[Entry] = field(default_factory=list)
    preserved: list[Entry] = field(default_factory=list)
    deleted: list[Entry] = field(default_factory=list)
    last_preserved_timestamp: float = 0.0
    reasons: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class Recovered:
    managed: list[Entry]
    unmanaged: list[Entry]
    last_preserved_timestamp: float
    clock_went_back: bool = False


def recover(names: list[str], timestamps: list[float] | None, last_preserved: float | None, now: float,
            steps: list[int | None] | None = None, continuing: bool = False) -> Recovered:
    """What ``CheckpointManager(directory)`` makes of a state file at time ``now``.

    ``last_preserved`` None means "no state file" (TF backdates it to now - 1).
    Entries whose timestamp (clamped to now) is not after last_preserved are not
    managed; a name listed twice keeps its first position and last timestamp.

    ``continuing``: the state is that of a manager still running (``save`` continues
    it): every listed entry is managed, as in the manager that wrote the file. (A
    checkpoint saved in the same instant as the last preserved one differs: a new
    manager drops it, the running one keeps managing it.)
    """
    steps = steps or [None] * len(names)
    if last_preserved is None:
        return Recovered([], [], now - 1.0)
    lp = last_preserved
    back = False
    if now < lp:
        lp, back = now, True
    ts = list(timestamps) if timestamps else [lp] * len(names)
    managed: dict[str, Entry] = {}
    unmanaged: list[Entry] = []
    for name, t, step in zip(names, ts, steps):
        t = min(t, now)
        if t > lp or continuing:
            if name in managed:
                managed[name] = Entry(name, t, managed[name].step)
            else:
                managed[name] = Entry(name, t, step)
        elif name not in managed:
            unmanaged.append(Entry(name, t, step))
    kept = set(managed)
    return Recovered(list(managed.values()), [e for e in unmanaged if e.name not in kept], lp, back)


def newest_of(entries: Iterable[Entry]) -> str | None:
    """The latest checkpoint when no state file names one: the newest entry by step (one
    without a step before any with one), then by time, then by name; None when there is none."""
    found = max(((e.step if e.step is not None else -1, e.timestamp, e.name) for e in entries), default=None)
    return found[2] if found is not None else None


def record(managed: list[Entry], new: Entry) -> list[Entry]:
    """``CheckpointManager.save``'s bookkeeping: the new one goes last (re-saved ones move)."""
    return [e for e in managed if e.name != new.name] + [new]


def window_start(managed: list[Entry], max_to_keep: int | None, health: Health | None = None) -> int:
    """The index of the oldest entry ``max_to_keep`` keeps: TF's ``len - max_to_keep``; with
    ``health``, the start of the shortest run of newest entries holding ``max_to_keep`` that
    are not damaged (gone ones count, as for TF; all of them when there are fewer)."""
    n = len(managed)
    if not max_to_keep or n <= max_to_keep:
        return 0
    if health is None:
        return n - max_to_keep
    counted = 0
    for i in range(n - 1, -1, -1):
        if health(managed[i].name) != BROKEN:
            counted += 1
            if counted == max_to_keep:
                return i
    return 0


def sweep(managed: list[Entry], max_to_keep: int | None, keep_every_n_hours: float | None,
          last_preserved: float, health: Health | None = None, tf1: bool = False) -> Decision:
    """``CheckpointManager._sweep``, exactly (``tf1``: ``Saver``'s every-N-hours test); with
    ``health``, damaged entries are not counted (the module docstring)."""
    d = Decision(last_preserved_timestamp=last_preserved)
    start = window_start(managed, max_to_keep, health)
    hours = keep_every_n_hours * 3600.0 if keep_every_n_hours else 0.0
    next_keep = last_preserved + hours  # TF1: Saver._next_checkpoint_time
    for e in managed[:start]:  # popped oldest first, as TF pops them
        due = hours and (e.timestamp > next_keep if tf1 else e.timestamp - hours >= d.last_preserved_timestamp)
        if due and not (health is not None and health(e.name) == BROKEN):
            if tf1:
                next_keep += hours
                d.last_preserved_timestamp = next_keep - hours
            else:
                d.last_preserved_timestamp = e.timestamp
            d.preserved.append(e)
            d.reasons[e.name] = [EVERY_N_HOURS]
            continue
        d.deleted.append(e)
    d.kept = list(managed[start:])
    tf_start = len(managed) - max_to_keep if max_to_keep and len(managed) > max_to_keep else 0
    for i, e in enumerate(d.kept, start):
        if i < tf_start and health is not None:  # beyond TF's window: held because a newer one is damaged
            d.reasons[e.name] = [DAMAGED if health(e.name) == BROKEN else LAST_INTACT]
        else:
            d.reasons.setdefault(e.name, [MAX_TO_KEEP])
    return d


def plan(managed: list[Entry], policy: Policy, last_preserved: float, now: float,
         latest: str | None = None, health: Health | None = None, tf1: bool = False) -> Decision:
    """:func:`sweep` plus ckptool's extra rules; never deletes ``latest`` (None: the
    :func:`newest_of` entry), nor, with ``health``, the newest intact checkpoint (:data:`LAST_INTACT`).

    A checkpoint the TF rules would delete but an extra rule protects stays in
    the state file (so a later run decides again, e.g. once it is old enough).
    """
    base = sweep(managed, policy.max_to_keep, policy.keep_every_n_hours, last_preserved, health, tf1)
    if latest is None:
        latest = newest_of(managed)
    protect: dict[str, list[str]] = {}
    for e in managed:
        why = []
        if e.name == latest:
            why.append(LATEST)
        if e.name in policy.pinned:
            why.append(PINNED)
        if policy.keep_steps_every and e.step is not None and e.step % policy.keep_steps_every == 0:
            why.append(STEPS_EVERY)
        if policy.min_age is not None and now - e.timestamp < policy.min_age:
            why.append(MIN_AGE)
        if why:
            protect[e.name] = why
    if health is not None:  # the newest intact checkpoint is never deleted
        newest = next((e.name for e in reversed(managed) if health(e.name) == INTACT), None)
        if newest is not None and newest not in protect:
            protect[newest] = [LAST_INTACT]
    out = Decision(preserved=base.preserved, last_preserved_timestamp=base.last_preserved_timestamp,
                   reasons=dict(base.reasons))
    rescued = set()
    for e in base.deleted:
        if e.name in protect:
            rescued.add(e.name)
            out.reasons[e.name] = protect[e.name]
        else:
            out.deleted.append(e)
    kept_ids = {id(e) for e in base.kept}
    out.kept = [e for e in managed if e.name in rescued or id(e) in kept_ids]
    for e in out.kept + out.preserved:
        extra = [r for r in protect.get(e.name, []) if r not in out.reasons[e.name]]
        out.reasons[e.name] = out.reasons[e.name] + extra
    return out


def rethin(entries: list[Entry], policy: Policy, now: float, latest: str | None = None,
           health: Health | None = None) -> Decision:
    """``--scan``: the policy over a whole directory's history, as if one manager had seen it all.

    The every-n-hours rule starts from the oldest checkpoint (last_preserved 0),
    so checkpoints TF preserved earlier (spaced by at least N hours) stay preserved.
    """
    return plan(entries, policy, 0.0, now, latest, health)


__all__ = [
    "BROKEN",
    "DAMAGED",
    "EVERY_N_HOURS",
    "GONE",
    "INTACT",
    "LAST_INTACT",
    "LATEST",
    "MAX_TO_KEEP",
    "MIN_AGE",
    "PINNED",
    "STEPS_EVERY",
    "UNMANAGED",
    "Decision",
    "Entry",
    "Health",
    "Policy",
    "Recovered",
    "newest_of",
    "parse_duration",
    "plan",
    "record",
    "recover",
    "rethin",
    "sweep",
    "window_start",
]
