"""``ckptool convert``."""

from __future__ import annotations

from typing import Any

import click

from ckptool.cli.common import (
    REMOTE_READS,
    checkpoint_argument,
    emit_json,
    human_bytes,
    json_option,
    no_sync_option,
    note,
    plural,
    stream_jobs_option,
    warn,
)


@click.command("convert", epilog=REMOTE_READS)
@checkpoint_argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option("--to", "to", type=click.Choice(["tf", "npz", "safetensors", "hf"]),
              help="Target format; default from DST's suffix (.npz, .safetensors, else a TF V2 prefix). "
                   "A suffix ckptool does not write (.pt, .bin, .h5, ...) is refused without --to, and so is one a "
                   "letter off a written one (out.safetensor: did you mean .safetensors?). "
                   "hf: DST is a Hugging Face folder that transformers' from_pretrained loads.")
@click.option("--arch", metavar="A", help="--to hf: the architecture (default: detected from the variable names; "
                                         "an unknown one lists the known ones).")
@click.option("--config", "hf_config", metavar="CFG",
              help="--to hf: the model's config: the release's own (bert_config.json, hparams.json, "
                   "operative_config.gin, ...) or an HF config.json, or their directory; checked against the "
                   "tensors' shapes. Default: the release's config beside SRC, when the tensors do not tell all.")
@click.option("--vocab", metavar="V", help="--to hf: the release's vocabulary (vocab.txt, a SentencePiece .model, "
                                          "GPT-2's encoder.json), written as tokenizer files.")
@click.option("--max-shard-size", metavar="S",
              help="--to hf: shard model.safetensors past S (default 5GB; 500MB, 2GiB, bytes).")
@click.option("--match", multiple=True, metavar="GLOB",
              help="Convert only names matching GLOB. Repeatable. --match and --exclude leaving no tensor "
                   "is an error naming them (exit 1, nothing written).")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Leave out names matching GLOB. Repeatable.")
@click.option("--cast", "casts", multiple=True, metavar="FROM=TO",
              help="Cast every tensor of dtype FROM to TO (float16, bfloat16, float32, float64), "
                   "rounding to nearest even. Repeatable.")
@click.option("--allow-overflow", is_flag=True,
              help="With --cast: write finite values that overflow the target as inf (default: refuse).")
@click.option("--names", "names", type=click.Choice(["full", "short"]), default="full", show_default=True,
              help=".safetensors: 'short' stores PyTorch-style names (no /.ATTRIBUTES/VARIABLE_VALUE, no "
                   "optimizer state), the mapping kept in the metadata for the way back.")
@click.option("--shards", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="TF target: spread the data over N data files.")
@click.option("--keep-slices", is_flag=True,
              help="V2 -> V2: keep partitioned variables as slices (default: merge into full tensors).")
@click.option("--skip-unsupported", is_flag=True,
              help="Leave out tensors the target cannot hold losslessly (bfloat16/float8 in .npz; "
                   "int4, quantized, variant, complex128 in .safetensors) instead of refusing.")
@click.option("--template", metavar="TEMPLATE",
              help="Keras 3 bridge: TF checkpoint -> DST.weights.h5 / DST.keras shaped like TEMPLATE (what the "
                   "Keras 3 model saved), or Keras 3 SRC -> TF checkpoint DST shaped like TEMPLATE (the old "
                   "tf.keras checkpoint). Variables are placed by structure. Without it, a Functional or Sequential "
                   "tf_keras SavedModel converts to DST.weights.h5 from its keras_metadata.pb, or to DST.keras: the "
                   "whole model (its config translated to Keras 3's), which keras.saving.load_model loads on any "
                   "backend without the model's code.")
@click.option("--template-config", metavar="JSON",
              help="With a Keras 3 .weights.h5 template or SRC: the Keras 3 model's config as model.to_json() "
                   "writes it, which records the layer order and the optimizer a .weights.h5 does not (a .keras "
                   "file carries its own); `convert X.weights.h5 out.safetensors --ema --template-config M.json`. "
                   "Without --template, with a .keras DST: the tf_keras model's model.to_json(), for a TF-format "
                   "checkpoint (a SavedModel carries its own).")
@click.option("--with-optimizer", is_flag=True,
              help="A .keras DST without --template: also the compile config (optimizer, loss, metrics) and the "
                   "optimizer's state, so that training resumes (default: the model and its weights alone).")
@click.option("--skip-optimizer", is_flag=True,
              help="With --template: carry the weights alone; the output has no optimizer state of the source's, "
                   "and Keras starts the optimizer fresh (default: refuse when the target cannot hold the source's "
                   "optimizer state exactly).")
@click.option("--dry-run", is_flag=True, help="With --template or --to hf: print the mapping (SRC name -> DST "
                                              "name, shape), write nothing.")
@click.option("--allow-missing", is_flag=True,
              help="With --template: keep the template's value for entries SRC cannot fill (default: refuse).")
@click.option("--allow-unused", is_flag=True,
              help="With --template or --to hf: leave out SRC variables the template (the architecture) has no "
                   "place for (default: refuse; optimizer state is always left out with --to hf).")
@click.option("--ema", is_flag=True,
              help="Write each variable with its exponential moving average's value, under the variable's own "
                   "name: TF1 VAR/ExponentialMovingAverage, or a tf_keras / Keras 3 optimizer with use_ema=True "
                   "(its averages by position, checked by shape). Variables without one keep their value (counted); "
                   "no averages at all is an error.")
@click.option("--strip-optimizer", is_flag=True,
              help="Leave out the optimizer's state and the moving averages (the object graph edited to match).")
@click.option("--force", is_flag=True, help="Replace an existing DST.")
@stream_jobs_option()
@no_sync_option()
@json_option("Print what was written (dst, format, tensors, bytes, files, skipped; cast, overflow) as JSON.")
def command(src: str, dst: str, to: str | None, arch: str | None, hf_config: str | None, vocab: str | None,
            max_shard_size: str | None, match: tuple[str, ...], exclude: tuple[str, ...],
            casts: tuple[str, ...], allow_overflow: bool, names: str, shards: int, keep_slices: bool,
            skip_unsupported: bool, template: str | None, template_config: str | None, with_optimizer: bool,
            skip_optimizer: bool,
            dry_run: bool, allow_missing: bool, allow_unused: bool, ema: bool, strip_optimizer: bool, force: bool,
            jobs: int | None, no_sync: bool, as_json: bool) -> None:
    """Convert SRC (a checkpoint, .npz or .safetensors) to DST.

    \b
    Names are kept exactly and values bit for bit: a tensor the target cannot
    hold losslessly is refused (naming it) unless --skip-unsupported.
    .safetensors holds numeric types including BF16, F8_E4M3, F8_E5M2; string
    tensors and the object graph go in its __metadata__ (base64), so
    `convert model.safetensors back/ckpt-1` restores the checkpoint exactly.
    .npz holds numpy dtypes and byte strings. V2 -> V2 copies stored bytes
    without decoding. Output goes to temporary names renamed into place.
    Memory: the largest tensor (one is read at a time; for .safetensors,
    also the string tensors and object graph its header holds), plus under
    1 KB a tensor for the index and the names (60 MB for 100,000 tensors).

    \b
    Keras 3: `convert ckpt new.weights.h5 --template NEW.weights.h5` (or
    .keras) fills what the Keras 3 model saved with a tf.keras checkpoint's
    weights and optimizer state; `convert new.weights.h5 back/ckpt
    --template OLD_CKPT` goes back to a checkpoint tf.keras load_weights reads.

    \b
    Hugging Face: `convert bert_model.ckpt out/ --to hf --config
    bert_config.json --vocab vocab.txt` writes a folder transformers 5 loads
    (BERT and its heads, the TF2 Model Garden encoder, ALBERT, ELECTRA, T5,
    mT5, GPT-2, GPT-Neo, MobileNetV1), each weight as transformers 4.57's TF
    loader placed it; --dry-run prints the mapping.

    \b
    Examples:
      ckptool convert runs/ model.safetensors
      ckptool convert model.safetensors back/ckpt-1
      ckptool convert runs/ckpt-9 half/ckpt-9 --cast float32=bfloat16
    """
    from ckptool.ops.transform.convert.keras.bridge import is_bridge

    hf = {"arch": arch, "config": hf_config, "vocab": vocab, "max_shard_size": max_shard_size}
    if to == "hf" and template is None:
        from ckptool.cli.hf import export

        _refuse_given((("--match", match), ("--exclude", exclude), ("--cast", casts),
                       ("--allow-overflow", allow_overflow), ("--names", names != "full"), ("--shards", shards != 1),
                       ("--keep-slices", keep_slices), ("--skip-unsupported", skip_unsupported),
                       ("--allow-missing", allow_missing), ("--strip-optimizer", strip_optimizer),
                       ("--template-config", template_config), ("--skip-optimizer", skip_optimizer),
                       ("--with-optimizer", with_optimizer)), "--to hf")
        export(src, dst, hf, dry_run, allow_unused, force, jobs, not no_sync, as_json, ema=ema)
        return
    if any(hf.values()):
        raise click.UsageError("--arch, --config, --vocab and --max-shard-size go with --to hf")
    if to is None:
        _refuse_suffix_typo(dst)
    if is_bridge(dst, template, to):
        _refuse_given((("--to", to), ("--match", match), ("--exclude", exclude), ("--cast", casts),
                       ("--allow-overflow", allow_overflow), ("--names", names != "full"), ("--shards", shards != 1),
                       ("--keep-slices", keep_slices), ("--skip-unsupported", skip_unsupported)),
                      "a Keras 3 conversion (--template, or a .weights.h5/.keras DST): the template decides what is "
                      "written")
        _bridge(src, dst, template, dry_run, allow_missing, allow_unused, force, no_sync, as_json,
                keras_options={"template_config": template_config, "skip_optimizer": skip_optimizer, "ema": ema,
                               "strip_optimizer": strip_optimizer, "with_optimizer": with_optimizer})
        return
    if dry_run or allow_missing or allow_unused or skip_optimizer or with_optimizer:
        raise click.UsageError("--dry-run, --allow-missing, --allow-unused, --skip-optimizer and --with-optimizer go "
                               "with --template or a Keras 3 DST")
    _convert(src, dst, casts, as_json, to=to, match=match, exclude=exclude, num_shards=shards, keep_slices=keep_slices,
             force=force, skip_unsupported=skip_unsupported, allow_overflow=allow_overflow, names=names,
             sync=not no_sync, jobs=jobs, ema=ema, strip_optimizer=strip_optimizer, template_config=template_config)


def _refuse_given(flags: tuple[tuple[str, Any], ...], goes_with: str) -> None:
    """The first of ``flags`` given (a flag and whether it is) is a usage error: it does not go with
    ``goes_with``."""
    given = [flag for flag, on in flags if on]
    if given:
        raise click.UsageError(f"{given[0]} does not go with {goes_with}")


def _convert(src: str, dst: str, casts: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """A conversion to a TF checkpoint, .npz or .safetensors, with a progress bar; then what was written."""
    from ckptool.cli.progress import progress_bar
    from ckptool.format.cast import parse_casts
    from ckptool.ops.transform.convert.run import convert

    # a bad --cast spec, a DST suffix ckptool does not write, --names short elsewhere: the library
    # raises UsageError, which main() reports in one line with exit status 2
    cast_map = parse_casts(casts)
    with progress_bar(f"convert {dst}") as bar:
        result = convert(src, dst, casts=cast_map, progress=bar, **options)
    if as_json:
        emit_json(result.to_json())
        return
    for name in result.skipped:
        note(f"skipped {name}")
    for name, n in result.overflow.items():
        warn(f"{name}: {plural(n, 'value')} overflowed to inf in the cast")
    if result.ema is not None:
        _ema_note(result.ema)
    cast = f", {len(result.cast)} cast" if result.cast else ""
    note(f"converted {src} -> {result.dst} ({result.format}): {plural(result.tensors, 'tensor')}{cast}, "
         f"{human_bytes(result.nbytes)} in {plural(len(result.files), 'file')}")


def _ema_note(e: dict[str, Any]) -> None:
    without = f"; {plural(e['without_average'], 'variable')} without one kept as they were" \
        if e["without_average"] else ""
    note(f"--ema ({e['kind']}): {plural(e['averaged'], 'variable')} written with their moving averages{without}")


def _refuse_suffix_typo(dst: str) -> None:
    """``out.safetensor`` is refused, not written as the TF prefix it would be (ops/transform/convert/dst_suffix)."""
    from ckptool.errors import UsageError
    from ckptool.ops.transform.convert.dst_suffix import suffix_typo

    typo = suffix_typo(dst)
    if typo:
        raise UsageError(f"{dst}: did you mean {typo[1]}? ({typo[0]} is not a format ckptool writes; --to tf "
                         f"writes a TF checkpoint of this name)")


def _bridge(src: str, dst: str, template: str | None, dry_run: bool, allow_missing: bool, allow_unused: bool,
            force: bool, no_sync: bool, as_json: bool, keras_options: dict[str, Any]) -> None:
    from ckptool.ops.read.keras_legacy import is_legacy_path
    from ckptool.ops.transform.convert.keras.bridge import convert_keras

    result = convert_keras(src, dst, template, dry_run=dry_run, allow_missing=allow_missing,
                           allow_unused=allow_unused, force=force, sync=not no_sync, **keras_options)
    if as_json:
        emit_json(result.to_json())
        return
    m = result.mapping
    if dry_run:
        back = result.format == "tf"  # Keras 3 -> TF: the Keras names are the source's
        reads = result.ema.source if result.ema is not None else {}  # --ema: the average each weight reads
        rows = [((k, t) if back else (t, k), m.shapes.get(k), f"(its average {reads[k if back else t]})"
                 if (k if back else t) in reads else "") for t, k in m.pairs]
        rows += [((t, k), m.shapes.get(k), "(added)") for t, k in m.added]
        gone = "(kept from the template)" if back else "(not carried: Keras keeps no such state)"
        other = ([(n, "(kept from the template)") for n in result.kept] if back else
                 [("(kept from the template)", n) for n in result.kept])
        other += [(n, "(left out)") for n in result.unused]
        other += [(n, "(not carried: only one side has optimizer state)") for n in m.not_carried]
        other += [(n, gone) for n in m.ignored]
        other += [(n, "(written as zeros: a fresh optimizer's slots)") for n in m.zeros]
        other += [(n, "(left out: tf.keras starts the optimizer fresh)") for n in m.drop_tf]
        width = max([len(a) for (a, _), _, _ in rows] + [len(a) for a, _ in other], default=0)
        for (a, b), shape, tag in rows:
            click.echo(f"{a:<{width}}  ->  {b}  {shape if shape is not None else ''}  {tag}".rstrip())
        for a, b in other:
            click.echo(f"{a:<{width}}  ->  {b}")
        for line in m.notes:
            note(f"structure differs: {line}")
        note(f"dry run: {len(m.pairs) + len(m.added)} tensors would be written to {dst}; nothing written")
        return
    for line in m.notes:
        note(line)
    if result.ema is not None:
        _ema_note(result.ema.to_json())
    kept = f", {len(result.kept)} kept from the template" if result.kept else ""
    shaped = f"shaped like {template}" if template else "layout from its model_config" if is_legacy_path(src) \
        else "layout from keras_metadata.pb"
    note(f"converted {src} -> {dst} ({result.format}, {shaped}): {plural(result.filled, 'tensor')}{kept}")
    for hint in result.hints:
        note(f"hint: {hint}")
