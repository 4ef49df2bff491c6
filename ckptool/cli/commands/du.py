"""``ckptool du``."""

from __future__ import annotations

import click

from ckptool.cli.common import duration_callback, emit_json, error, escape, given_policy, human_bytes, json_option


def _age(seconds):
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


@click.command("du")
@click.argument("root", metavar="ROOT", type=click.Path(file_okay=False))
@click.option("--max-to-keep", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="Policy for the 'would free' column (as prune; .ckptool.toml files override it).")
@click.option("--keep-every-n-hours", type=click.FloatRange(min=0, min_open=True), default=None, metavar="H",
              help="Policy: as prune --keep-every-n-hours (default: none).")
@click.option("--keep-steps-every", type=click.IntRange(min=1), default=None, metavar="N",
              help="Policy: as prune --keep-steps-every.")
@click.option("--min-age", callback=duration_callback, default=None, metavar="DURATION",
              help="Policy: as prune --min-age.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip directories matching GLOB. Repeatable.")
@json_option("Print a JSON document: {\"directories\": [...], \"total\": {...}}.")
def command(root: str, max_to_keep: int, keep_every_n_hours, keep_steps_every, min_age, exclude, as_json: bool) -> None:
    """Where the space goes: checkpoints per run directory below ROOT.

    For each directory holding checkpoints (a 'checkpoint' state file or any
    *.index): the number of complete checkpoints, their bytes (each file
    counted once, hard links too; other programs' files are not counted),
    the temporary files killed writers left (TEMP; prune --clean-temp),
    the latest step and its age (from the state file's timestamps where it
    records them, as prune's retention reads them; else the file's time),
    and what 'ckptool prune ROOT --recursive'
    would free with the effective policy (a hard-linked file only when its
    last link would go). Largest first, then a total.
    Nothing is changed.

    Exit status: 0 ok; 1 ROOT missing or a directory could not be read; 2
    usage error.
    """
    from ckptool.cli.main import Failed
    from ckptool.ops.retain.du import du

    given = given_policy(click.get_current_context(), max_to_keep=max_to_keep or None,
                         keep_every_n_hours=keep_every_n_hours, keep_steps_every=keep_steps_every, min_age=min_age)
    rows = du(root, exclude=exclude, **given)
    total = {"directories": len(rows), "checkpoints": sum(r.checkpoints for r in rows),
             "bytes": sum(r.bytes for r in rows), "would_free": sum(r.would_free or 0 for r in rows),
             "temp_files": sum(r.temp_files for r in rows), "temp_bytes": sum(r.temp_bytes for r in rows)}
    errors = [r for r in rows if r.error]
    if as_json:
        emit_json({"root": root, "directories": [r.to_json() for r in rows], "total": total})
    else:
        head = ("DIRECTORY", "CHECKPOINTS", "SIZE", "TEMP", "LATEST", "AGE", "WOULD FREE")
        table = [(escape(r.directory), str(r.checkpoints), human_bytes(r.bytes),
                  human_bytes(r.temp_bytes) if r.temp_files else "-",
                  "-" if r.latest_step is None else str(r.latest_step), _age(r.latest_age),
                  "error" if r.error else human_bytes(r.would_free)) for r in rows]
        table.append(("total", str(total["checkpoints"]), human_bytes(total["bytes"]),
                      human_bytes(total["temp_bytes"]) if total["temp_files"] else "-", "", "",
                      human_bytes(total["would_free"])))
        widths = [max(len(t[i]) for t in table + [head]) for i in range(7)]
        for t in [head] + table:
            click.echo("  ".join([t[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(t[1:], widths[1:])]).rstrip())
    for r in errors:
        if r.error:
            error(r.error)
    if errors:
        raise Failed()
