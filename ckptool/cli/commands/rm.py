"""``ckptool rm``."""

from __future__ import annotations

import click

from ckptool.cli.common import (
    checkpoint_argument,
    display_name,
    emit_json,
    human_bytes,
    json_option,
    note,
    plural,
)


@click.command("rm")
@checkpoint_argument("checkpoints", metavar="CHECKPOINT...", nargs=-1, required=True)
@click.option("-f", "--force", is_flag=True,
              help="Also remove the latest checkpoint; the newest remaining one in the state file then "
                   "becomes the latest (when none remains, the state file is removed).")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@json_option('Print {"removed": [{"checkpoint", "files", "bytes", "state_entry", "latest"}], '
             '"directories": [{"directory", "latest_before", "latest_after", "state_file"}], '
             '"bytes_freed", "dry_run", "failed": [{"path", "error"}], "not_removed": [...]} as JSON.')
def command(checkpoints: tuple[str, ...], force: bool, dry_run: bool, as_json: bool) -> None:
    """Delete checkpoints: every file of each (.index, every .data-*, .meta)
    and its entry (path and timestamp) in the directory's 'checkpoint' state file.

    The state file is rewritten, atomically, under the directory's
    advisory lock (the one prune takes), and only if no one changed it
    meanwhile, so it never names a deleted checkpoint and TensorFlow's
    get_checkpoint_state keeps reading it. The latest checkpoint (or, without
    a state file, the newest on disk) is removed only with --force; so is,
    while the latest is damaged (a file missing, a data file shorter than its
    index says), the newest intact one: what a restart needs. Every
    argument is resolved before anything is deleted: one that names no
    checkpoint deletes nothing.

    Deletion is prune's: the files go through the directory's descriptor,
    the .index first (when it cannot go, the rest of that checkpoint stays);
    what is about to go is journaled first (DIR/.ckptool-prune-pending), so an
    interrupted rm is finished by the next rm or prune. A checkpoint a file of
    which could not be deleted is reported as not removed, its bytes not
    counted as freed. A FIFO or device at the lock, the state file or an
    .index is refused at once.

    Exit status: 0 removed (or would be, with --dry-run); 1 not found,
    refused (the latest or the last intact without --force, lock held) or failed (a file that
    could not be deleted); 2 usage error.
    """
    from ckptool.cli.common import error
    from ckptool.cli.main import Failed
    from ckptool.ops.retain.rm import rm

    result = rm(list(checkpoints), force=force, dry_run=dry_run)
    if as_json:
        emit_json(result.to_json())
    else:
        _render(result, dry_run)
    for f in result.failed:
        error(f"{f['path']}: cannot delete: {f['error']}")
    if result.failed:
        raise Failed(f"{len(result.not_removed)} checkpoints not removed ({len(result.failed)} files could not be "
                     f"deleted)")


def _render(result, dry_run: bool) -> None:
    verb = "would remove" if dry_run else "removed"
    # the plan is the data of a dry run (stdout); after a real run, status (stderr)
    out = click.echo if dry_run else note
    for r in result.removed:
        extra = " (latest)" if r.latest else ""
        out(f"{verb} {display_name(r.checkpoint)}{extra}  {plural(len(r.files), 'file')}, {human_bytes(r.bytes)}")
    for d in result.directories:
        if d.state_file in ("updated", "removed"):
            what = "would be" if dry_run else "was"
            if d.state_file == "removed":
                note(f"{display_name(d.directory or '.')}/checkpoint {what} removed: no checkpoint left in it")
            elif d.latest_after != d.latest_before:
                note(f"{display_name(d.directory or '.')}: latest is now {display_name(d.latest_after or '-')}")
    if len(result.removed) > 1:  # one checkpoint's line has said it all
        note(f"{'would free' if dry_run else 'freed'} {human_bytes(result.bytes_freed)} in all "
             f"({plural(len(result.removed), 'checkpoint')})")
