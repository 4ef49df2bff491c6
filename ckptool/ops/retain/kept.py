"""Kept means kept: which checkpoints prune puts into ``DIR/kept/`` and under which name, and
the state file ``DIR/kept/checkpoint`` (no I/O but what the callers' listings hold; the
engine, :mod:`ckptool.ops.retain.deletion`, does the linking and the journal).

A checkpoint kept by a rule that lasts (pinned, best, steps-every, every-N-hours by
ckptool's policy) gets a second name in ``kept/``: it *moves* there (its names in DIR go,
after the link) when it leaves the state file's list (beyond the newest ``max_to_keep``, or
preserved by every-N-hours); it is *linked* there and stays in DIR while it is still one of
the newest ``max_to_keep`` (a running trainer will delete its DIR names when it rotates out;
``kept/`` still holds it). Never into ``kept/``: the latest-only, max_to_keep-only, min-age
(a short wait: it stays in place and listed) and last-intact keeps, and a damaged checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.io.control.state import CheckpointState
from ckptool.io.layout.checkpoints import resolve_recorded, step_of
from ckptool.io.layout.names import STEP_RE
from ckptool.ops.retain import retention as R
from ckptool.ops.retain.keep_best import BEST

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.layout.listing import DirListing

#: The reasons that put a checkpoint into kept/.
LASTING = frozenset({R.PINNED, R.STEPS_EVERY, R.EVERY_N_HOURS, BEST})
MOVE, LINK = "move", "link"


def kept_moves(decision: R.Decision, unlisted: set[str], health: R.Health | None) -> dict[str, str]:
    """base -> :data:`MOVE` or :data:`LINK` for each checkpoint of the decision that goes
    into kept/ (see the module docstring)."""
    out: dict[str, str] = {}
    for e in decision.kept + decision.preserved:
        why = set(decision.reasons.get(e.name, ()))
        if not why & LASTING or R.UNMANAGED in why:
            continue
        if health is not None and health(e.name) != R.INTACT:
            continue  # damaged (it stays where it is, named as damaged) or gone
        out[e.name] = MOVE if e.name in unlisted or e in decision.preserved else LINK
    return out


def alternatives(base: str, v1: bool) -> list[str]:
    """The names ``base`` may take in kept/, in order: its own, then (a different checkpoint
    of that name is there already) ``STEM.2-STEP``, ``STEM.3-STEP``, ... (the step stays
    last, so ordering and keep-best still read it). A V1 checkpoint keeps its name only."""
    if v1:
        return [base]
    m = STEP_RE.search(base)
    if m is None or m.start() == 0:
        return [base] + [f"{base}.{k}" for k in range(2, 100)]
    stem, step = base[: m.start()], base[m.start():]
    return [base] + [f"{stem}.{k}{step}" for k in range(2, 100)]


def kept_file(base: str, kept_base: str, name: str) -> str:
    """The name in kept/ of ``name``, a file of checkpoint ``base`` kept as ``kept_base``."""
    return kept_base + name[len(base):] if name.startswith(base) else name


def kept_state(storage: Storage, directory: str, listing: DirListing, stamps: dict[str, float],
               current: CheckpointState | None) -> CheckpointState | None:
    """The state file of ``kept/`` (``directory``): every complete checkpoint there, oldest first
    by step then time, the newest as the latest; a time from ``stamps`` (just kept), else the
    one the file recorded, else the index's mtime."""
    recorded: dict[str, float] = {}
    if current is not None:
        for p, t in zip(current.all_model_checkpoint_paths, current.all_model_checkpoint_timestamps):
            b = resolve_recorded(storage, directory, p, warn=False).base
            if b:
                recorded[b] = t
    rows = []
    for b in listing.complete:
        if listing.links_out(b):
            continue
        t = stamps.get(b, recorded.get(b, listing.mtime(b) or 0.0))
        rows.append((step_of(b) if step_of(b) is not None else -1, t, b))
    if not rows:
        return None
    rows.sort()
    lp = current.last_preserved_timestamp if current is not None else 0.0
    return CheckpointState(rows[-1][2], [b for _, _, b in rows], [t for _, t, _ in rows], lp)


__all__ = ["LASTING", "LINK", "MOVE", "alternatives", "kept_file", "kept_moves", "kept_state"]
