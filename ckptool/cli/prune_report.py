"""What ``prune`` adds to its table and exit status for damaged, moved and already-gone
checkpoints (ckptool.ops.retain.outcome): kept apart from the table itself (``commands/prune.py``)."""

from __future__ import annotations

from ckptool.cli.common import escape, note, plural


def extra_rows(result) -> list[tuple[str, str, str]]:
    """Rows for state entries whose files were already gone (nothing deleted for them)."""
    return [(p, "already gone", "listed in the state file, no file on disk") for p in result.already_gone]


def changed(result) -> bool:
    """Whether the run changed anything beyond deleting (a table is then printed)."""
    return bool(result.moved or result.linked or result.already_gone or result.damaged)


def note_changes(result, prefix: str = "") -> None:
    """One line per checkpoint moved or linked into kept/ (where it now is)."""
    verb = "would move" if result.dry_run else "moved"
    for m in result.moved:
        how = _how(m, ", ")
        note(f"{prefix}{verb} {escape(m['from'])} -> {escape(m['to'])} (kept out of the trainer's reach{how})")
    for m in result.linked:
        note(f"{prefix}{'would keep' if result.dry_run else 'kept'} a second name of {escape(m['from'])} as "
             f"{escape(m['to'])}{_how(m, ' ', '(', ')')}")
    if result.already_gone:
        note(f"{prefix}{plural(len(result.already_gone), 'state entry', 'state entries')} already gone from disk")


def _how(m, sep: str, left: str = "", right: str = "") -> str:
    """How a checkpoint got its name in kept/, as the engine placed it: "hard link", or "copy"
    and the bytes copied; nothing when it was there already (or on a dry run)."""
    how = m.get("how")
    if not how:
        return ""
    text = f"copy, {m.get('bytes_copied', 0):,} bytes" if how == "copy" else how
    return f"{sep}{left}{text}{right}"


def placed_how(result, path: str) -> str:
    """The table's note for a checkpoint given its name in kept/ by this run: " (hard link)" or
    " (copy, N bytes)", by the path the table shows (kept/'s for a moved one, DIR's for a linked one)."""
    for m in result.moved + result.linked:
        if path in (m["to"], m["from"]) and m.get("how"):
            return _how(m, " ", "(", ")")
    return ""


def damage_failure(results) -> str | None:
    """The error line when a damaged checkpoint was kept (cron mails it; exit 1), or None."""
    bad = [(r, item) for r in results for item in r.damaged]
    if not bad:
        return None
    names = ", ".join(item["path"] for _, item in bad)
    intact = [p for r, _ in bad for p in r.preserved if "last intact" in r.reasons.get(p, [])]
    tail = f"; kept {', '.join(dict.fromkeys(intact))}, the newest intact" if intact else ""
    return f"{plural(len(bad), 'damaged checkpoint')} kept: {names}{tail}"


__all__ = ["changed", "damage_failure", "extra_rows", "note_changes"]
