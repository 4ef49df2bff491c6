"""The plan of a prune: from the state file and one listing of DIR to the retention
decision (:mod:`ckptool.ops.retain.retention`), and the state file to write after it.

No disk access here beyond what the caller's listing already holds."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from ckptool.errors import RefusedError
from ckptool.io.control.state import STATE_FILENAME, CheckpointState
from ckptool.io.layout.checkpoints import resolve_recorded, step_of
from ckptool.io.layout.listing import DirListing
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.deletion import latest_base as _latest_of
from ckptool.ops.retain.deletion import warn
from ckptool.ops.retain.health import Health
from ckptool.ops.retain.keep_best import mark_best
from ckptool.ops.retain.kept import kept_moves
from ckptool.ops.retain.metrics import BestPins, pin_best


@dataclass
class Candidate:
    """A checkpoint under consideration: its state-file name and its base name in DIR."""

    name: str  # as written in the state file (or the base name, for scanned ones)
    base: str | None  # the file name prefix inside DIR; None when it is not safely inside
    timestamp: float | None = None
    step: int | None = None
    moved: bool = False


if TYPE_CHECKING:
    from ckptool.io.base import Storage
    class SafeCandidate(Candidate):
        base: str  # inside DIR


@dataclass
class Plan:
    decision: R.Decision
    names: dict[str, str]  # base -> the name to write in the state file
    drop: set[str]  # bases that leave the state file
    unsafe: list[Candidate]
    missing: list[str]
    managed: list[R.Entry]
    with_ts: bool
    latest_base: str | None
    best: BestPins | None = None  # --keep-best: the metric's values, when asked
    unlisted: set[str] = field(default_factory=set)  # kept beyond max_to_keep: into kept/, not in the state file
    moves: dict[str, str] = field(default_factory=dict)  # base -> kept.MOVE / kept.LINK (into DIR/kept/)
    damaged: dict[str, str] = field(default_factory=dict)  # base -> what is wrong: kept, but damaged
    tf1: bool = False  # no timestamps: TF1 Saver's every-N-hours from the index mtimes, written back
    gone: set[str] = field(default_factory=set)  # state entries none of whose files is there, dropped (TF1's rule)
    #: TF1 Saver's every-N-hours clock after this run (retention.sweep's last_preserved_timestamp,
    #: before any backdating for the state file), carried in DIR/kept/ to the next run; None: none kept
    clock: float | None = None


def state_entries(storage: Storage, directory: str, state: CheckpointState) -> list[Candidate]:
    paths = list(state.all_model_checkpoint_paths)
    if not paths or paths[-1] != state.model_checkpoint_path:
        paths.append(state.model_checkpoint_path)  # as TF's generate_checkpoint_state_proto
    ts = list(state.all_model_checkpoint_timestamps)
    out = []
    for i, p in enumerate(paths):
        rec = resolve_recorded(storage, directory, p, warn=False)
        t = ts[i] if i < len(ts) else None
        out.append(Candidate(p, rec.base, t, step_of(rec.base) if rec.base else None, rec.moved))
    return out


def _stamp(listing: DirListing, base: str) -> float | None:
    """A checkpoint's time from the disk: its index's mtime, else (index missing: damaged) the
    newest of its files'; None when none of its files is there."""
    t = listing.mtime(base)
    if t is None and listing.files.get(base):
        t = max(f.mtime for f in listing.files[base])
    return t


def _inside(storage: Storage, directory: str, entries: list[Candidate],
            listing: DirListing) -> tuple[list[SafeCandidate], list[Candidate]]:
    """``(safe, unsafe)``: the state's entries that are checkpoints inside DIR, and those left
    alone (outside DIR, or with a file that is a symlink leading out), each with a warning."""
    unsafe: list[Candidate] = []
    safe: list[SafeCandidate] = []
    for c in entries:
        if c.base is None:
            unsafe.append(c)
            warn(f"{storage.join(directory, STATE_FILENAME)}: {c.name!r} is not a checkpoint inside "
                 f"{directory}; left alone")
        elif listing.links_out(c.base):
            unsafe.append(c)
            warn(f"{storage.join(directory, c.base)}: a file of this checkpoint is a symlink leading out "
                 f"of {directory}; left alone")
        else:
            safe.append(cast("SafeCandidate", c))
    moved = [c for c in safe if c.moved]
    if moved:
        n = len(moved)
        warn(f"{storage.join(directory, STATE_FILENAME)}: {n} path{'s' if n != 1 else ''} of another location "
             f"({moved[0].name}{', ...' if n > 1 else ''}: a moved directory?); using the checkpoint"
             f"{'s' if n != 1 else ''} of the same name in {directory}")
    return safe, unsafe


@dataclass
class _Pool:
    """What retention decides over, found by scanning DIR or by recovering the state file."""

    managed: list[R.Entry]  # oldest first; after a save, its new checkpoint last
    unmanaged: list[R.Entry]  # listed, but TF's manager no longer manages them: never deleted
    start: float  # the last_preserved_timestamp the every-N-hours rule starts from
    tf1: bool  # no recorded times: TF1 Saver's every-N-hours from the index mtimes
    missing: list[str]  # state names none of whose files is there
    missing_bases: set[str]


def _timed(listing: DirListing, cands: list[SafeCandidate], now: float, recorded: bool,
           missing: list[str], missing_bases: set[str]) -> list[tuple[SafeCandidate, float]]:
    """Each candidate with its time, clamped to ``now``: the state file's with ``recorded``
    (where it has one), else from the disk; one none of whose files is there goes to
    ``missing`` and ``missing_bases`` instead."""
    out = []
    for c in cands:
        t = c.timestamp if (recorded and c.timestamp is not None) else _stamp(listing, c.base)
        if t is None:
            missing.append(c.name)
            missing_bases.add(c.base)
            continue
        out.append((c, min(t, now)))
    return out


def _saved(managed: list[R.Entry], new_entry: str | None, now: float) -> list[R.Entry]:
    """``managed`` after a save of ``new_entry`` (CheckpointManager.save's bookkeeping)."""
    return managed if new_entry is None else R.record(managed, R.Entry(new_entry, now, step_of(new_entry)))


def _scan_pool(listing: DirListing, safe: list[SafeCandidate], names: dict[str, str], have_ts: bool, now: float,
               new_entry: str | None) -> _Pool:
    """``--scan``: the state's checkpoints and every other complete one of DIR (added to
    ``names``), ordered by step then time, as if one manager had seen the whole history:
    every-N-hours from the oldest."""
    by_base: dict[str, SafeCandidate] = {}
    for c in safe:
        by_base.setdefault(c.base, c)
    for base in sorted(listing.complete):
        if base not in by_base and not listing.links_out(base):
            by_base[base] = cast("SafeCandidate", Candidate(base, base, None, step_of(base)))
            names[base] = base
    missing: list[str] = []
    missing_bases: set[str] = set()
    pool = _timed(listing, list(by_base.values()), now, have_ts, missing, missing_bases)
    pool.sort(key=lambda ct: (ct[0].step if ct[0].step is not None else -1, ct[1]))
    managed = _saved([R.Entry(c.base, t, c.step) for c, t in pool], new_entry, now)
    tf1 = not have_ts and bool(managed)  # no recorded times: TF1 Saver's arithmetic from the oldest
    return _Pool(managed, [], min(e.timestamp for e in managed) if tf1 else 0.0, tf1, missing, missing_bases)


def _recover_pool(directory: str, listing: DirListing, safe: list[SafeCandidate], state: CheckpointState | None,
                  have_ts: bool, now: float, new_entry: str | None) -> _Pool:
    """What ``CheckpointManager(DIR)`` manages of the state file (:func:`retention.recover`);
    a TF1 Saver's file has no timestamps: each checkpoint once, at its index's mtime, the
    oldest as the trainer's start. No state file: nothing is managed."""
    missing: list[str] = []
    missing_bases: set[str] = set()
    if have_ts and state is not None:
        rec = R.recover([c.base for c in safe], [now if c.timestamp is None else c.timestamp for c in safe],
                        state.last_preserved_timestamp, now, [c.step for c in safe], continuing=new_entry is not None)
    elif state is None:
        rec = R.recover([], None, None, now)
    else:
        rec = R.Recovered([], [], min(state.last_preserved_timestamp, now))
        seen: dict[str, R.Entry] = {}
        for c, t in _timed(listing, safe, now, False, missing, missing_bases):
            seen[c.base] = R.Entry(c.base, t, c.step if c.base not in seen else seen[c.base].step)
        rec.managed = list(seen.values())
    if rec.clock_went_back:
        warn(f"{directory}: the clock is behind the state's last_preserved_timestamp; using now")
    managed = _saved(rec.managed, new_entry, now)
    tf1 = state is not None and not have_ts and bool(managed)
    start = max(min(e.timestamp for e in managed), rec.last_preserved_timestamp) if tf1 else \
        rec.last_preserved_timestamp
    return _Pool(managed, rec.unmanaged, start, tf1, missing, missing_bases)


def make_plan(storage: Storage, directory: str, state: CheckpointState | None, listing: DirListing, policy: R.Policy,
              now: float, scan: bool, new_entry: str | None, best: Any = None, health: Health | None = None,
              in_kept: bool = False, clock: float | None = None) -> Plan:
    """The plan of one prune of DIR (or of the retention after a save of ``new_entry``): which
    entries retention decides over (``scan``: every checkpoint on disk, else the state file's
    as TF's manager recovers them), its decision under ``policy`` (the best by ``best`` pinned
    beside the user's pins), and what follows from it: what leaves the state file, what moves
    into ``DIR/kept/``, what is kept although damaged. RefusedError for a policy that would
    delete every checkpoint. ``clock``: TF1 Saver's every-N-hours clock carried from the last run
    (:func:`ckptool.io.layout.keptdir.read_clock`): a Saver's state file has no timestamps and is
    rewritten at every save, so without it the clock would restart from the oldest checkpoint
    listed at every run; the first run starts it from its oldest checkpoint (the Saver's start)."""
    entries = state_entries(storage, directory, state) if state is not None else []
    if new_entry is not None:
        entries = [c for c in entries if c.name != new_entry and c.base != new_entry]
    have_ts = state is not None and bool(state.all_model_checkpoint_timestamps) and \
        len(state.all_model_checkpoint_timestamps) == len(state.all_model_checkpoint_paths)
    safe, unsafe = _inside(storage, directory, entries, listing)
    latest_base = _latest_of(storage, directory, state)  # the one definition of the latest
    # A moved entry is written back by its name here (relative), as `state --relative` would.
    names = {c.base: (c.base if c.moved else c.name) for c in safe}
    if scan:
        pool = _scan_pool(listing, safe, names, have_ts, now, new_entry)
    else:
        pool = _recover_pool(directory, listing, safe, state, have_ts, now, new_entry)
    if new_entry is not None:
        names[new_entry] = new_entry
    if pool.tf1 and clock is not None and not in_kept:
        pool.start = min(clock, now)
    managed = pool.managed
    user_pinned = policy.pinned  # the best checkpoints are pinned beside them
    policy, best_found = pin_best(directory, managed, policy, best, storage, with_kept=not in_kept)
    # a state file whose latest is no checkpoint of DIR: the last entry managed is the one protected
    latest = new_entry or latest_base or (managed[-1].name if state is not None and managed else None)
    decision = R.plan(managed, policy, pool.start, now, latest=latest, health=health, tf1=pool.tf1)
    carried = decision.last_preserved_timestamp if pool.tf1 and policy.keep_every_n_hours and not in_kept else None
    if scan:  # the state's last_preserved_timestamp (clamped to now) stays
        lp0 = state.last_preserved_timestamp if state is not None else 0.0
        decision.last_preserved_timestamp = max(decision.last_preserved_timestamp, min(lp0, now))
    if best_found is not None:  # say "best" (the metric's values are in Plan.best)
        mark_best(decision.reasons, best_found.pins, user_pinned)
    for e in pool.unmanaged:
        decision.preserved.append(e)
        decision.reasons[e.name] = [R.UNMANAGED]
    if decision.deleted:
        survivors = [e.name for e in decision.kept + decision.preserved if e.name in listing.complete]
        if not survivors and not unsafe and new_entry is None:
            raise RefusedError(f"{directory}: refusing a policy that would delete every checkpoint "
                               f"({len(decision.deleted)})")
    out = _consequences(decision, names, unsafe, pool, latest_base, best_found, health, in_kept,
                        have_ts or scan or new_entry is not None or pool.tf1, new_entry is not None)
    out.clock = carried
    return out


def _consequences(decision: R.Decision, names: dict[str, str], unsafe: list[Candidate], pool: _Pool,
                  latest_base: str | None, best_found: BestPins | None, health: Health | None, in_kept: bool,
                  with_ts: bool, saving: bool) -> Plan:
    """The plan that follows from ``decision``: the damaged checkpoints kept, those kept beyond
    max_to_keep that leave the state file and move into ``DIR/kept/`` (never out of kept/
    itself, nor after ckptool's own save: its retention is CheckpointManager.save's, file for
    file), and every base that leaves the state file."""
    damaged = damaged_kept(decision, health, latest_base) if health is not None else {}
    unlisted = set() if in_kept else beyond_max_to_keep(decision)  # kept/ itself: nothing is moved out of it
    listed = [e.timestamp for e in decision.kept if e.name not in unlisted]
    if pool.tf1 and listed and decision.last_preserved_timestamp >= min(listed):
        # written back, TF's CheckpointManager would not manage the oldest listed: backdated, as TF backdates
        decision.last_preserved_timestamp = min(listed) - 1.0
    moves = {} if in_kept or saving else kept_moves(decision, unlisted, health)
    preserved = set() if in_kept else {e.name for e in decision.preserved}
    drop = {e.name for e in decision.deleted} | preserved | pool.missing_bases | unlisted
    return Plan(decision, names, drop, unsafe, pool.missing, pool.managed, with_ts, latest_base, best_found, unlisted,
                moves, damaged, pool.tf1, pool.missing_bases)


def damaged_kept(decision: R.Decision, health: Health, latest: str | None) -> dict[str, str]:
    """The checkpoints prune keeps that are damaged (the reason "damaged" added to theirs), and a
    latest none of whose files is there (TF's latest_checkpoint is then None): base -> what.
    A checkpoint the state file does not list is not judged: a trainer's save in progress has
    its data files before its index, and its state entry only after both."""
    out: dict[str, str] = {}
    for e in decision.kept + decision.preserved:
        if R.UNMANAGED in decision.reasons.get(e.name, []):
            continue
        h = health(e.name)
        if h == R.BROKEN:
            out[e.name] = health.problem(e.name) or "damaged"
        elif h == R.GONE and e.name == latest:
            out[e.name] = "none of its files is there (the state file names it as the latest)"
        else:
            continue
        if R.DAMAGED not in decision.reasons.get(e.name, []):
            decision.reasons[e.name] = decision.reasons.get(e.name, []) + [R.DAMAGED]
    return out


#: Reasons that keep a checkpoint in the state file: TF's own (the newest max_to_keep, the
#: latest) and min-age (a short wait: the next prune decides again).
LISTED_REASONS = frozenset({R.MAX_TO_KEEP, R.LATEST, R.MIN_AGE, R.LAST_INTACT, R.DAMAGED})


def beyond_max_to_keep(decision: R.Decision) -> set[str]:
    """Kept means kept: the checkpoints kept only by a rule beyond TF's (pinned, best,
    steps-every) leave the state file's all_model_checkpoint_paths, as TF takes its every-N-hours
    keeps out of it, and move into ``DIR/kept/`` (:mod:`ckptool.ops.retain.kept`), out of the reach
    of a trainer that deletes from the list it holds in memory."""
    return {e.name for e in decision.kept if not LISTED_REASONS & set(decision.reasons.get(e.name, ()))}


def merge_state(storage: Storage, directory: str, planned: CheckpointState | None, current: CheckpointState | None,
                plan: Plan, new_entry: str | None) -> CheckpointState | None:
    """The state to write: ``current`` (the state file as it is now, or ``planned`` when it
    has gone) with the decision applied, so entries a writer added since we planned stay."""
    decision, names = plan.decision, plan.names
    written = {b: names.get(b, b) for b in names}
    unsafe_names = {c.name for c in plan.unsafe}
    planned_names = set(written.values()) | set(names)
    placed = [(written.get(e.name, e.name), e.timestamp) for e in decision.kept if e.name not in plan.unlisted]
    extra = []  # entries of the current file we did not plan for (a writer) or refused to touch
    cur_paths = list(current.all_model_checkpoint_paths) if current is not None else []
    cur_ts = list(current.all_model_checkpoint_timestamps) if current is not None else []
    for i, p in enumerate(cur_paths):
        base = resolve_recorded(storage, directory, p, warn=False).base if p not in planned_names else None
        if p in unsafe_names or (p not in planned_names and (base is None or base not in names)
                                 and base not in plan.drop):
            extra.append((p, cur_ts[i] if i < len(cur_ts) else time.time(), p in unsafe_names))
    paths: list[str] = []
    stamps: list[float] = []
    index: dict[str, int] = {}
    for p, t in [(p, t) for p, t, u in extra if u] + placed + [(p, t) for p, t, u in extra if not u]:
        if p not in index:
            index[p] = len(paths)
            paths.append(p)
            stamps.append(t)
    latest = current.model_checkpoint_path if current is not None else None
    if latest is not None:
        base = resolve_recorded(storage, directory, latest, warn=False).base
        if base in written:
            latest = written[base]
    if new_entry is not None and (planned is None or current is None
                                  or current.model_checkpoint_path == planned.model_checkpoint_path):
        latest = new_entry
    if latest is None or (latest in {written.get(b, b) for b in plan.drop} and paths):
        latest = paths[-1] if paths else latest
    if latest is None:
        return None
    if not paths or paths[-1] != latest:
        if latest in index:
            i = index[latest]
            paths.append(paths.pop(i))
            stamps.append(stamps.pop(i))
        else:
            paths.append(latest)
            stamps.append(time.time())
    lp = decision.last_preserved_timestamp
    if current is not None and current.last_preserved_timestamp > lp:
        lp = current.last_preserved_timestamp
    if not plan.with_ts:
        stamps = []
        lp = current.last_preserved_timestamp if current is not None else 0.0
    return CheckpointState(latest, paths, stamps, lp)


__all__ = ["Candidate", "Plan", "damaged_kept", "make_plan", "merge_state"]
