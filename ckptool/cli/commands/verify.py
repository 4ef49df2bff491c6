"""``ckptool verify``."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import click

from ckptool.cli.common import display_name, emit_json, human_bytes, jobs_option, json_option, plural, quiet


@click.command("verify")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-r", "--recursive", is_flag=True,
              help="Also every directory below each PATH (symlinks to directories are not followed).")
@jobs_option()
@json_option("Print one JSON document on stdout instead of text.")
def command(paths: tuple[str, ...], recursive: bool, jobs: int | None, as_json: bool) -> None:
    """Check that checkpoints are sound: every shard present, every CRC, every slice.

    \b
    A PATH is a checkpoint (any CHECKPOINT form) or a directory: every
    checkpoint it holds; with --recursive, every run below it too. Each
    checkpoint is read in full on every core (--jobs to choose): every data shard the header
    counts must be present, every tensor's CRC32C must match, and the slices
    of each partitioned variable must cover its full shape exactly once.
    Exit 0 when all are sound; 1 naming each damaged checkpoint and tensor
    (the others are still checked), and 1 naming each directory below PATH
    that cannot be listed or entered. V1 checkpoints are checked too, and
    every other source convert reads, as far as its format can say: a
    .safetensors file's header and that its tensors fill the file exactly,
    an .npz member's CRC-32 and .npy header, a Hugging Face folder's index
    (every tensor in the shard its weight_map names, total_size),
    config.json and shards (none of them has a checksum per tensor).
    Memory: a 1 MiB buffer per thread (on an object store, the GETs in
    flight), plus under 1 KB a tensor for the index.

    \b
    A directory is one run: its kept/ (where prune keeps what a running
    trainer must not delete) is verified with it, and its 'checkpoint' state
    file is read as TensorFlow reads it: one TF ignores (it does not parse or
    cannot be read: TF logs "Checkpoint ignored"), raises on (not UTF-8, no
    model_checkpoint_path) or whose latest does not exist (latest_checkpoint
    is None: a moved TF1 run's absolute paths too; 'ckptool state
    --relative' fixes those) is reported as STATE and exits 1: a trainer
    would start from scratch.

    \b
    A tree with no checkpoint at all prints "no checkpoints found under
    PATH" and exits 0, as prune --recursive does on it: nothing to check is
    not damage, and the line still reaches a cron mail. A PATH with nothing
    there is reported as MISSING ("no such checkpoint"), not damaged, and
    exits 1; so is a directory named without --recursive that holds no
    checkpoint. From cron, -q lists only what is damaged or unreadable: a
    sound tree prints nothing.

    \b
    JSON: {"ok", "checkpoints", "damaged", "results": [{"prefix", "ok",
    "tensors", "bytes", "errors": [{"name", "error"}]}], "unreadable":
    [{"path", "error"}], "missing": [{"path", "error"}], "state_files":
    [{"path", "error"}]}.
    """
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.inspect.verify_tree import verify_paths

    bars: list[AbstractContextManager[Any]] = []

    def progress(prefix: str):
        for b in bars:
            b.__exit__(None, None, None)
        bars.clear()
        cm = progress_bar(f"verifying {display_name(prefix)}")
        bars.append(cm)
        return cm.__enter__()

    try:
        report = verify_paths(paths, recursive, progress=progress, workers=jobs)
    finally:
        for b in bars:
            b.__exit__(None, None, None)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_report(report, paths)
    failures = _failures(report)
    if failures:
        raise Failed("verify: " + "; ".join(failures))


def _print_report(report, paths) -> None:
    """One line per checkpoint (-q: only the damaged ones, each with its problems), then what
    could not be read, what is missing and the state files TF cannot use."""
    for r in report.checkpoints:
        if r.ok:
            if quiet():  # -q: only what is wrong (cron mails every line)
                continue
            what = f"{plural(r.tensors, 'tensor')}, {human_bytes(r.bytes)}"
            click.echo(f"ok       {display_name(r.prefix)}  ({what})")
            continue
        click.echo(f"DAMAGED  {display_name(r.prefix)}")
        for p in r.problems:
            click.echo(f"  {display_name(p.name) if p.name else '(checkpoint)'}: {display_name(p.error)}")
    for u in report.unreadable:
        click.echo(f"UNREADABLE  {display_name(u.path)}: {display_name(u.error)}")
    for u in report.missing:
        click.echo(f"MISSING  {display_name(u.path)}: {display_name(u.error)}")
    for u in report.states:
        click.echo(f"STATE  {display_name(u.path)}: {display_name(u.error)}")
    if not (report.checkpoints or report.unreadable or report.missing or report.states):
        click.echo("no checkpoints found under " + ", ".join(display_name(p) for p in paths))


def _failures(report) -> list[str]:
    """What makes verify exit 1, one clause each."""
    failures = []
    if report.unreadable:
        n = len(report.unreadable)
        failures.append(f"cannot read {plural(n, 'directory', 'directories')}: "
                        + ", ".join(display_name(u.path) for u in report.unreadable))
    if report.missing:
        failures.append("no such checkpoint: " + ", ".join(display_name(u.path) for u in report.missing))
    if report.states:
        failures.append("TF cannot use the state file " + ", ".join(display_name(u.path) for u in report.states))
    if report.damaged:
        bad = report.damaged
        failures.append(f"{len(bad)} of {plural(len(report.checkpoints), 'checkpoint')} damaged: "
                        + ", ".join(display_name(r.prefix) for r in bad))
    return failures
