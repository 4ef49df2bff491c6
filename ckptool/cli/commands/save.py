"""``ckptool save``."""

from __future__ import annotations

import click

from ckptool.cli.common import (
    REMOTE_READS,
    emit_json,
    human_bytes,
    json_option,
    no_sync_option,
    note,
    plural,
    stream_jobs_option,
)


@click.command("save", epilog=REMOTE_READS)
@click.argument("prefix", metavar="PREFIX")
@click.option("--from", "sources", multiple=True, required=True, metavar="SRC",
              help="A .npz, .npy (named after the file) or .safetensors file, or a checkpoint "
                   "(copied without decoding). Repeatable.")
@click.option("--global-step", type=click.IntRange(min=0), metavar="N",
              help="Name the checkpoint PREFIX-N, as Saver.save(global_step=N) does.")
@click.option("--pad-step-number", is_flag=True,
              help="With --global-step: PREFIX-%08d, as Saver(pad_step_number=True).")
@click.option("--object-based", is_flag=True,
              help="Store plain names as NAME/.ATTRIBUTES/VARIABLE_VALUE with an object graph, "
                   "so tf.train.Checkpoint restores them.")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Spread the data over N data files.")
@click.option("--force", is_flag=True, help="Replace an existing checkpoint at the target.")
@stream_jobs_option()
@no_sync_option()
@click.option("--no-state", is_flag=True,
              help="Leave the directory's 'checkpoint' state file alone and apply no retention.")
@click.option("--max-to-keep", type=click.IntRange(min=0), default=None, metavar="K",
              help="Retention after saving: keep the K newest checkpoints (0 keeps all). Default: none "
                   "(or the directory's .ckptool.toml): save deletes nothing unasked.")
@click.option("--keep-every-n-hours", type=click.FloatRange(min=0, min_open=True), default=None, metavar="H",
              help="Retention: also preserve one checkpoint every H hours, as Saver does.")
@click.option("--wait", "wait", type=click.FloatRange(min=0), default=30.0, show_default=True, metavar="SECONDS",
              help="How long to wait for the directory's lock while another ckptool process (a prune, "
                   "another save) holds it; 0 fails at once naming the holder. After a second of "
                   "waiting, stderr says who holds it.")
@json_option("Print what was written (prefix, files, variables, bytes) and the retention result as JSON.")
def command(prefix: str, sources: tuple[str, ...], global_step: int | None, pad_step_number: bool,
            object_based: bool, shards: int, force: bool, no_sync: bool, no_state: bool, max_to_keep: int,
            keep_every_n_hours: float, wait: float, jobs: int | None, as_json: bool) -> None:
    """Write a V2 checkpoint at PREFIX from --from sources.

    Names are kept exactly; data goes to temporary files renamed into place
    (data first, index last). Unless --no-state, the directory's 'checkpoint'
    file then records PREFIX (relative paths) and retention is applied.
    """
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.transform.save import save

    if pad_step_number and global_step is None:
        raise click.UsageError("--pad-step-number needs --global-step")
    with progress_bar(f"save {prefix}") as bar:
        result = save(prefix, list(sources), global_step=global_step, pad_step_number=pad_step_number,
                      object_based=object_based, num_shards=shards, force=force, state=not no_state,
                      max_to_keep=max_to_keep or None, keep_every_n_hours=keep_every_n_hours, sync=not no_sync,
                      lock_timeout=wait, on_lock_wait=_LockNotice(), progress=bar, jobs=jobs)
    if as_json:
        emit_json(result.to_json())
        return
    # status, not data: stderr (stdout stays empty, so it can be piped)
    note(f"saved {result.prefix}: {plural(result.variables, 'variable')}, {human_bytes(result.nbytes)} "
         f"in {plural(len(result.files), 'file')}")
    if result.retention is not None:
        for p in result.retention.deleted:
            note(f"deleted {p}")


#: Seconds of waiting for a lock before saying so (once).
NOTICE_AFTER = 1.0


class _LockNotice:
    """``on_lock_wait``: after :data:`NOTICE_AFTER` seconds, one line naming who holds the lock."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, directory: str, waited: float) -> None:
        if self.said or waited < NOTICE_AFTER:
            return
        self.said = True
        from ckptool.io.control.lock import describe_holder

        note(f"waiting for the lock held by {describe_holder(directory)} on {directory}")
