"""The ``--keep-best`` flags of ``prune`` and how its output shows them (ckptool.ops.retain.keep_best)."""

from __future__ import annotations

import os

import click

from ckptool.cli.common import note

FLAGS = ("keep_best", "metric", "mode", "metrics_path")


def best_options(f):
    """Add ``--keep-best N --metric TAG --mode min|max --metrics PATH`` to a command."""
    options = [
        click.option("--keep-best", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Also keep the N checkpoints that score best by --metric at their step (ties: the "
                          "newer). A checkpoint with no value at its step is no candidate."),
        click.option("--metric", default=None, metavar="TAG",
                     help="With --keep-best: the scalar to rank by, from the event files "
                          "(events.out.tfevents.*) anywhere below DIR, TF1 simple_value or TF2 tf.summary.scalar. "
                          "TAG is the tag prefixed by the event file's subdirectory (tag 'loss' in DIR/eval/ is "
                          "eval/loss); a unique '.../TAG' suffix also matches."),
        click.option("--mode", type=click.Choice(["min", "max"]), default=None,
                     help="With --keep-best: min (the lowest is best; the default) or max."),
        click.option("--metrics", "metrics_path", default=None, metavar="PATH",
                     help='With --keep-best: read the metric from PATH instead: JSON Lines of {"step": N, '
                          '"TAG": value}, a TensorBoard log directory, or one event file.'),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def best_spec(keep_best=None, metric=None, mode=None, metrics_path=None):
    """The BestSpec of the flags (None without --keep-best); --metrics made absolute, so that
    a .ckptool.toml's relative ``metrics`` (taken relative to each run) does not apply to it."""
    if keep_best is None:
        for flag, value in (("--metric", metric), ("--mode", mode), ("--metrics", metrics_path)):
            if value is not None:
                raise click.UsageError(f"{flag} needs --keep-best N")
        return None
    if not metric:
        raise click.UsageError("--keep-best needs --metric TAG")
    from ckptool.ops.retain.keep_best import BestSpec

    if metrics_path is not None and "://" not in metrics_path:
        metrics_path = os.path.abspath(metrics_path)
    return BestSpec(keep_best, metric, mode or "min", metrics_path)


def reason(result, path: str) -> str:
    """The reasons column of prune's table; "best" with the metric and value."""
    why = list(result.reasons.get(path, []))
    best = getattr(result, "best", None)
    if best and "best" in why:
        values = {b["checkpoint"]: b["value"] for b in best["best"]}
        base = path.rstrip("/").rsplit("/", 1)[-1]
        if base in values:
            v = values[base]
            shown = f"{v:.6g}" if isinstance(v, float) else str(v)
            why = [f"best ({best['series']}={shown})" if r == "best" else r for r in why]
    return ", ".join(why)


def note_without_value(result) -> None:
    """How many checkpoints had no value (they were no candidates)."""
    best = getattr(result, "best", None)
    if best and best["without_value"]:
        note(f"{best['without_value']} of {best['candidates']} checkpoints have no {best['series']} value at "
             f"their step; not candidates for --keep-best")


__all__ = ["FLAGS", "best_options", "best_spec", "note_without_value", "reason"]
