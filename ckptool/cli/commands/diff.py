"""``ckptool diff``."""

from __future__ import annotations

import click

from ckptool.cli.common import checkpoint_argument, emit_json, json_option


@click.command("diff")
@checkpoint_argument("a")
@checkpoint_argument("b")
@click.option("--atol", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="X",
              help="Values within X of each other (absolute) count as equal.")
@json_option("Print {\"a\", \"b\", \"atol\", \"identical\", \"added\", \"removed\", \"changed\", "
             "\"values\", \"unchanged\"} on stdout.")
def command(a: str, b: str, atol: float, as_json: bool) -> None:
    """Compare checkpoints A and B: added, removed, changed tensors.

    \b
    Lines start with '-' (only in A), '+' (only in B) or '~' (dtype or
    shape changed, or values differ: how many elements, and the largest
    absolute difference). A totals line goes to stderr.

    \b
    Exit status, as diff(1) and cmp(1): 0 when A and B hold the same
    names, dtypes, shapes and values (within --atol); 1 when they differ;
    2 for trouble: either side cannot be read (one 'ckptool: error:' line
    on stderr), or a usage error.
    """
    import ckptool
    from ckptool.cli import render
    from ckptool.cli.common import settings
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.inspect.diff import diff

    settings().error_status = 2  # trouble is 2; 1 means "they differ"

    with ckptool.open(a) as ca, ckptool.open(b) as cb:
        with progress_bar("comparing") as bar:
            report = diff(ca, cb, atol=atol, progress=bar)
    if as_json:
        emit_json(report.to_json())
    else:
        render.print_diff(report)
    if not report.identical:
        raise Failed()
