"""Human output. The only module (with progress.py) that uses rich."""

from __future__ import annotations

import click

from .common import color_enabled, format_shape, human_bytes


def print_variables(variables) -> None:
    """NAME DTYPE SHAPE SIZE columns, padded with spaces (greppable), and a totals line."""
    rows = [(v.name, v.dtype, format_shape(v.shape), str(v.nbytes)) for v in variables]
    header = ("NAME", "DTYPE", "SHAPE", "SIZE")
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(3)]
    color = color_enabled()

    def line(cols, bold=False):
        text = "  ".join(c.ljust(w) for c, w in zip(cols[:3], widths)) + "  " + cols[3]
        return click.style(text, bold=True) if bold and color else text

    click.echo(line(header, bold=True))
    for r in rows:
        click.echo(line(r))
    params = sum(v.numel for v in variables)
    total = sum(v.nbytes for v in variables)
    click.echo(f"# {len(variables)} variables, {params} parameters, {total} bytes ({human_bytes(total)})")
