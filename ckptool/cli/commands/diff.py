"""``ckptool diff``."""

from __future__ import annotations

import click

from ckptool.cli.common import REMOTE_READS, checkpoint_argument, emit_json, json_option, stream_jobs_option


@click.command("diff", epilog=REMOTE_READS)
@checkpoint_argument("a")
@checkpoint_argument("b")
@click.option("--atol", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="X",
              help="Values within X of each other (absolute) count as equal.")
@click.option("--rtol", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="R",
              help="Values within R times B's magnitude count as equal: |a - b| <= atol + R * |b|, "
                   "as numpy.isclose.")
@click.option("--match", multiple=True, metavar="GLOB",
              help="Compare only names (after --map) matching GLOB. Repeatable. Matching no name of "
                   "either side is an error naming the globs (exit 2), not 'identical'.")
@click.option("--map", "map_file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True),
              help="An assignment map, as rewrite-names --map reads it: A's names are renamed by it "
                   "before comparing (to check a migration); the object graph is then not compared. "
                   "'-' reads standard input.")
@stream_jobs_option()
@json_option("Print {\"a\", \"b\", \"atol\", \"rtol\", \"identical\", \"added\", \"removed\", \"changed\", "
             "\"values\", \"unchanged\"} on stdout.")
def command(a: str, b: str, atol: float, rtol: float, match: tuple[str, ...], map_file: str | None,
            jobs: int | None, as_json: bool) -> None:
    """Compare A and B: added, removed, changed tensors.

    \b
    A and B are anything convert reads: a checkpoint, a .safetensors,
    .npz or .npy file, so `diff runs/ckpt-5 model.safetensors` checks a
    conversion and `diff old/ckpt-1 new/ckpt-1 --map map.json` a migration.
    Values are compared chunk by chunk (a tensor of a file other than a
    checkpoint is loaded one at a time).

    \b
    Lines start with '-' (only in A), '+' (only in B) or '~' (dtype or
    shape changed, or values differ: how many elements, and the largest
    absolute difference). A totals line goes to stderr.

    \b
    Exit status, as diff(1) and cmp(1): 0 when A and B hold the same
    names, dtypes, shapes and values (within --atol and --rtol); 1 when
    they differ; 2 for trouble: either side cannot be read (one
    'ckptool: error:' line on stderr), or a usage error.

    \b
    Examples:
      ckptool diff runs/ckpt-3 runs/ckpt-5 --atol 1e-6
      ckptool diff runs/ckpt-5 model.safetensors
      ckptool diff tf1/model.ckpt tf2/ckpt-1 --map map.json --match 'model/*'
    """
    from contextlib import ExitStack

    from ckptool.cli import render
    from ckptool.cli.common import settings
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.inspect.diff import diff_sides, open_side

    settings().error_status = 2  # trouble is 2; 1 means "they differ"
    rename = None
    if map_file is not None:
        from ckptool.cli.commands.rewrite_names import read_map
        from ckptool.errors import UsageError
        from ckptool.ops.transform.rename.rules import Renamer, parse_map

        try:
            rename = Renamer(parse_map(read_map(map_file)))
        except UsageError as exc:
            raise UsageError(f"--map {map_file}: {exc}") from None

    with ExitStack() as stack:
        sa = stack.enter_context(open_side(a))
        sb = stack.enter_context(open_side(b))
        with progress_bar("comparing") as bar:
            report = diff_sides(sa, sb, atol=atol, rtol=rtol, match=match, rename=rename, progress=bar, jobs=jobs)
    if as_json:
        emit_json(report.to_json())
    else:
        render.print_diff(report)
    if not report.identical:
        raise Failed()
