"""``ckptool convert``."""

from __future__ import annotations

import click

from ckptool.cli.common import checkpoint_argument, emit_json, human_bytes, json_option


@click.command("convert")
@checkpoint_argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option("--to", "to", type=click.Choice(["tf", "npz", "safetensors"]),
              help="Target format; default from DST's suffix (.npz, .safetensors, else a TF V2 prefix).")
@click.option("--match", multiple=True, metavar="GLOB", help="Convert only names matching GLOB. Repeatable.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out names matching GLOB. Repeatable.")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="TF target: spread the data over N data files.")
@click.option("--keep-slices", is_flag=True,
              help="V2 -> V2: keep partitioned variables as slices (default: merge into full tensors).")
@click.option("--skip-unsupported", is_flag=True,
              help="Leave out tensors the target cannot hold losslessly (strings in .safetensors, "
                   "bfloat16/float8 in .npz, quantized, variant) instead of refusing.")
@click.option("--force", is_flag=True, help="Replace an existing DST.")
@json_option("Print what was written (dst, format, tensors, bytes, files, skipped) as JSON.")
def command(src: str, dst: str, to: str | None, match: tuple[str, ...], exclude: tuple[str, ...], shards: int,
            keep_slices: bool, skip_unsupported: bool, force: bool, as_json: bool) -> None:
    """Convert SRC (a checkpoint, .npz or .safetensors) to DST.

    Names are kept exactly and values bit for bit: a tensor the target cannot
    hold losslessly is refused (naming it) unless --skip-unsupported. .npz
    holds numpy dtypes and byte strings; .safetensors holds numeric types
    including BF16, F8_E4M3, F8_E5M2. V2 -> V2 copies stored bytes without
    decoding. Output goes to temporary names renamed into place (data first,
    index last); memory stays bounded by the largest tensor.
    """
    from ckptool.ops.convert import convert
    from ckptool.cli.progress import progress_bar

    with progress_bar(f"convert {dst}") as bar:
        result = convert(src, dst, to=to, match=match, exclude=exclude, num_shards=shards,
                         keep_slices=keep_slices, force=force, skip_unsupported=skip_unsupported,
                         progress=bar)
    if as_json:
        emit_json(result.to_json())
        return
    click.echo(f"converted {src} -> {result.dst} ({result.format}): {result.tensors} tensors, "
               f"{human_bytes(result.nbytes)} in {len(result.files)} files")
    for name in result.skipped:
        click.echo(f"skipped {name}")
