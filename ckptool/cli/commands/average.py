"""``ckptool average``."""

from __future__ import annotations

import click

from ckptool.cli.common import (
    REMOTE_READS,
    display_name,
    emit_json,
    human_bytes,
    json_option,
    no_sync_option,
    note,
    plural,
    stream_jobs_option,
)


@click.command("average", epilog=REMOTE_READS)
@click.argument("inputs", nargs=-1, required=True, metavar="CKPT...|DIR")
@click.option("-o", "--output", "out", required=True, metavar="PREFIX", help="The checkpoint to write.")
@click.option("--last", type=click.IntRange(min=1), metavar="N",
              help="With one DIR: average its N newest checkpoints (by step, else by time).")
@click.option("--strip-optimizer", is_flag=True,
              help="Leave out optimizer state (default: taken from the newest input).")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Spread the data over N data files.")
@click.option("--dry-run", is_flag=True, help="Say what would be averaged, copied and dropped; write nothing.")
@click.option("--force", is_flag=True, help="Replace an existing checkpoint at PREFIX (never an input).")
@stream_jobs_option()
@no_sync_option()
@json_option("Print {inputs, newest, prefix, averaged, from_newest, dropped, files, bytes} as JSON.")
def command(inputs: tuple[str, ...], out: str, last: int | None, strip_optimizer: bool, shards: int,
            dry_run: bool, force: bool, jobs: int | None, no_sync: bool, as_json: bool) -> None:
    """Average checkpoints into one (float tensors in float64, the rest from the newest).

    \b
    Float tensors are averaged in float64 (a running mean: identical inputs
    come back bit for bit, finite inputs give a finite mean within their
    bounds) and rounded once to their dtype; integers, booleans, strings,
    the object graph and optimizer state come from the newest input (the
    highest step, else the last given). The inputs must have the same names,
    shapes and dtypes. One tensor of one input is in memory at a time. TF
    restores the output as it would the newest input. PREFIX is never one
    of the inputs (through any link), not even with --force.

    \b
    Examples:
      ckptool average runs/ --last 5 -o avg/ckpt
      ckptool average runs/ckpt-8 runs/ckpt-9 runs/ckpt-10 -o avg/ckpt --strip-optimizer
    """
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.transform.average import average

    with progress_bar(f"average -> {out}") as bar:  # a UsageError (a checkpoint given twice, ...) exits 2
        res = average(inputs, out, last=last, strip_optimizer=strip_optimizer, force=force, num_shards=shards,
                      dry_run=dry_run, sync=not no_sync, progress=bar, jobs=jobs)
    if as_json:
        emit_json(res.to_json())
        return
    if dry_run:
        for name in res.averaged:
            click.echo(f"average  {display_name(name)}")
        for name in res.from_newest:
            click.echo(f"newest   {display_name(name)}")
        for name in res.dropped:
            click.echo(f"drop     {display_name(name)}")
    verb = "would write" if dry_run else "wrote"
    size = f", {human_bytes(res.nbytes)}"
    note(f"# {verb} {res.prefix}: {plural(len(res.inputs), 'input')}, {len(res.averaged)} averaged, "
         f"{len(res.from_newest)} from the newest ({res.inputs[-1]}), {len(res.dropped)} dropped{size}")
