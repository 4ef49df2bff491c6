"""``prune DIR --series TEMPLATE``: retention over a Keras ``ModelCheckpoint`` file series.

Keras has no ``max_to_keep``: ``ModelCheckpoint("ckpt/model-{epoch:02d}-{val_loss:.2f}.keras")``
writes a file per epoch and deletes none. This applies prune's policy to such a series: the
members (:mod:`ckptool.io.layout.series_listing`) ordered by ``{epoch}`` then ``{batch}`` (else by
time) are the retention engine's entries (:func:`ckptool.ops.retain.retention.rethin`: the whole
history, as ``--scan``; a member's step for ``keep_steps_every`` is its epoch); the same rules
as for TF directories (max_to_keep, keep-every-n-hours by file time, pins, keep-best, min-age),
and the same safety:

- only members' own files go, through the one deletion engine
  (:func:`ckptool.ops.retain.deletion.delete_files`: the file that unmakes a member first; the
  journal names each member's files by size and time first, so a killed prune is finished by
  the next one and a name Keras rewrote since is left alone), under DIR's lock;
- the latest member (the newest complete one by order), the state file's latest (a TF-format
  series), and the newest file when younger than a minute (:data:`YOUNG`) are never deleted;
- Keras writes in place (:mod:`ckptool.format.keras_files`): a member that is not whole is never
  counted; the newest such (by order or time), or one younger than a minute, is a write in
  progress, never touched; an older one is damaged: named, deleted only when max_to_keep
  complete members are newer (it would have rotated out), otherwise kept and the run fails
  (exit 1);
- there is no state file to rewrite: a running ModelCheckpoint deletes nothing, so nothing
  prune keeps can be lost to it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError, RefusedError, UsageError
from ckptool.format.keras_files import COMPLETE
from ckptool.io.control.lock import lock_open
from ckptool.io.layout.listing import FileInfo
from ckptool.io.layout.series_listing import YOUNG, Member, SeriesListing, classify
from ckptool.io.layout.series_names import Template, parse_template
from ckptool.ops.read.series import list_series
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.deletion import (
    delete_files,
    latest_base,
    read_dir_state,
    refuse_special,
    warn,
)
from ckptool.ops.retain.journal import end_journal, finish_journal, write_journal
from ckptool.ops.retain.keep_best import mark_best, spec_from_policy
from ckptool.ops.retain.outcome import PruneResult, freed_bytes

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage
    from ckptool.ops.retain.metrics import BestPins

IN_PROGRESS = "in progress"
#: A member not whole and younger than a minute: Keras may be writing it.
YOUNG_REASON = "save in progress, not checked"
#: Files a series directory holds besides its members (prune's own, TF's state file, logs).
SERVICE_NAMES = frozenset({"checkpoint"})
DAMAGED_REASON = "damaged"
NEWEST = "newest file"


@dataclass
class SeriesResult(PruneResult):
    """A prune of a series: :class:`PruneResult` plus the series' own findings."""

    series: str = ""
    in_progress: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)  # member path -> what is wrong with it
    ambiguous: list[str] = field(default_factory=list)
    members: list[Member] = field(default_factory=list, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        doc = super().to_json()
        doc["series"] = {"template": self.series, "members": len(self.members), "in_progress": list(self.in_progress),
                         "damaged": [d["path"] for d in self.damaged], "problems": dict(self.problems),
                         "ambiguous": list(self.ambiguous)}
        return doc


def series_template(storage: Storage, directory: str, text: str) -> Template:
    """The template of ``--series``; a directory part must name DIR itself (by identity)."""
    t = parse_template(text)
    if t.directory and not (storage.isdir(t.directory) and storage.same_file(t.directory, directory or ".")):
        raise UsageError(f"--series {text!r} names files of {t.directory} (its directory part is taken from the "
                         f"working directory), not of {directory or '.'}: give the file-name part alone, or prune "
                         f"{t.directory}")
    return t


def no_member(directory: str, text: str, names: list[str]) -> MissingError | None:
    """The error of a series template that matches none of the files DIR holds (None when DIR
    holds none): a cron job would never prune and never say why."""
    from ckptool.io.layout.series_discover import hint

    held = [n for n in names if not n.startswith(".") and n not in SERVICE_NAMES]
    if not held:
        return None
    found = hint(names)
    return MissingError(f"{directory or '.'}: series {text!r} matches none of its {len(held)} file"
                        f"{'s' if len(held) != 1 else ''}" + (found or f" (e.g. {sorted(held)[0]})"))


def _rescue(decision: R.Decision, entries: list[R.Entry], names: dict[str, str]) -> None:
    """Keep ``names`` (name -> reason) that the decision would delete."""
    rescued = [e for e in decision.deleted if e.name in names]
    if not rescued:
        return
    decision.deleted = [e for e in decision.deleted if e.name not in names]
    ids = {id(e) for e in decision.kept} | {id(e) for e in rescued}
    decision.kept = [e for e in entries if id(e) in ids]
    for e in rescued:
        decision.reasons[e.name] = [names[e.name]]


def decide(listing: SeriesListing, policy: R.Policy, now: float, *, protect: dict[str, str],
           best: Callable[[list[Member]], BestPins] | None = None
           ) -> tuple[R.Decision, list[Member], list[Member], BestPins | None]:
    """The retention decision over a series (names are member names): ``(decision, members
    in progress, damaged members kept)``, the in-progress ones and the damaged kept ones in
    ``decision.kept`` with their reason. ``protect``: names never deleted, with the reason."""
    intact, busy, bad = classify(listing, now)
    entries = [R.Entry(m.name, min(m.mtime, now), m.step(listing.template)) for m in intact]
    user_pinned = policy.pinned
    found = None
    if best is not None:
        found = best(intact)
        policy = dataclasses.replace(policy, pinned=policy.pinned | frozenset(found.pins))
    latest = intact[-1].name if intact else None
    decision = R.rethin(entries, policy, now, latest=latest)
    if found is not None:
        mark_best(decision.reasons, found.pins, user_pinned)
    _rescue(decision, entries, protect)
    order = {m.name: i for i, m in enumerate(listing.members)}
    bad_kept = []
    for m in bad:
        why = [r for r, on in ((R.PINNED, m.name in policy.pinned),
                               (R.MIN_AGE, policy.min_age is not None and now - m.mtime < policy.min_age)) if on]
        newer = sum(1 for x in intact if order[x.name] > order[m.name])
        if not why and policy.max_to_keep and newer >= policy.max_to_keep:  # it would have rotated out
            decision.deleted.append(R.Entry(m.name, m.mtime, m.step(listing.template)))
            continue
        decision.kept.append(R.Entry(m.name, m.mtime, m.step(listing.template)))
        decision.reasons[m.name] = [DAMAGED_REASON] + why
        bad_kept.append(m)
    for m in busy:
        decision.kept.append(R.Entry(m.name, m.mtime, m.step(listing.template)))
        decision.reasons[m.name] = [YOUNG_REASON if now - m.mtime < YOUNG else IN_PROGRESS]
    by_order = sorted(decision.kept, key=lambda e: order[e.name])
    decision.kept = by_order
    decision.deleted.sort(key=lambda e: order[e.name])
    return decision, busy, bad_kept, found


def _pins(storage: Storage, directory: str, pins: tuple[str, ...], listing: SeriesListing,
          strict: bool) -> frozenset[str]:
    """Pins as member names (``model-03.keras``, ``DIR/model-03.keras``); with ``strict`` a pin
    that names no member is an error."""
    known = listing.by_name()
    out = set()
    for pin in pins:
        p = pin.rstrip("/")
        head, base = storage.dirname(p), storage.basename(p)
        if base in known and (not head or storage.same_file(head, directory or ".")):
            out.add(base)
        elif strict:
            raise MissingError(f"--keep {pin}: names no member of series {listing.template.text!r} in {directory}")
    return frozenset(out)


def prune_series_open(storage: Storage, d: Dir, pol: dict[str, Any], *, now: float, dry_run: bool,
                      pins: tuple[str, ...] = (), strict_pins: bool = False, lock_timeout: float | None = 0.0,
                      progress: Callable[[int, int], None] | None = None) -> SeriesResult:
    """Prune the series ``pol["series"]`` of the open directory ``d`` (the keys of a policy;
    a policy file's ``keep`` pins are lenient), under its lock unless ``dry_run``."""
    policy = R.Policy(pol.get("max_to_keep") or None, pol.get("keep_every_n_hours") or None,
                      pol.get("keep_steps_every"), pol.get("min_age"))
    lock = contextlib.nullcontext() if dry_run else lock_open(storage, d, timeout=lock_timeout)
    with lock:
        return _run(storage, d, str(pol["series"]), policy, pol, now=now, dry_run=dry_run, pins=pins,
                    strict_pins=strict_pins, progress=progress)


def _run(storage: Storage, d: Dir, text: str, policy: R.Policy, pol: dict[str, Any], *, now: float, dry_run: bool,
         pins: tuple[str, ...], strict_pins: bool, progress: Callable[[int, int], None] | None) -> SeriesResult:
    from ckptool.ops.retain.series_best import series_best

    directory = d.path
    template = series_template(storage, directory, text)
    res = SeriesResult(directory, dry_run=dry_run, series=text)
    refuse_special(d)
    _, state = read_dir_state(d)
    if not dry_run:
        finish_journal(storage, d, state)
    listing = list_series(storage, d, template)
    if not listing.members and not listing.ambiguous and (err := no_member(directory, text, d.names())):
        raise err
    res.members = listing.members
    res.ambiguous = listing.ambiguous
    for n in listing.ambiguous:
        warn(f"{d.join(n)}: reads two ways as {text!r}; left alone")
    for n in listing.skipped:
        warn(f"{d.join(n)}: not a regular file; left alone")
    pinned = _pins(storage, directory, pins, listing, strict_pins)
    pinned |= _pins(storage, directory, tuple(pol.get("keep") or ()), listing, False)
    policy = dataclasses.replace(policy, pinned=policy.pinned | pinned)
    res.policy = {"series": text, **policy.to_json()}
    protect: dict[str, str] = {}
    tf_latest = latest_base(storage, directory, state) if state is not None else None
    if tf_latest is not None:
        protect[tf_latest] = R.LATEST
    newest = max(listing.members, key=lambda m: (m.mtime, m.name), default=None)
    if newest is not None and now - newest.mtime < YOUNG:
        protect.setdefault(newest.name, NEWEST)
    spec = spec_from_policy(pol, directory)
    best = (lambda intact: series_best(directory, template, intact, spec, storage)) if spec is not None else None
    decision, busy, bad_kept, found = decide(listing, policy, now, protect=protect, best=best)
    res.best = found.to_json() if found is not None else None

    def disp(name: str) -> str:
        return storage.join(directory, name) if directory else name

    members = listing.by_name()
    res.kept = [disp(e.name) for e in decision.kept]
    res.preserved = [disp(e.name) for e in decision.preserved]
    res.deleted = [disp(e.name) for e in decision.deleted]
    res.reasons = {disp(k): v for k, v in decision.reasons.items() if k not in {e.name for e in decision.deleted}}
    res.timestamps = {e.name: e.timestamp for e in (*decision.kept, *decision.preserved, *decision.deleted)}
    res.latest = next((m.name for m in reversed(listing.members) if m.state == COMPLETE), None)
    res.in_progress = [disp(m.name) for m in busy]
    for m in busy:
        if now - m.mtime < YOUNG:  # named, not passed over in silence
            warn(f"{disp(m.name)}: {YOUNG_REASON}")
    res.damaged = [{"path": disp(m.name), "problem": m.problem or "not whole"} for m in bad_kept]
    res.problems = {disp(m.name): m.problem for m in listing.members if m.problem}
    doomed = [members[e.name] for e in decision.deleted]
    res.bytes_freed = freed_bytes([f for m in doomed for f in m.files])
    if dry_run or not doomed:
        return res
    if not any(e.name in members and members[e.name].state == COMPLETE for e in decision.kept + decision.preserved):
        raise RefusedError(f"{directory}: refusing a policy that would delete every complete member of the series")
    write_journal(d, [], groups=[m.files for m in doomed])
    done: list[FileInfo] = []
    left: list[Member] = []
    for i, m in enumerate(doomed):
        gone, ok = delete_files(d, m.files, res.failed, m.files[0].name)
        done += gone
        if not ok:
            left.append(m)
        if progress is not None:
            progress(i + 1, len(doomed))
    end_journal(d, [], groups=[m.files for m in left])
    res.bytes_freed = freed_bytes(done)
    if left:
        names = {disp(m.name) for m in left}
        res.deleted = [p for p in res.deleted if p not in names]
    return res


def series_usage(storage: Storage, directory: str, result: Any, now: float) -> dict[str, Any] | None:
    """``du``'s row of a series directory (None when DIR holds no series): its members, their
    bytes, the latest complete one, its epoch and age, and what the prune ``result`` (a
    :class:`SeriesResult`, when the policy names the series) would free."""
    from ckptool.ops.read.series import find_series

    if isinstance(result, SeriesResult):
        members = result.members
        latest = result.latest
    else:
        try:
            found = find_series(storage, directory)
        except CkptError:
            return None
        if found is None or not found.members:
            return None
        members = found.members
        latest = next((m.name for m in reversed(members) if m.state == COMPLETE), None)
    m = next((m for m in members if m.name == latest), None)
    return {"checkpoints": len(members), "bytes": freed_bytes([f for x in members for f in x.files]),
            "latest": storage.join(directory, latest) if latest else None,
            "latest_step": m.values.get("epoch", m.values.get("batch")) if m is not None else None,
            "latest_age": max(0.0, now - m.mtime) if m is not None else None,
            "would_free": result.bytes_freed if isinstance(result, SeriesResult) else 0}


__all__ = ["DAMAGED_REASON", "IN_PROGRESS", "NEWEST", "SERVICE_NAMES", "YOUNG_REASON", "no_member",
           "SeriesResult", "decide", "prune_series_open",
           "series_template", "series_usage"]
