"""``ckptool prune``."""

from __future__ import annotations

import click

from ckptool.cli.common import emit_json, human_bytes, json_option, note


def _duration(ctx, param, value):
    if value is None:
        return None
    from ckptool.ops.retention import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("prune")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--max-to-keep", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="Keep the K newest checkpoints of the state file (0 keeps all), as "
                   "CheckpointManager(max_to_keep=K) / Saver(max_to_keep=K).")
@click.option("--keep-every-n-hours", type=click.FloatRange(min=0, min_open=True), default=None, metavar="H",
              help="Of those rotated out, preserve one every H hours (kept on disk, dropped from the "
                   "state file), as keep_checkpoint_every_n_hours. Default: none (CheckpointManager's).")
@click.option("--keep-steps-every", type=click.IntRange(min=1), default=None, metavar="N",
              help="Also keep every checkpoint whose step is a multiple of N (stays in the state file).")
@click.option("--min-age", callback=_duration, default=None, metavar="DURATION",
              help="Never delete a checkpoint younger than DURATION (90s, 30m, 12h, 7d): an evaluator "
                   "may be reading it.")
@click.option("--keep", "pinned", multiple=True, metavar="NAME",
              help="Never delete checkpoint NAME (a prefix base name such as ckpt-1000). Repeatable.")
@click.option("--scan", is_flag=True,
              help="Consider every complete checkpoint in DIR (orphans of earlier runs, absolute TF1 "
                   "paths of a moved directory, checkpoints TF preserved and forgot), not only the "
                   "state file's; the policy is applied over the whole history, ordered by step then age.")
@click.option("-r", "--recursive", is_flag=True,
              help="DIR is a ROOT: prune every directory below it holding a 'checkpoint' state file "
                   "(with --scan, any *.index too), each with its effective policy: these flags, "
                   "overridden by the nearest .ckptool.toml from ROOT down (max_to_keep, "
                   "keep_every_n_hours, keep_steps_every, min_age, keep = [names]). Symlinked "
                   "directories are not followed; a failing directory is reported and the rest run.")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="With --recursive: skip directories whose path below ROOT (or name) matches GLOB. "
                   "Repeatable.")
@click.option("-n", "--dry-run", is_flag=True, help="Show the plan; change nothing.")
@json_option('Print {"kept": [...], "deleted": [...], "preserved": [...], "reasons": {...}, '
             '"bytes_freed": N, ...} as JSON.')
def command(directory: str, max_to_keep: int, keep_every_n_hours: float | None, keep_steps_every: int | None,
            min_age: float | None, pinned: tuple[str, ...], scan: bool, recursive: bool, exclude: tuple[str, ...],
            dry_run: bool, as_json: bool) -> None:
    """Apply retention to the checkpoints in DIR, exactly as TensorFlow would.

    The decision is tf.train.CheckpointManager's: the state file's
    checkpoints, oldest first, with their recorded timestamps (for a TF1
    Saver directory without timestamps, the .index modification times, as
    recover_last_checkpoints does); the K newest are kept; each one rotated
    out is preserved if --keep-every-n-hours says so, else deleted with all
    its files (.index, every .data-*, .meta and other PREFIX.* files).
    --keep-steps-every, --min-age and --keep add protection (the union of the
    rules keeps a checkpoint).

    Safe to run from cron: the latest checkpoint is never deleted; a plan that
    would delete every checkpoint is refused; nothing outside DIR is touched
    (state entries with '..', absolute paths elsewhere and symlinks out are
    left alone with a warning); files being written (*.tempstate*, *_temp*)
    are left alone; the state file is rewritten atomically, after re-reading
    it so that checkpoints a trainer saved meanwhile are kept; an advisory
    lock (DIR/.ckptool.lock) keeps two prunes apart.

    The table says why each checkpoint is kept: latest, max_to_keep,
    every-n-hours, steps-every, min-age, pinned (--keep), or unmanaged (at
    or before the state's last_preserved_timestamp: TF no longer manages it).

    With --recursive, one line of cron keeps a whole tree of runs in policy:
    per directory the kept / deleted / preserved counts and bytes freed,
    then a total (--json: one document keyed by directory).

    Exit status: 0 done (or nothing to do); 1 refused or failed (no state
    file without --scan, a corrupt state file, lock held; with --recursive,
    any directory failed); 2 usage error.
    """
    from ckptool.ops.manage import prune, prune_tree

    if exclude and not recursive:
        raise click.UsageError("--exclude needs --recursive")
    if recursive:
        _recursive(directory, max_to_keep, keep_every_n_hours, keep_steps_every, min_age, pinned, scan, exclude,
                   dry_run, as_json, prune_tree)
        return

    result = prune(directory, max_to_keep=max_to_keep or None, keep_every_n_hours=keep_every_n_hours,
                   keep_steps_every=keep_steps_every, min_age=min_age, keep=pinned, scan=scan, dry_run=dry_run)
    if as_json:
        emit_json(result.to_json())
        return
    render_result(result)


def render_result(result, prefix: str = "") -> None:
    rows = [(p, "keep", ", ".join(result.reasons.get(p, []))) for p in result.kept]
    rows += [(p, "preserve", ", ".join(result.reasons.get(p, []))) for p in result.preserved]
    rows += [(p, "would delete" if result.dry_run else "deleted", "") for p in result.deleted]
    rows += [(p, "skipped", "outside the directory") for p in result.skipped]
    width = max((len(r[0]) for r in rows), default=10)
    aw = max((len(r[1]) for r in rows), default=4)
    for path, action, why in rows:
        click.echo(f"{prefix}{path:<{width}}  {action:<{aw}}  {why}".rstrip())
    verb = "would free" if result.dry_run else "freed"
    note(f"{len(result.kept)} kept, {len(result.preserved)} preserved, {len(result.deleted)} "
         f"{'to delete' if result.dry_run else 'deleted'}; {verb} {human_bytes(result.bytes_freed)}")


def _recursive(root, max_to_keep, keep_every_n_hours, keep_steps_every, min_age, pinned, scan, exclude, dry_run,
               as_json, prune_tree) -> None:
    from ckptool.cli.common import quiet, stderr_is_terminal
    from ckptool.cli.main import Failed

    def progress(i, n, d):
        if stderr_is_terminal() and not quiet():
            click.echo(f"\r[{i + 1}/{n}] {d[-60:]:<60}", err=True, nl=False)

    tree = prune_tree(root, max_to_keep=max_to_keep or None, keep_every_n_hours=keep_every_n_hours,
                      keep_steps_every=keep_steps_every, min_age=min_age, keep=pinned, exclude=exclude, scan=scan,
                      dry_run=dry_run, progress=progress)
    if stderr_is_terminal() and not quiet() and (tree.runs or tree.errors):
        click.echo("\r" + " " * 70 + "\r", err=True, nl=False)
    if as_json:
        emit_json(tree.to_json())
    else:
        rows = [(d, str(len(r.kept)), str(len(r.deleted)), str(len(r.preserved)), human_bytes(r.bytes_freed))
                for d, r in tree.runs.items()]
        t = tree.total()
        head = ("DIRECTORY", "KEPT", "TO DELETE" if dry_run else "DELETED", "PRESERVED",
                "WOULD FREE" if dry_run else "FREED")
        rows.append(("total", str(t["kept"]), str(t["deleted"]), str(t["preserved"]), human_bytes(t["bytes_freed"])))
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
        for r in [head] + rows:
            click.echo("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))
    for d, msg in tree.errors.items():
        click.echo(f"ckptool: error: {msg}", err=True)
    if tree.errors:
        raise Failed(f"{len(tree.errors)} of {len(tree.runs) + len(tree.errors)} directories failed")
