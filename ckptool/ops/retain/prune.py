"""``prune`` and the retention step of ``save`` (:func:`record_save`).

Decisions come from the pure engine (:mod:`ckptool.ops.retain.retention`) through
:mod:`ckptool.ops.retain.prune_plan`; this module applies them. Safety rules
(README, ``prune``):

- only a checkpoint's own files (:mod:`ckptool.io.layout.checkpoints`) directly inside DIR are
  ever deleted, through DIR's descriptor (``dir_fd``), so a directory swapped for a
  symlink cannot redirect a delete; a state entry that resolves elsewhere is left alone
  with a warning; temporary files only with ``clean_temp``, older than an hour;
- the latest checkpoint is never deleted; a plan that would leave none is refused;
- the order on disk is explicit: (1) the journal ``DIR/.ckptool-prune-pending`` names
  what will go, (2) the state file is replaced (re-read and merged just before, so a
  writer's new entries stay), (3) each checkpoint's files go, index first (on an object store
  with a batch delete: every index, then every other file). On a full disk (1) is skipped and
  (3) comes before (2): space first, then a valid state file;
- a file that cannot be deleted is reported (``failed``), the others still go, and it
  stays in the journal, which later runs retry without failing on it;
- the directory lock (:mod:`ckptool.io.control.lock`) keeps a save and a prune apart;
- ``prune --recursive`` on an object store plans a run before its lock (:func:`_planned_first`):
  the lock object carries the journal, and the state file's conditional write compares against
  the version the listing read; the lock object goes with the last batch of (3); a run with
  nothing to do takes no lock and writes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError, RefusedError
from ckptool.format.json_doc import dump_json
from ckptool.io.backends.urls import storage_for
from ckptool.io.control.lock import DEFAULT_TIMEOUT, LOCK_FILENAME, lock_open
from ckptool.io.control.policy import DEFAULT, FLAG, effective_policy, resolve_policy
from ckptool.io.control.state import STATE_FILENAME, CheckpointState
from ckptool.io.layout.checkpoints import basename_any, file_role, names_in, strip_file_suffix
from ckptool.io.layout.keptdir import is_kept_dir, kept_path, write_clock
from ckptool.io.layout.listing import DirListing, FileInfo, scan
from ckptool.io.safety.dirfd import open_dir
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.deletion import (
    JOURNAL,
    KEEP,
    STATE_ATTEMPTS,
    TEMP_MAX_AGE,
    carried_clock,
    delete_checkpoint,
    delete_checkpoints,
    delete_temporaries,
    keep_into,
    read_dir_state,
    refuse_special,
    release,
    update_state,
    warn,
)
from ckptool.ops.retain.health import Health
from ckptool.ops.retain.journal import end_journal, finish_journal, journal_doc, write_journal
from ckptool.ops.retain.keep_best import best_settings, spec_from_policy
from ckptool.ops.retain.kept import MOVE
from ckptool.ops.retain.metrics import metric_values
from ckptool.ops.retain.outcome import PruneResult, describe, freed_bytes
from ckptool.ops.retain.policy_args import UNSET, policy_values
from ckptool.ops.retain.prune_plan import Plan, make_plan, merge_state

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage

_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
SETTLE = 0.2  # seconds before a second look at what seems damaged (a trainer's sweep deletes file by file)


def _disk_full(exc: BaseException) -> bool:
    cause = exc.__cause__ if isinstance(exc, CkptError) else exc
    return isinstance(cause, OSError) and cause.errno in _FULL


def _pins(storage: Storage, directory: str, pins: tuple[str, ...], listing: DirListing,
          state: CheckpointState | None, strict: bool) -> frozenset[str]:
    """Pins as base names; every CHECKPOINT form names one (``ckpt-2``, ``DIR/ckpt-2``,
    ``ckpt-2.index``, an absolute path). With ``strict`` a pin that names no checkpoint of
    DIR (nor of ``DIR/kept/``, where an earlier prune moved it) is an error."""
    known = set(listing.complete) | set(listing.files)
    if state is not None:
        known |= {basename_any(p) for p in state.all_model_checkpoint_paths + [state.model_checkpoint_path]}
    if strict and pins:
        kept = kept_path(storage, directory)
        known |= {r[0] for n in names_in(storage, kept) if (r := file_role(n)) is not None}
    out = set()
    for pin in pins:
        p = pin.rstrip("/")
        p = s if (s := strip_file_suffix(p)) is not None and not p.endswith(".meta") else p
        head, base = (storage.dirname(p) if "/" in p else ""), storage.basename(p)  # a bare name: DIR's
        ok = base in known and (not head or storage.same_file(head, directory or "."))  # by identity
        if not ok:
            if strict:
                raise MissingError(f"--keep {pin}: names no checkpoint of {directory}")
            continue
        out.add(base)
    return frozenset(out)


def _clean_temp(storage: Storage, d: Dir, listing: DirListing, res: PruneResult, now: float) -> int:
    """Delete temporaries older than an hour; never while a writer holds DIR's lock (a dry run
    does not take it: it asks)."""
    if res.dry_run and storage.lock_held(d.path, d.fd):
        return 0
    gone, freed = delete_temporaries(d, listing, now, res.dry_run, res.failed)
    res.temp_deleted += gone
    return freed


def _stale(d: Dir) -> RefusedError:
    return RefusedError(f"{d.join(STATE_FILENAME)}: the state file changed while prune read the directory "
                        "(a trainer saving); nothing deleted; run prune again")


def _no_state(d: Dir, listing: DirListing | None = None) -> MissingError:
    """No state file: say how to go on (a Keras file series found here: how to name it)."""
    from ckptool.io.layout.series_discover import hint

    found = hint(d.names())  # a tf_keras TF-format series (P.index, P.data-*) is offered --series too
    tf = (listing if listing is not None else scan(d)).complete
    return MissingError(f"{d.path}: no 'checkpoint' state file here" + (" (use --scan to consider every checkpoint "
                        "on disk, or 'ckptool state --rebuild' to recreate it)" if tf or not found else "") + found)


def preflight(storage: Storage, d: Dir, *, scan_all: bool, pins: tuple[str, ...] = (),
              strict_pins: bool = False, pol: dict[str, Any] | None = None) -> Any:
    """What refuses a prune before it starts, checked before the lock is taken (so a refused
    prune leaves no ``.ckptool.lock`` behind): a FIFO or device in the way, a state file that
    does not parse or is not there (without ``scan_all``), a ``--keep`` naming nothing, a
    keep-best policy without a metric or whose metric no file has. Returns the keep-best spec
    with its values read (None without keep-best)."""
    refuse_special(d)
    _, state = read_dir_state(d)
    if state is None and not scan_all:
        raise _no_state(d)
    if pins and strict_pins:
        _pins(storage, d.path, pins, scan(d), state, True)
    spec = spec_from_policy(pol or {}, d.path)
    if spec is None:
        return None
    return dataclasses.replace(spec, found=metric_values(d.path, spec.metric, metrics=spec.metrics, storage=storage))


@dataclasses.dataclass
class _Planned:
    """A run's plan and what it was made from."""

    res: PruneResult
    raw: bytes | None
    state: CheckpointState | None
    listing: DirListing
    plan: Plan
    hold: str | None


def _plan_run(storage: Storage, d: Dir, policy: R.Policy, *, now: float, dry_run: bool, finish: bool,
              scan_all: bool, new_entry: str | None, pins: tuple[str, ...], strict_pins: bool,
              soft_pins: tuple[str, ...], best: Any, verify: bool, read_indexes: bool) -> _Planned:
    """Read DIR (state file, listing; with ``finish`` an earlier run's journal completed first)
    and plan: :func:`run`'s first half, ``res`` as a dry run reports it."""
    res = PruneResult(d.path, dry_run=dry_run)
    refuse_special(d)
    raw, state = read_dir_state(d)
    if finish:
        finish_journal(storage, d, state)
    listing = scan(d) if read_indexes else scan(d, read_indexes=False)
    refuse_special(d, listing)
    res.listing = listing
    if state is None and not scan_all and new_entry is None:
        raise _no_state(d, listing)
    if pins or soft_pins:
        pinned = _pins(storage, d.path, pins, listing, state, strict_pins)
        pinned |= _pins(storage, d.path, soft_pins, listing, state, False)
        policy = R.Policy(policy.max_to_keep, policy.keep_every_n_hours, policy.keep_steps_every, policy.min_age,
                          policy.pinned | pinned)
    res.policy = policy.to_json()
    clock, hold = carried_clock(storage, d, state, listing) if policy.keep_every_n_hours else (None, None)
    plan = _settled_plan(storage, d, raw, state, listing, policy, now, scan_all, new_entry, best,
                         Health(storage, d.path, listing, verify, read_indexes), clock)
    _report_plan(res, storage, plan, listing)
    return _Planned(res, raw, state, listing, plan, hold)


def run(storage: Storage, d: Dir, policy: R.Policy, *, now: float, dry_run: bool, scan_all: bool,
        new_entry: str | None = None, pins: tuple[str, ...] = (), strict_pins: bool = False, clean_temp: bool = False,
        soft_pins: tuple[str, ...] = (), best: Any = None, verify: bool = False,
        progress: Callable[[int, int], None] | None = None, read_indexes: bool = True) -> PruneResult:
    """One prune of the open directory ``d`` (the caller holds its lock unless ``dry_run``).
    ``pins`` name checkpoints never deleted (an error, with ``strict_pins``, when one names
    none of DIR); ``soft_pins`` (a policy file's) may name checkpoints of other runs.
    ``verify``: what is kept is also checked by its CRCs, not only by the cheap check.
    ``read_indexes`` False (a dry run for ``du``): no index is read; a checkpoint is complete and
    intact by what the listing tells (its index there), see :func:`ckptool.io.layout.listing.scan`."""
    p = _plan_run(storage, d, policy, now=now, dry_run=dry_run, finish=not dry_run, scan_all=scan_all,
                  new_entry=new_entry, pins=pins, strict_pins=strict_pins, soft_pins=soft_pins, best=best,
                  verify=verify, read_indexes=read_indexes)
    res, listing, plan = p.res, p.listing, p.plan
    if not dry_run:
        _apply(storage, d, listing, p.state, plan, res, new_entry=new_entry, scan_all=scan_all, progress=progress)
        if plan.clock is not None:  # after the deletions: killed before, the next run keeps more, never less
            write_clock(storage, d, plan.clock, p.hold or plan.latest_base)
    if clean_temp:
        res.bytes_freed += _clean_temp(storage, d, listing, res, now)
    return res


class _Replan(Exception):
    """The state file changed between the read a plan was made from and the write (planned first)."""


def _plans_first(storage: Storage, d: Dir) -> bool:
    """Whether a prune of ``d`` may plan before it takes the lock: the storage's lock object carries
    the journal (:meth:`ckptool.io.backends.remote.RemoteStorage.lock`'s note), the state file was
    read with its version (the listing of ``prune --recursive``: the conditional write compares
    against that version, so no second read), and the listing shows neither a lock object (held,
    or a killed holder's with its journal) nor a journal file: nothing to finish first."""
    st: Any = storage
    if not getattr(st, "lock_note_max", 0) or st.held_lock(d.path) is not None:
        return False
    return bool(st.version_known(d.join(STATE_FILENAME))) and d.lstat(JOURNAL) is None \
        and d.lstat(LOCK_FILENAME) is None


def _planned_first(storage: Storage, d: Dir, policy: R.Policy, lock_timeout: float | None,
                   **kw: Any) -> PruneResult:
    """A prune planned before its lock (:func:`_plans_first`), in 3 requests beside the indexes of
    what it keeps and its deletions: nothing to do takes no lock and writes nothing; else the lock
    object is written carrying the journal (what is about to go), the state file replaced
    conditionally on the version the plan read (changed since: the run is planned again under the
    lock, as :func:`run`), the checkpoints deleted, the lock object with their last batch where the
    store has one (:func:`ckptool.ops.retain.deletion.delete_checkpoints`), else on its own.
    Killed anywhere, the next deleting command takes the expired lock over and finishes the
    journal it carries (:func:`ckptool.ops.retain.journal.finish_journal`). A lock found taken,
    moves into kept/ or TF1's clock: :func:`run` under the lock."""
    plan_kw = {k: kw[k] for k in ("scan_all", "pins", "strict_pins", "soft_pins", "best", "verify")}
    p = _plan_run(storage, d, policy, now=kw["now"], dry_run=False, finish=False, new_entry=None,
                  read_indexes=True, **plan_kw)
    plan, listing = p.plan, p.listing
    gone = sorted({e.name for e in plan.decision.deleted if listing.files.get(e.name)})
    st: Any = storage
    note = journal_doc(gone)
    quiet = not plan.moves and plan.clock is None
    if quiet and not gone and _new_state(storage, d, p.state, plan, None, kw["scan_all"], p.raw, p.state) is KEEP:
        return p.res  # nothing to do: no lock, no write
    small = len(dump_json(note, d.join(JOURNAL), compact=True)) <= st.lock_note_max
    with st.lock(d.path, timeout=lock_timeout, note=note if quiet and small else None) as held:
        if quiet and small and not held.contended:
            try:
                _apply(storage, d, listing, p.state, plan, p.res, new_entry=None, scan_all=kw["scan_all"],
                       progress=kw["progress"], planned=p.raw)
                return p.res
            except _Replan:
                pass
        if held.note is note:
            held.set_note(None)  # the plan it names is made again
        st.forget_reads(d.path)  # the state file read again, with its version
        return run(storage, d, policy, dry_run=False, read_indexes=True, **kw)


def _new_state(storage: Storage, d: Dir, state: CheckpointState | None, plan: Plan, new_entry: str | None,
               scan_all: bool, cur_raw: bytes | None, current: CheckpointState | None) -> object:
    """The state file to write after ``plan``, given what it holds now (``cur_raw``, ``current``):
    a :class:`CheckpointState`, None (remove it) or :data:`KEEP`."""
    decision = plan.decision
    if current is None and state is not None:
        current = state  # the file went meanwhile: the planned state is written back
    new_state = merge_state(storage, d.path, state, current, plan, new_entry)
    if new_state is None or not (new_entry is not None or plan.drop or decision.deleted or scan_all
                                 or state is None or state.to_text() != new_state.to_text()):
        return KEEP
    if current is not None and cur_raw is not None and current.to_text() == new_state.to_text():
        return KEEP
    return new_state


def _settled_plan(storage: Storage, d: Dir, raw: bytes | None, state: CheckpointState | None, listing: DirListing,
                  policy: R.Policy, now: float, scan_all: bool, new_entry: str | None, best: Any,
                  health: Health, clock: float | None = None) -> Plan:
    """The plan for what was read (``raw``, ``state``, ``listing``); a refusal or a damaged
    checkpoint that the directory has changed under (a trainer saving, or sweeping file by
    file) is stale: RefusedError, nothing deleted."""
    try:
        plan = make_plan(storage, d.path, state, listing, policy, now, scan_all, new_entry, best, health,
                         in_kept=is_kept_dir(storage, d.path), clock=clock)
    except RefusedError:
        if d.read(STATE_FILENAME) != raw:  # a trainer saved and rotated meanwhile: the plan's state is stale
            raise _stale(d) from None
        raise
    if plan.damaged:  # a trainer's sweep, mid-way, looks like damage: look again shortly
        time.sleep(SETTLE)
        again = scan(d) if health.read_indexes else scan(d, read_indexes=False)
        if d.read(STATE_FILENAME) != raw or any(again.files.get(b) != listing.files.get(b) for b in plan.damaged):
            raise _stale(d)
    return plan


def _report_plan(res: PruneResult, storage: Storage, plan: Plan, listing: DirListing) -> None:
    """``res`` as the plan has it (what a dry run reports); each damaged checkpoint kept warned about."""
    res.best = plan.best.to_json() if plan.best is not None else None
    decision = plan.decision
    res.latest = plan.latest_base
    res.timestamps = {e.name: e.timestamp for e in (*decision.kept, *decision.preserved, *decision.deleted)}  # du
    res.skipped = [c.name for c in plan.unsafe]
    res.missing = plan.missing
    res.last_preserved_timestamp = decision.last_preserved_timestamp
    describe(res, storage, plan, listing)
    for item in res.damaged:
        warn(f"{item['path']}: damaged: {item['problem']}")


def _apply(storage: Storage, d: Dir, listing: DirListing, state: CheckpointState | None, plan: Plan,
           res: PruneResult, *, new_entry: str | None, scan_all: bool,
           progress: Callable[[int, int], None] | None, planned: object = None) -> None:
    """Carry ``plan`` out in the order of the module docstring, ``res`` updated with what was done.
    ``planned`` (not None: the bytes the plan read before the lock, whose journal the lock object
    carries; :func:`_planned_first`): no journal file unless something could not go, and a state
    file changed since those bytes raises :class:`_Replan` before anything is deleted."""
    decision = plan.decision
    # (0) what is kept out of the trainer's reach gets its second name in DIR/kept/ first
    placed, fresh = keep_into(storage, d, listing, {b: res.timestamps.get(b, 0.0) for b in plan.moves}, res.failed,
                              prove={b for b, how in plan.moves.items() if how == MOVE})
    moving = {b: k for b, k in placed.items() if plan.moves[b] == MOVE}
    gone = {e.name for e in decision.deleted if listing.files.get(e.name)}
    doomed = [e.name for e in decision.deleted]
    space_first = False
    noted = planned is not None
    if (gone or moving) and not noted:
        try:
            write_journal(d, gone, moving)  # (1)
        except CkptError as exc:
            if not _disk_full(exc):
                raise
            space_first = True  # no room for a journal: delete first, then write the state
    done: list[FileInfo] = []
    left: set[str] = set()
    if space_first:
        done, left = delete_checkpoints(d, listing, doomed, res.failed, progress=progress)  # (3) before (2)

    def compute(cur_raw: bytes | None, current: CheckpointState | None) -> object:
        if noted and cur_raw != planned:
            raise _Replan  # changed since the plan's read: planned again, under the lock
        return _new_state(storage, d, state, plan, new_entry, scan_all, cur_raw, current)

    try:
        try:
            update_state(d, compute, "prune")  # (2)
        except CkptError as exc:
            if isinstance(exc, RefusedError) or not _disk_full(exc) or space_first or not decision.deleted:
                raise
            space_first = True
            done, left = delete_checkpoints(d, listing, doomed, res.failed, progress=progress)
            update_state(d, compute, "prune")
    except RefusedError:
        if (gone or moving) and not space_first and not noted:
            d.unlink(JOURNAL)
        raise
    if not space_first:  # (3); planned first, the lock object (the journal) goes in the last request
        st: Any = storage  # planned first: an object store's, which knows the lock it holds
        held = st.held_lock(d.path) if noted else None
        done, left = delete_checkpoints(d, listing, doomed, res.failed, held, progress)
    _, left_moves = release(storage, d, listing, moving, res.failed)  # (3) the DIR names of what moved
    describe(res, storage, plan, listing, placed, left, fresh)
    res.bytes_freed = freed_bytes(done)
    if (gone or moving) and not (noted and not left and not left_moves):  # the lock's journal goes with it
        try:
            with lock_open(storage, d, timeout=DEFAULT_TIMEOUT) if noted else contextlib.nullcontext():
                end_journal(d, left, {b: moving[b] for b in sorted(left_moves)})  # (the lock may have gone with (3))
        except RefusedError as exc:  # planned first: the lock went with (3), another holder has it since
            if not noted:
                raise
            res.failed.append({"path": d.join(JOURNAL), "action": "write", "error": str(exc)})  # said, with what


def _directory(storage: Storage | None, directory: str) -> tuple[Storage, str]:
    if storage is None:
        storage, directory = storage_for(directory)
    if directory != "/" and directory.endswith("/") and "://" not in directory:
        directory = directory.rstrip("/")
    return storage, directory


def prune(directory: str, *, max_to_keep: Any = UNSET, keep_every_n_hours: Any = UNSET,
          keep_steps_every: Any = UNSET, min_age: Any = UNSET, keep: tuple[str, ...] = (), scan: bool = False,
          dry_run: bool = False, now: float | None = None, storage: Storage | None = None, policy_file: bool = True,
          clean_temp: bool = False, lock_timeout: float | None = 0.0, best: Any = None, verify: bool = False,
          progress: Callable[[int, int], None] | None = None, series: str | None = None) -> PruneResult:
    """Apply retention to ``directory`` (see the module docstring for the safety rules).

    ``max_to_keep`` None or 0 keeps every checkpoint in the state (default 5); ``min_age`` is
    in seconds; ``keep`` names checkpoints never deleted, in any CHECKPOINT form (one that
    names no checkpoint of DIR is an error). Precedence (io/control/policy.resolve_policy): an argument
    given beats DIR's ``.ckptool.toml`` (with ``policy_file``), which beats the default; pins
    add up. A file that does not parse stops the run before anything is deleted.
    ``lock_timeout``: seconds to wait for the directory lock.
    ``progress(checkpoints_deleted, to_delete)`` as checkpoints are deleted.
    ``series``: a Keras ModelCheckpoint filepath template: prune that file series of DIR
    instead (:mod:`ckptool.ops.retain.series_prune`; also ``series = ...`` in ``.ckptool.toml``).

    What is kept is checked first (every file there, each data file as long as its index
    needs; with ``verify`` the CRCs too): a damaged checkpoint is not counted as one of
    ``max_to_keep``, the newest intact one is never deleted, and ``.damaged`` lists each
    damaged one kept (the CLI exits 1). What is kept beyond the newest ``max_to_keep`` by a
    lasting rule moves into ``DIR/kept/`` (``.moved``; ``.linked`` for those still among them).
    """
    storage, directory = _directory(storage, directory)
    now = time.time() if now is None else now
    pol, explicit = policy_values(max_to_keep, keep_every_n_hours, keep_steps_every, min_age, (), best, series)
    explicit |= {"keep"} if keep else set()  # the pins given: their source is the flag's
    sources = {k: FLAG if k in explicit else DEFAULT for k in pol}
    if policy_file:
        if not storage.isdir(directory):
            raise MissingError(f"{directory}: no such directory")
        eff = resolve_policy(directory, directory, pol, storage, explicit)
        pol, sources = eff.policy, eff.sources
    if sources.get("max_to_keep") == DEFAULT and is_kept_dir(storage, directory):
        pol["max_to_keep"] = None  # DIR/kept/: nothing goes without a policy given for it
    with open_dir(storage, directory) as d:
        res = prune_open(storage, d, pol, now=now, dry_run=dry_run, scan_all=scan, clean_temp=clean_temp,
                         pins=tuple(keep), strict_pins=True, lock_timeout=lock_timeout, verify=verify,
                         progress=progress)
    res.sources = sources
    return res


def prune_open(storage: Storage, d: Dir, pol: dict[str, Any], *, now: float, dry_run: bool, scan_all: bool,
               clean_temp: bool = False, pins: tuple[str, ...] = (), strict_pins: bool = False,
               lock_timeout: float | None = 0.0, verify: bool = False,
               progress: Callable[[int, int], None] | None = None, read_indexes: bool = True) -> PruneResult:
    """Prune the open directory ``d`` with the policy dict ``pol`` (the keys of a policy
    file; its ``keep`` pins are lenient), under the directory lock unless ``dry_run``
    (taken only once :func:`preflight` finds nothing that refuses the run)."""
    policy = R.Policy(pol.get("max_to_keep") or None, pol.get("keep_every_n_hours") or None,
                      pol.get("keep_steps_every"), pol.get("min_age"))
    if pol.get("series"):  # a Keras ModelCheckpoint file series, not a TF checkpoint directory
        from ckptool.ops.retain.series_prune import prune_series_open

        series = prune_series_open(storage, d, pol, now=now, dry_run=dry_run, pins=tuple(pins),
                                   strict_pins=strict_pins, lock_timeout=lock_timeout, progress=progress)
        series.policy.update(best_settings(pol))
        return series
    best = preflight(storage, d, scan_all=scan_all, pins=tuple(pins), strict_pins=strict_pins, pol=pol)
    kw: dict[str, Any] = {"now": now, "scan_all": scan_all, "pins": tuple(pins), "strict_pins": strict_pins,
                          "clean_temp": clean_temp, "soft_pins": tuple(pol.get("keep") or ()), "best": best,
                          "verify": verify, "progress": progress}
    if not dry_run and not clean_temp and _plans_first(storage, d):
        res = _planned_first(storage, d, policy, lock_timeout, **kw)
        res.policy.update(best_settings(pol))
        return res
    lock = contextlib.nullcontext() if dry_run else lock_open(storage, d, timeout=lock_timeout)
    with lock:
        res = run(storage, d, policy, dry_run=dry_run, read_indexes=read_indexes or not dry_run, **kw)
    res.policy.update(best_settings(pol))
    return res


def record_save(directory: str, prefix: str, *, max_to_keep: int | None, keep_every_n_hours: float | None,
                now: float | None = None, storage: Storage | None = None,
                lock_timeout: float | None = DEFAULT_TIMEOUT) -> PruneResult:
    """After saving ``prefix`` (a checkpoint in ``directory``): record it in the state file and
    apply retention, as ``tf.train.CheckpointManager.save`` does (relative paths, timestamps,
    last_preserved_timestamp). No retention unless a policy is given (arguments or the
    directory's ``.ckptool.toml``): ``save`` deletes nothing unasked."""
    storage, directory = _directory(storage, directory)
    now = time.time() if now is None else now
    base = storage.basename(prefix)
    if storage.dirname(prefix) and not storage.same_file(storage.dirname(prefix), directory or "."):
        raise CkptError(f"{prefix}: not in {directory}; cannot record it in that state file")
    given = {k: v for k, v in (("max_to_keep", max_to_keep), ("keep_every_n_hours", keep_every_n_hours))
             if v is not None}  # an argument given beats the policy file (io/control/policy.resolve_policy)
    pol, _ = effective_policy(directory, directory, {"max_to_keep": max_to_keep,
                                                     "keep_every_n_hours": keep_every_n_hours,
                                                     "keep_steps_every": None, "min_age": None, "keep": []}, storage,
                              explicit=given)
    with open_dir(storage, directory) as d:
        policy = R.Policy(pol["max_to_keep"] or None, pol["keep_every_n_hours"] or None, pol["keep_steps_every"],
                          pol["min_age"])
        with lock_open(storage, d, timeout=lock_timeout):
            return run(storage, d, policy, now=now, dry_run=False, scan_all=False, new_entry=base,
                       soft_pins=tuple(pol["keep"]))


__all__ = ["JOURNAL", "STATE_ATTEMPTS", "TEMP_MAX_AGE", "PruneResult", "delete_checkpoint", "finish_journal", "prune",
           "prune_open", "record_save", "run"]
