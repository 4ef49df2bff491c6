"""``ckptool inspect``."""

from __future__ import annotations

import click

from ckptool.cli.common import checkpoint_argument, emit_json, emit_json_rows, jobs_option, json_option
from ckptool.cli.completion import complete_tensor


@click.command("inspect")
@checkpoint_argument()
@json_option("Print one JSON document on stdout instead of text (see the JSON section).")
@click.option("--tensor", "tensors", multiple=True, metavar="NAME", shell_complete=complete_tensor,
              help="Print the value of tensor NAME (repeatable). With --stats: only these tensors.")
@click.option("--all-tensors", is_flag=True, help="Print the value of every tensor (with --stats: all).")
@click.option("--full", is_flag=True, help="Print values in full (default: numpy's summary with '...' "
                                           "for more than 1000 elements).")
@click.option("--stats", is_flag=True,
              help="Per tensor: min, max, mean, std (over finite elements), NaN, Inf and zero counts, "
                   "read in chunks. Memory: an 8 MiB chunk, plus under 1 KB a tensor for the index "
                   "(with --json, each row is written as it is done).")
@click.option("--verify", is_flag=True,
              help="Read every byte and check every checksum; exit 1 naming each corrupt tensor.")
@jobs_option()
@click.option("--tree", is_flag=True,
              help="Draw the object graph (or the name scopes) with parameters and bytes per subtree; "
                   "slot variables under their variables.")
@click.option("--depth", type=click.IntRange(min=0), metavar="N", help="With --tree: show N levels.")
def command(checkpoint: str, as_json: bool, tensors: tuple[str, ...], all_tensors: bool, full: bool,
            stats: bool, verify: bool, jobs: int | None, tree: bool, depth: int | None) -> None:
    """Summarize CHECKPOINT, print tensor values or statistics, verify it, or draw its tree.

    \b
    Without options: the summary (format, prefix, index and shards with
    sizes, variable count, parameters, bytes, dtypes, object- or name-based,
    the bundle version, the TensorFlow version from a .meta file) and, when
    CHECKPOINT is a directory with a 'checkpoint' state file, each of its
    checkpoints with step, time (UTC), size and status: latest, kept
    (listed in the state), preserved (dropped from the state by
    keep_checkpoint_every_n_hours), untracked, missing, or in kept/ (in
    DIR/kept/, where prune keeps what a running trainer must not delete: part
    of the run). A data file missing or shorter than the index says is
    warned about on stderr (verify reads every byte).

    \b
    The object graph (_CHECKPOINTABLE_OBJECT_GRAPH, a serialized proto) is
    not printed as bytes: --tensor draws it as --tree does, --all-tensors
    names it and points there; --json gives its exact value.

    \b
    JSON: the summary is an object; --tensor NAME given once gives
    {"name", "dtype", "shape", "value"}, more names or --all-tensors an
    array of those. Values are nested lists; floats in the shortest form
    that reads back to the same value of their dtype (bfloat16 and float8
    too), NaN and infinities as the strings "NaN", "Infinity",
    "-Infinity"; complex numbers as {"real", "imag"}; strings as text when
    valid UTF-8, else {"base64": "..."}. --stats gives an array of
    {"name", "dtype", "shape", "count", "min", "max", "mean", "std",
    "nan", "inf", "zeros"}; --verify {"prefix", "ok", "tensors", "bytes",
    "errors": [{"name", "error"}]} (a missing data shard: one error, name "",
    with the "tensors" stored there); --tree nested nodes {"name", "path",
    "parameters", "bytes", "tensor", "attributes", "slots", "children"}.
    """
    import ckptool
    from ckptool.cli import render

    _check_modes(tensors, all_tensors, full, stats, verify, jobs, tree, depth)
    from ckptool.ops.inspect.series_view import series_target

    with ckptool.open(series_target(checkpoint) or checkpoint) as ck:  # a Keras series: its latest
        if verify:
            _verify(ck, jobs, as_json)
            return
        from ckptool.ops.inspect.summary import summary
        from ckptool.ops.inspect.tree import tree as object_tree

        if tree:
            root = object_tree(ck)
            if as_json:
                emit_json(root.to_json())
            else:
                render.print_tree(root, depth, _title(ck.prefix))
            return
        names = list(tensors) if tensors else [v.name for v in ck.variables()]
        for n in tensors:
            ck.variable(n)  # unknown names fail before any output, with a suggestion
        if stats:
            _stats(ck, names, jobs, as_json)
        elif tensors or all_tensors:
            _values(ck, names, bool(tensors), len(tensors) == 1, full, as_json)
        else:
            doc = summary(ck, checkpoint)
            if as_json:
                emit_json(doc)
            else:
                render.print_summary(doc)


def _check_modes(tensors, all_tensors, full, stats, verify, jobs, tree, depth) -> None:
    """One mode at a time (--verify, --tree, --stats, --tensor/--all-tensors), each option with its mode."""
    modes = [m for m, on in (("--verify", verify), ("--tree", tree)) if on]
    if stats:
        modes.append("--stats")
    elif tensors or all_tensors:
        modes.append("--tensor" if tensors else "--all-tensors")
    if len(modes) > 1:
        raise click.UsageError(f"{modes[0]} and {modes[1]} cannot be combined")
    if depth is not None and not tree:
        raise click.UsageError("--depth goes with --tree")
    if jobs is not None and not (verify or stats):
        raise click.UsageError("--jobs goes with --verify or --stats")
    if tensors and all_tensors:
        raise click.UsageError("--tensor and --all-tensors cannot be combined")
    if full and (not (tensors or all_tensors) or stats):
        raise click.UsageError("--full goes with --tensor or --all-tensors")


def _verify(ck, jobs, as_json) -> None:
    """--verify: every CRC read and checked; Failed naming what is missing or corrupt."""
    from ckptool.cli import render
    from ckptool.cli.main import Failed
    from ckptool.cli.progress import progress_bar
    from ckptool.ops.inspect.verify import verify as verify_checkpoint  # needs no numpy

    with progress_bar("verifying") as bar:
        report = verify_checkpoint(ck, progress=bar, workers=jobs)
    if as_json:
        emit_json(report.to_json())
    else:
        render.print_verify(report)
    if not report.ok:
        bad = [f"{len(names)} of {report.tensors} tensors {word}"
               for word, names in (("missing", report.lost()), ("corrupt", report.corrupt())) if names]
        raise Failed(f"{ck.prefix}: verification failed: {', '.join(bad) or 'damaged'}")


def _stats(ck, names, jobs, as_json) -> None:
    """--stats: each tensor's row written (or kept) as it is done."""
    from ckptool.cli import render
    from ckptool.cli.progress import increments, progress_bar
    from ckptool.ops.inspect.stats import iter_tensors_stats

    with progress_bar("statistics") as bar:
        add = increments(bar, sum(v.nbytes for v in map(ck.variable, names) if v.dtype not in ("string", "variant")))
        rows = iter_tensors_stats(ck, names, jobs=jobs, on_bytes=add)
        if as_json:
            emit_json_rows(rows, names)
        else:
            render.print_stats(rows)


def _values(ck, names, named, one, full, as_json) -> None:
    """--tensor (``named``; ``one``: given once) or --all-tensors: the values of ``names``."""
    from ckptool.cli import render
    from ckptool.format.objgraph import OBJECT_GRAPH_KEY
    from ckptool.ops.inspect.tree import tree
    from ckptool.ops.inspect.values import tensor_json

    if as_json:
        docs = [tensor_json(ck, n) for n in names]
        emit_json(docs[0] if one else docs)
        return
    for i, n in enumerate(names):
        v = ck.variable(n)
        if i:
            click.echo("")
        if n == OBJECT_GRAPH_KEY:  # serialized bytes: drawn as --tree draws it
            render.print_object_graph_value(v.name, v.dtype, v.shape, v.nbytes,
                                            tree(ck) if named else None, _title(ck.prefix))
            continue
        render.print_tensor(v.name, v.dtype, v.shape, ck.read(n), full)

def _title(prefix: str) -> str:
    return prefix.rstrip("/").rsplit("/", 1)[-1] or prefix
