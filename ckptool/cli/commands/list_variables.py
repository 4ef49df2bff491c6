"""``ckptool list-variables``."""

from __future__ import annotations

import click

from ..common import checkpoint_argument, emit_json, json_option


@click.command("list-variables")
@checkpoint_argument()
@json_option()
@click.option("--match", "patterns", multiple=True, metavar="GLOB",
              help="Only names matching this glob (repeatable; any may match).")
@click.option("--regex", metavar="RE", help="Only names in which this regular expression matches (re.search).")
def command(checkpoint: str, as_json: bool, patterns: tuple[str, ...], regex: str | None) -> None:
    """List the variables of CHECKPOINT, as tf.train.list_variables does.

    Without --json: aligned columns NAME DTYPE SHAPE SIZE, one variable a
    line, then a totals line starting with '#'.
    """
    import ckptool

    from ..render import print_variables
    from ...select import compile_filter

    keep = compile_filter(patterns, regex)
    with ckptool.open(checkpoint) as ck:
        variables = [v for v in ck.variables() if keep(v.name)]
    if as_json:
        emit_json([v.to_json() for v in variables])
    else:
        print_variables(variables)
