"""``ckptool list-variables``."""

from __future__ import annotations

import click

from ckptool.cli.common import checkpoint_argument, emit_json, json_option


@click.command("list-variables")
@checkpoint_argument()
@json_option()
@click.option("--match", "patterns", multiple=True, metavar="GLOB",
              help="Only names matching this glob, as fnmatch (repeatable; any may match). A --match or "
                   "--regex that selects no variable is an error naming it (exit 1, as grep).")
@click.option("--regex", metavar="RE", help="Only names in which this regular expression matches (re.search).")
def command(checkpoint: str, as_json: bool, patterns: tuple[str, ...], regex: str | None) -> None:
    """List the variables of CHECKPOINT, sorted by name, as tf.train.list_variables does.

    \b
    Without --json: a header line, then aligned columns NAME DTYPE SHAPE
    SIZE (bytes stored), one variable a line, so grep, awk and cut work
    (`awk 'NR>1 {s+=$4} END {print s}'`). A totals line starting with '#'
    (variables, parameters, bytes) goes to stderr, not stdout; --quiet
    drops it. --json prints an array of {"name", "dtype", "shape",
    "nbytes"} objects ("slices" is added for partitioned variables).
    """
    import ckptool
    from ckptool.cli.render import print_variables
    from ckptool.ops.read.select import compile_filter, filter_words, nothing_selected

    keep = compile_filter(patterns, regex)  # a bad --regex: a usage error before the checkpoint is read
    with ckptool.open(checkpoint) as ck:
        every = ck.variables()
    variables = [v for v in every if keep(v.name)]
    if every and not variables and (patterns or regex):
        raise nothing_selected(checkpoint, len(every), filter_words(patterns, regex), "variable")
    if as_json:
        emit_json([v.to_json() for v in variables])
    else:
        print_variables(variables)
