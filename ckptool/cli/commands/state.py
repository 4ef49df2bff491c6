"""``ckptool state``."""

from __future__ import annotations

import click

from ckptool.cli.common import emit_json, escape, human_time, json_option, note, plural


@click.command("state")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--rebuild", is_flag=True,
              help="Recreate the state file from the complete checkpoints on disk, oldest first by "
                   "step then modification time (as recover_last_checkpoints), timestamps from the "
                   ".index modification times, relative paths.")
@click.option("--max-to-keep", type=click.IntRange(min=1), metavar="N",
              help="With --rebuild: record only the newest N (the trainer's max_to_keep); the older "
                   "ones stay on disk, unlisted. A CheckpointManager deletes every listed checkpoint "
                   "beyond its max_to_keep at its next save, so a rebuild that lists them all hands "
                   "them to it.")
@click.option("--relative", is_flag=True,
              help="Rewrite absolute paths that name checkpoints in DIR (also those of a moved or "
                   "copied directory: a recorded name that is a checkpoint here) as relative ones; "
                   "paths elsewhere are kept, with a warning.")
@click.option("-n", "--dry-run", is_flag=True, help="With --rebuild or --relative: show, write nothing.")
@json_option("Print the state as JSON: model_checkpoint_path, all_model_checkpoint_paths, "
             "all_model_checkpoint_timestamps, last_preserved_timestamp, entries (with exists).")
def command(directory: str, rebuild: bool, max_to_keep: int | None, relative: bool, dry_run: bool,
            as_json: bool) -> None:
    """Show, rebuild or relativize DIR's 'checkpoint' state file.

    Without options: the latest checkpoint and every recorded one with its
    timestamp and whether it is on disk. Every write is atomic (temporary
    file, then rename), takes the directory's advisory lock and replaces the
    file only if no one changed it meanwhile (prune's and rm's engine);
    --rebuild first finishes an interrupted prune or rm (its journal), so
    their checkpoints are not recorded again. Recorded paths are compared by
    identity (through symlinks); an absolute path of another directory whose
    name is a checkpoint in DIR (a moved or copied run) means that one.
    Temporary files (the exact rule of 'prune --clean-temp') are never
    recorded. A FIFO or device at the state file or lock is refused.

    Exit status: 0 ok; 1 no state file, a corrupt one, or nothing to rebuild
    from; 2 usage error.
    """
    from ckptool.ops.retain.state import (
        rebuild_state,
        relative_state,
        show_state,
        state_document,
    )

    if rebuild and relative:
        raise click.UsageError("--rebuild writes relative paths already; give one of --rebuild, --relative")
    if max_to_keep is not None and not rebuild:
        raise click.UsageError("--max-to-keep goes with --rebuild")
    doc = None
    if rebuild:
        st = rebuild_state(directory, dry_run=dry_run, max_to_keep=max_to_keep)
        note(f"{'would write' if dry_run else 'wrote'} {plural(len(st.all_model_checkpoint_paths), 'checkpoint')} "
             f"into {directory}/checkpoint")
        doc = state_document(directory, st) if dry_run else None
    elif relative:
        st, changed = relative_state(directory, dry_run=dry_run)
        if changed or dry_run:  # a rewrite that changes nothing says nothing (cron mails every line)
            note(f"{plural(len(changed), 'path')} {'would be' if dry_run else ''} made relative".replace("  ", " "))
        doc = state_document(directory, st) if dry_run else None
    if (rebuild or relative) and not dry_run and not as_json:
        return  # written: the status line says what; `ckptool state DIR` shows the file
    doc = doc if doc is not None else show_state(directory)
    if as_json:
        emit_json(doc)
        return
    click.echo(f"latest: {escape(doc['model_checkpoint_path'])}")
    for e in doc["entries"]:
        click.echo(f"  {escape(e['path'])}  {_when(e['timestamp'])}{'' if e['exists'] else '  (missing)'}")
    if doc["last_preserved_timestamp"]:
        click.echo(f"last preserved: {_when(doc['last_preserved_timestamp'])}")


def _when(ts: float | None) -> str:
    """A state-file timestamp in the one time format of human output (cli.common.human_time)."""
    return human_time(ts)
