"""``ckptool convert SRC OUT_DIR --to hf``: run the export, print the mapping (``--dry-run``) or what
was written."""

from __future__ import annotations

from typing import Any

import click

from ckptool.cli.common import emit_json, escape, format_shape, human_bytes, note, plural


def export(src: str, dst: str, hf: dict[str, Any], dry_run: bool, allow_unused: bool, force: bool,
           jobs: int | None, sync: bool, as_json: bool, ema: bool = False) -> None:
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.transform.hf.export import convert_hf

    with progress_bar(f"convert {dst}") as bar:
        result = convert_hf(src, dst, dry_run=dry_run, allow_unused=allow_unused, force=force, sync=sync,
                            progress=bar, jobs=jobs, ema=ema, **hf)
    if as_json:
        emit_json(result.to_json())
        return
    if dry_run:
        rows = [(escape(t), escape(h), format_shape(s), op) for t, h, s, op in result.mapping]
        rows += [(escape(t), f"({why})", "", "") for t, why in result.dropped]
        rows += [(escape(t), "(left out: --allow-unused)", "", "") for t in result.unused]
        width = max((len(r[0]) for r in rows), default=0)
        for t, h, shape, op in rows:
            click.echo(f"{t:<{width}}  ->  {h}  {shape}  {f'({op})' if op else ''}".rstrip())
    for line in result.notes:
        note(line)
    what = f"{result.arch}: {result.architecture}"
    if dry_run:
        note(f"dry run: {plural(result.tensors, 'tensor')} would be written to {dst} ({what}); nothing written")
        return
    left = f", {plural(len(result.unused), 'variable')} left out" if result.unused else ""
    note(f"converted {src} -> {dst} ({what}): {plural(result.tensors, 'tensor')}, "
         f"{human_bytes(result.nbytes)} in {plural(len(result.files), 'file')}{left}")
