"""``ckptool prune``."""

from __future__ import annotations

import click

from ckptool.cli.common import (
    duration_callback,
    emit_json,
    error,
    escape,
    given_policy,
    human_bytes,
    json_option,
    note,
    plural,
    quiet,
    verbose,
)
from ckptool.cli.keep_best import best_options, best_spec, note_without_value, reason
from ckptool.cli.prune_report import changed, damage_failure, extra_rows, note_changes, placed_how


def _epilog() -> str:
    """The crontab line and the commented .ckptool.toml (the one --print-config writes)."""
    from ckptool.io.control.policy import policy_template

    # each paragraph a \b block: click and the man page keep its lines as they are
    template = "\n\n\b\n".join("\n".join("  " + ln for ln in para.splitlines())
                                  for para in policy_template().split("\n\n"))
    return ("\b\nFrom cron, one line keeps every run below a ROOT in policy (crontab -e; give the full path\n"
            "of ckptool, cron's PATH is short). It prints nothing unless something was deleted or\n"
            "went wrong, and cron mails whatever is printed; with -q, only errors:\n"
            "  17 * * * *  /opt/venv/bin/ckptool prune /data/runs --recursive --clean-temp\n\n"
            "\b\nA run is pruned by --recursive only under a policy: a .ckptool.toml in it or above it\n"
            "(prune --print-config > /data/runs/.ckptool.toml writes this one, every key at its default):\n"
            + template)


def _print_config(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from ckptool.io.control.policy import policy_template

        click.echo(policy_template(), nl=False)
        ctx.exit()


#: prune --help (and the man page's DESCRIPTION).
HELP = """Apply retention to the checkpoints in DIR, exactly as TensorFlow would.

The decision is tf.train.CheckpointManager's: the state file's
checkpoints, oldest first, with their recorded timestamps (for a TF1
Saver directory without timestamps, the .index modification times, as
recover_last_checkpoints does); the K newest are kept; each one rotated
out is preserved if --keep-every-n-hours says so, else deleted with its
own files (PREFIX.index, PREFIX.data-NNNNN-of-NNNNN, PREFIX.meta; for V1
the file PREFIX or its shards) and nothing else: PREFIX.json,
PREFIX.notes.txt or PREFIX.index.bak beside it stay; a V1 file only when
it parses as one; names compared literally.

Precedence, as git and restic: a flag given beats DIR/.ckptool.toml,
which beats the default (max_to_keep 5); --dry-run and -v print where
each setting came from (flag, the file, default). A .ckptool.toml that
does not parse stops the run. --keep-steps-every, --min-age and --keep
add protection (the union of the rules keeps a checkpoint).

Kept means kept, even beside a trainer that is still running (TF's
CheckpointManager and Saver delete from the list they hold in memory,
not from the state file): a checkpoint kept by --keep, --keep-best,
--keep-steps-every or --keep-every-n-hours is given a second name in
DIR/kept/ (a hard link: nothing copied; a copy across file systems and
on an object store), a checkpoint directory with its own state file that
tf.train.latest_checkpoint and load_checkpoint read. Beyond the newest K
it moves there (its names in DIR go, and it leaves DIR's state file);
still among them it is linked there and stays in DIR. A name in kept/ is
never overwritten (another checkpoint of that name becomes STEM.2-STEP).
The table and --json give each kept checkpoint's path there. inspect,
du, verify and --keep-best see DIR/kept/ as part of the run; prune
deletes from it only under a policy given for it (prune DIR/kept
--max-to-keep N, or DIR/kept/.ckptool.toml; --recursive leaves it alone
otherwise). --min-age keeps stay in place. Every step is journaled: a
prune killed anywhere is finished by the next one.

Damaged checkpoints: before deleting anything, prune checks what it
keeps (every file there, each data file as long as the index needs;
--verify: every CRC too). A damaged checkpoint is never counted as one
of K and never preserved; the newest intact checkpoint is never deleted
(preserved as 'last intact' when a damaged one took its place); each
damaged one kept is named on stderr and the exit status is 1, so cron
mails it. State entries whose files were already gone are reported as
'already gone', not deleted.

A TF1 Saver's state file has no timestamps: the .index modification
times are used, the oldest checkpoint's as the trainer's start, with
Saver's every-N-hours arithmetic (a checkpoint is preserved when its
time is strictly after the next keep time, which then advances by N
hours); the times and last_preserved_timestamp are written back, so the
next run continues from them (as a CheckpointManager's file).

Safe to run from cron: the latest checkpoint is never deleted; a plan that
would delete every checkpoint is refused; nothing outside DIR is touched
(state entries with '..', absolute paths elsewhere and symlinks out are
left alone with a warning; paths are compared by identity, through
symlinks); temporary files are left alone (--clean-temp: the exact
rule above); deletes go through DIR's descriptor, never a path, each
checkpoint's index first, after a journal (DIR/.ckptool-prune-pending)
names them, so an interrupted prune or rm is finished by the next one;
the state file is replaced atomically and only if unchanged since it was
re-read, so that checkpoints a trainer saved meanwhile are kept; an
advisory lock (DIR/.ckptool.lock) keeps prunes and saves apart; a FIFO
or device at the lock, the state file or an index is refused at once.
A run prints what it deleted and a summary line, and nothing when
nothing is deleted (cron mails every line; -q: errors only). A file that
cannot be deleted is reported and its checkpoint is not counted as
deleted or freed; the rest still go.

--dry-run and -v print the plan: each setting and where it came from
(policy: KEY = VALUE (flag | FILE | default)), then every checkpoint in a
table that says why each is kept: latest, max_to_keep,
every-n-hours, steps-every, min-age, pinned (--keep), best (--keep-best,
with its value), or unmanaged (at or before the state's
last_preserved_timestamp: TF no longer manages it).

--keep-best N --metric TAG [--mode min|max] [--metrics PATH] also keeps
the N best checkpoints by a metric at their global step (the number in
the name); one with no value is no candidate (the count is shown); ties
go to the newer. A metric no file has is an error listing the tags
found, and nothing is deleted; a damaged event file is reported and its
damaged part skipped. .ckptool.toml keys: keep_best, metric, mode,
metrics (a relative path there is relative to each run directory).

--series TEMPLATE (or series = "TEMPLATE" in .ckptool.toml) prunes a
Keras ModelCheckpoint file series, which Keras never prunes: the files
whose names TEMPLATE's fields format exactly (Keras names the epoch and
batch from 1), ordered by {epoch} then {batch}, else by time, under the
same policy (--keep-steps-every counts epochs; --keep-best takes the
metric from a field of the names, or from --metrics: a CSVLogger .csv,
JSON Lines of {"epoch": N, ...} or event files, whose epochs Keras counts
from 0). Keras writes in place: a member not whole is never counted;
the newest such is a save in progress and left alone, an older one is
damaged (exit 1 while it is kept); the newest file younger than a
minute is never deleted. A directory holding such files and no state
file is named in prune's error with the --series that fits it.

With --recursive, one line of cron keeps a whole tree of runs in policy:
per directory where something was deleted (every one with -v or
--dry-run) the kept / deleted / preserved counts and bytes freed, then a
total (--json: one document keyed by directory). A tree where no run has
a policy says so on stderr ("N runs, none with a policy: nothing to
do"): that cron job would never prune.

Exit status: 0 done (or nothing to do); 1 refused or failed (no state
file without --scan, a corrupt state file or .ckptool.toml, lock held, a
file that could not be deleted or kept, a --keep naming nothing, a
damaged checkpoint kept; with --recursive, any directory failed); 2
usage error. A run refused before it starts leaves no .ckptool.lock.
"""


@click.command("prune", help=HELP, epilog=_epilog())
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--max-to-keep", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="Keep the K newest checkpoints of the state file (0 keeps all), as "
                   "CheckpointManager(max_to_keep=K) / Saver(max_to_keep=K). Given, it beats .ckptool.toml.")
@click.option("--keep-every-n-hours", type=click.FloatRange(min=0, min_open=True), default=None, metavar="H",
              help="Of those rotated out, preserve one every H hours (kept on disk, dropped from the "
                   "state file), as keep_checkpoint_every_n_hours. Default: none (CheckpointManager's).")
@click.option("--keep-steps-every", type=click.IntRange(min=1), default=None, metavar="N",
              help="Also keep every checkpoint whose step is a multiple of N (stays in the state file).")
@click.option("--min-age", callback=duration_callback, default=None, metavar="DURATION",
              help="Never delete a checkpoint younger than DURATION (90s, 30m, 12h, 7d): an evaluator "
                   "may be reading it.")
@click.option("--keep", "pinned", multiple=True, metavar="CHECKPOINT",
              help="Never delete this checkpoint of DIR (ckpt-1000, DIR/ckpt-1000, ckpt-1000.index, an "
                   "absolute path; one that names no checkpoint of DIR is an error). Repeatable.")
@click.option("--scan", is_flag=True,
              help="Consider every complete checkpoint in DIR (orphans of earlier runs, absolute TF1 "
                   "paths of a moved directory, checkpoints TF preserved and forgot), not only the "
                   "state file's; the policy is applied over the whole history, ordered by step then age.")
@click.option("-r", "--recursive", is_flag=True,
              help="DIR is a ROOT: prune every directory below it holding a 'checkpoint' state file "
                   "(with --scan, any *.index too), each with its effective policy: the flags given, "
                   "then the nearest .ckptool.toml at or above it (max_to_keep, keep_every_n_hours, "
                   "keep_steps_every, min_age, keep = [names]), then the defaults. Without a policy "
                   "flag only runs with a .ckptool.toml at or above them are pruned; the others are "
                   "listed as 'no policy' and left alone. Symlinked directories are not followed; a "
                   "failing directory is reported and the rest run.")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="With --recursive: skip directories whose path below ROOT (or name) matches GLOB. "
                   "Repeatable.")
@click.option("--one-file-system", is_flag=True,
              help="With --recursive: do not descend into directories on other file systems.")
@click.option("--follow-symlinks", is_flag=True,
              help="With --recursive: descend into symlinked directories too (each directory once).")
@click.option("--clean-temp", is_flag=True,
              help="Also delete the temporary files of killed writers older than an hour, never while a "
                   "writer holds the lock; exactly: P.index.tempstateN, P.data-NNNNN-of-NNNNN.tempstateN, "
                   "checkpoint.tmpHEX, ckptool's own temporaries, and a directory named exactly P_temp or "
                   "P_temp_<32 hex> holding only TF's part-* files, P a checkpoint of DIR or the next step "
                   "of one. Nothing else (softmax_temp_0.5/, "
                   "hparams.tmpl and a checkpoint named model_temp-3 are ordinary).")
@click.option("--series", metavar="TEMPLATE",
              help="Prune a Keras ModelCheckpoint file series instead: TEMPLATE is its filepath, e.g. "
                   "'model-{epoch:02d}-{val_loss:.2f}.keras' (.keras, .weights.h5, .weights.json + parts, .h5, or "
                   "a tf_keras TF-format prefix), names matched exactly, ordered by {epoch} then {batch}, else by "
                   "time. Given, it beats series = \"...\" in .ckptool.toml.")
@best_options
@click.option("--verify", is_flag=True,
              help="Check what is kept by its CRCs too (every byte read), not only that every file is there "
                   "and each data file as long as its index needs.")
@click.option("-n", "--dry-run", is_flag=True, help="Show the plan; change nothing.")
@click.option("--print-config", is_flag=True, is_eager=True, expose_value=False, callback=_print_config,
              help="Print a commented .ckptool.toml with every key prune reads, each at its default, and "
                   "exit (prune --print-config > ROOT/.ckptool.toml).")
@json_option('Print {"kept": [...], "deleted": [...], "preserved": [...], "reasons": {...}, '
             '"bytes_freed": N, "moved": [{"from", "to", "how", "bytes_copied"}], "linked": [...] (into DIR/kept/; '
             '"how": "hard link" or "copy" when placed by this run), '
             '"damaged": [{"path", "problem"}], "already_gone": [...], "best": {...} (--keep-best), '
             '"policy_sources": {setting: "flag" | FILE | "default"}, ...} as JSON (with --recursive, a run '
             'left alone: {"no_policy": true}).')
def command(directory: str, max_to_keep: int, keep_every_n_hours: float | None, keep_steps_every: int | None,
            min_age: float | None, pinned: tuple[str, ...], scan: bool, recursive: bool, exclude: tuple[str, ...],
            one_file_system: bool, follow_symlinks: bool, clean_temp: bool, series: str | None, verify: bool,
            dry_run: bool,
            as_json: bool, **best_flags) -> None:
    """``ckptool prune`` (its help: :data:`HELP`)."""
    for flag, on in (("--exclude", exclude), ("--one-file-system", one_file_system),
                     ("--follow-symlinks", follow_symlinks)):
        if on and not recursive:
            raise click.UsageError(f"{flag} needs --recursive")
    if best_flags.get("keep_best") is not None and not best_flags.get("metric"):
        best_flags["metric"] = _template_metric(directory, series, recursive)
    best = best_spec(**best_flags)
    given = given_policy(click.get_current_context(), max_to_keep=max_to_keep or None,
                         keep_every_n_hours=keep_every_n_hours, keep_steps_every=keep_steps_every, min_age=min_age)
    if recursive:
        from ckptool.ops.retain.fleet import prune_tree

        _recursive(directory, given, pinned, scan, exclude, dry_run, as_json, prune_tree, clean_temp=clean_temp,
                   one_file_system=one_file_system, follow_symlinks=follow_symlinks, best=best, verify=verify,
                   series=series)
    else:
        _one(directory, given, pinned, scan, dry_run, as_json, clean_temp=clean_temp, best=best, verify=verify,
             series=series)


def _template_metric(directory: str, series: str | None, recursive: bool) -> str | None:
    """The one metric field of the series template (--series, else the run's .ckptool.toml's),
    for --keep-best without --metric; None when there is none."""
    from ckptool.errors import CkptError
    from ckptool.io.backends.urls import storage_for
    from ckptool.io.control.policy import resolve_policy
    from ckptool.ops.retain.keep_best import template_metric

    if series is None and not recursive:
        try:
            storage, path = storage_for(directory)
            series = resolve_policy(path, path, {"keep": []}, storage).policy.get("series")
        except CkptError:
            return None  # the prune itself says what is wrong
    return template_metric(series)


def _one(directory, given, pinned, scan, dry_run, as_json, **options) -> None:
    """Prune DIR; print what was done (the plan with --dry-run or -v), then each failure."""
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.retain.prune import prune

    with progress_bar(f"prune {directory}", unit="items") as bar:
        result = prune(directory, keep=pinned, scan=scan, dry_run=dry_run, progress=bar, **options, **given)
    if as_json:
        emit_json(result.to_json())
    elif dry_run or verbose():  # the plan: where each setting came from, every checkpoint and why
        render_sources(result)
        render_result(result)
    elif (result.deleted or result.temp_deleted or result.failed or changed(result)) and not quiet():
        render_result(result, plan=False)  # what was done, and the summary: cron mails every line
    if (failed := _say_failed(result.failed)) is not None:
        raise Failed(failed)
    if (damaged := damage_failure([result])) is not None:
        raise Failed(damaged)


def _say_failed(failed: list[dict]) -> str | None:
    """Each file that could not be deleted (or moved) on stderr; the exit's message, None when none."""
    for f in failed:
        error(f"{f['path']}: cannot {f.get('action', 'delete')}: {f['error']}")
    if not failed:
        return None
    return (f"{plural(len(failed), 'file')} could not be "
            f"{'deleted' if all(f.get('action', 'delete') == 'delete' for f in failed) else 'handled'}")

def render_sources(result, prefix: str = "") -> None:
    """Where each setting came from: flag, a .ckptool.toml (which), or the default (-v, --dry-run)."""
    policy = result.policy
    for key in ("series", "max_to_keep", "keep_every_n_hours", "keep_steps_every", "min_age", "keep", "keep_best",
                "metric", "mode", "metrics"):
        if key not in result.sources:
            continue
        value = policy.get(key)
        shown = (", ".join(value) or "none") if isinstance(value, list) else "none" if value is None else value
        note(f"{prefix}policy: {key} = {escape(str(shown))}  ({escape(result.sources[key])})")


def render_result(result, prefix: str = "", plan: bool = True) -> None:
    """The table (``plan``: every checkpoint and why; else what was done) and the summary line."""
    rows = [(p, "keep", reason(result, p)) for p in result.kept] if plan else []
    rows += [(p, "preserve", reason(result, p)) for p in result.preserved]
    rows += [(p, "would delete" if result.dry_run else "deleted", "") for p in result.deleted]
    rows += [(p, "skipped", "outside the directory") for p in result.skipped]
    rows += [(p, "would delete" if result.dry_run else "deleted", "temporary") for p in result.temp_deleted]
    rows += extra_rows(result)
    rows = [(p, action, why + placed_how(result, p)) for p, action, why in rows]  # "hard link" / "copy, N bytes"
    rows = [(escape(p), action, escape(why)) for p, action, why in rows]
    width = max((len(r[0]) for r in rows), default=10)
    aw = max((len(r[1]) for r in rows), default=4)
    for path, action, why in rows:
        click.echo(f"{prefix}{path:<{width}}  {action:<{aw}}  {why}".rstrip())
    note_without_value(result)  # --keep-best: the checkpoints with no value of the metric
    note_changes(result, prefix)
    verb = "would free" if result.dry_run else "freed"
    note(f"{len(result.kept)} kept, {len(result.preserved)} preserved, {len(result.deleted)} "
         f"{'to delete' if result.dry_run else 'deleted'}; {verb} {human_bytes(result.bytes_freed)}")


def _recursive(root, given, pinned, scan, exclude, dry_run, as_json, prune_tree, **walk) -> None:
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar

    with progress_bar(f"prune {root}", unit="items") as bar:  # runs done of runs found
        tree = prune_tree(root, keep=pinned, exclude=exclude, scan=scan, dry_run=dry_run,
                          progress=lambda i, n, d: bar(i, n), **given, **walk)
    plan = dry_run or verbose()
    if as_json:
        emit_json(tree.to_json())
    else:
        # the plan shows every run; a plain run (cron mails every line) only those where something was done
        done = {d: r for d, r in tree.runs.items()
                if plan or r.deleted or r.temp_deleted or r.failed or changed(r)}
        if plan or (done and not quiet()):
            _tree_table(tree, done, tree.no_policy if plan else [], dry_run)
    if tree.no_policy and not tree.runs and not tree.errors:  # a cron job that would silently never prune
        note(f"{plural(len(tree.no_policy), 'run')}, none with a policy: nothing to do; see .ckptool.toml in "
             f"ckptool-prune(1)")
    elif not tree.no_policy and not tree.runs and not tree.errors:
        note(f"no checkpoint directories below {escape(root)}: nothing to do")
    elif tree.no_policy and plan and not as_json:
        n = len(tree.no_policy)
        note(f"{n} run{'s' if n != 1 else ''} with no .ckptool.toml at or above {'them' if n != 1 else 'it'} and "
             f"no policy flag given: left alone")
    if plan and not as_json:
        for d, r in tree.runs.items():
            render_sources(r, prefix=f"{escape(d)}: ")
    for d, r in tree.runs.items() if not as_json else ():
        note_changes(r, prefix=f"{d}: ")
    said = list(dict.fromkeys(tree.errors.values()))  # a bad .ckptool.toml read by many runs: said once
    for msg in said:
        error(msg)
    failed = _say_failed([f for r in tree.runs.values() for f in r.failed])  # cron learns of each
    if tree.errors:
        dirs = plural(len(tree.runs) + len(tree.errors), "directory", "directories")
        raise Failed(f"{len(tree.errors)} of {dirs} failed" if len(said) > 1 or len(tree.errors) == 1 else "")
    if failed is not None:
        raise Failed(failed)
    if (damaged := damage_failure(tree.runs.values())) is not None:
        raise Failed(damaged)


def _tree_table(tree, runs, no_policy, dry_run: bool) -> None:
    """One row per run of ``runs`` (and per run of ``no_policy``, left alone), then the total."""
    rows = [(escape(d), str(len(r.kept)), str(len(r.deleted)), str(len(r.preserved)), human_bytes(r.bytes_freed))
            for d, r in runs.items()]
    rows += [(escape(d), "-", "-", "-", "no policy") for d in no_policy]
    rows = sorted(rows)
    t = tree.total()
    head = ("DIRECTORY", "KEPT", "TO DELETE" if dry_run else "DELETED", "PRESERVED",
            "WOULD FREE" if dry_run else "FREED")
    rows.append(("total", str(t["kept"]), str(t["deleted"]), str(t["preserved"]), human_bytes(t["bytes_freed"])))
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
    for r in [head] + rows:
        click.echo("  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]))
