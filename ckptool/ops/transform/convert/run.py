"""Convert between TF checkpoints (V1, V2), ``.npz`` and ``.safetensors``.

Streaming: one tensor in memory at a time. V2 -> V2 copies stored bytes
without decoding (CRC kept). ``.npz`` members are written one by one through
zipfile; ``.safetensors`` is written header first (dtypes and shapes are
known from the source's index or header), then each tensor's bytes.

Lossless rules: ``.safetensors`` holds the numeric types it has a dtype for
(BF16, F8_E4M3, F8_E5M2 included); string tensors and the object graph go in
its ``__metadata__`` (``ckptool.format.safetensors_meta``), so converting
back restores the checkpoint exactly. ``.npz`` holds numpy's own dtypes and
byte strings; bfloat16 / float8 have no portable ``.npy`` descr, so they are
refused for ``.npz``. A tensor the target cannot hold is refused naming it,
unless ``skip_unsupported`` (or ``exclude``, or a cast) takes care of it.
Casts (``casts={"float32": "bfloat16"}``) round to nearest even; finite
values overflowing to inf are refused unless ``allow_overflow``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UnsupportedError, UsageError
from ckptool.format import dtypes
from ckptool.format.cast import Overflows, target_dtype
from ckptool.io.safety.destination import check_destination, checkpoint_identity
from ckptool.ops.transform.convert.formats import FORMATS, HF, NPZ, SAFETENSORS, TF, ConvertResult, target_format
from ckptool.ops.transform.convert.to_npz import to_npz
from ckptool.ops.transform.convert.to_tf import to_tf

if TYPE_CHECKING:
    from ckptool.ops.read.source import Opened, Spec


def convert(src: str, dst: str, *, to: str | None = None, match: Sequence[str] = (), exclude: Sequence[str] = (),
            num_shards: int = 1,
            keep_slices: bool = False, force: bool = False, skip_unsupported: bool = False,
            casts: dict[str, Any] | None = None, allow_overflow: bool = False, names: str = "full",
            progress: Any = None, sync: bool = True, jobs: int | None = None, ema: bool = False,
            strip_optimizer: bool = False, template_config: str | None = None) -> ConvertResult:
    """Convert ``src`` to ``dst`` (format from ``to`` or the suffix); see the module doc.

    ``names="short"`` (``.safetensors`` only) stores PyTorch-style names: object
    keys without ``/.ATTRIBUTES/VARIABLE_VALUE``, no optimizer state; the
    mapping stays in the metadata, so converting back restores the checkpoint's names.
    ``jobs``: ranged GETs in flight when ``src`` is on an object store (default 8; no effect on
    local files). ``ema``: each variable written with its moving average's value
    (:mod:`ckptool.ops.transform.convert.averaged`); ``strip_optimizer``: the optimizer's state (and the
    averages) left out; ``template_config``: with ``ema``, the JSON file holding a Keras 3 source's
    model config (``model.to_json()``), which says what a ``.weights.h5`` does not (the layer order,
    whether the optimizer keeps averages).
    """
    from ckptool.ops.read.prefetch import prefetch
    from ckptool.ops.read.select import select
    from ckptool.ops.read.source import open_specs
    from ckptool.ops.transform.convert.keras.bridge import keras_target, no_template_message

    if keras_target(dst) is not None and to is None:
        raise UsageError(no_template_message(src, dst))
    if to == HF:  # its own options (arch, config, vocab, ...): ckptool.convert(..., to="hf") goes there
        raise UsageError("to='hf' is convert_hf (ckptool.ops.transform.hf.export), not convert")
    keras_config = _template_config(src, template_config, ema or strip_optimizer)
    opened = open_specs(src, keep_slices)
    source: dict[str, str] = {}
    ema_report = None
    try:
        if ema or strip_optimizer:  # a view of the source: the writers below see the averages' values
            from ckptool.ops.transform.convert.averaged import ema_source

            opened, ema_report = ema_source(opened, ema=ema, strip_optimizer=strip_optimizer, where=src,
                                            keras_config=keras_config)
            source = ema_report.source if ema_report is not None else {}
        from ckptool.ops.read.keras import KerasCheckpoint

        ck = opened.checkpoint
        ids = list(ck.files) if isinstance(ck, KerasCheckpoint) else \
            checkpoint_identity(ck) if ck is not None else [src]
        _check_not_source(dst, ids)
        fmt = target_format(dst, to)
        if fmt not in FORMATS:
            raise UsageError(f"unknown target format {fmt!r} (tf, npz or safetensors)")
        if names not in ("full", "short"):
            raise UsageError(f"--names is full or short, not {names!r}")
        if names == "short" and fmt != SAFETENSORS:
            raise UsageError("--names short is for .safetensors output")
        casts = dict(casts or {})
        if keep_slices and (fmt != TF or opened.checkpoint is None or not any(s.raw for s in opened.specs)):
            raise CkptError("--keep-slices is for V2 -> V2 conversion only")
        # a --match/--exclude that leaves nothing is an error (ops.read.select), before anything is written
        specs = opened.specs
        if match or exclude:
            kept = set(select([s.name for s in specs], src, tuple(match), None, tuple(exclude), writes=True))
            specs = [s for s in specs if s.name in kept]
        result = ConvertResult(dst, fmt)
        result.ema = ema_report.to_json() if ema_report is not None else None
        over = Overflows(allow_overflow)
        # the read order, fetched ahead from an object store (.safetensors reads strings first)
        order = sorted(specs, key=lambda s: s.dtype != "string") if fmt == SAFETENSORS else specs
        with prefetch(opened.checkpoint, [source.get(s.name, s.name) for s in order if s.stored is None], jobs):
            _write(dst, fmt, specs, result, num_shards, (force, ids), progress, casts, over, sync,
                   skip_unsupported, names, opened)
        return result
    finally:
        opened.close()


def _template_config(src: str, path: str | None, ema: bool) -> Any:
    """The model config ``--template-config`` gives a Keras 3 source (None when not given)."""
    if path is None:
        return None
    from ckptool.ops.read.keras import is_keras_path, read_model_config

    if not is_keras_path(src):
        raise UsageError(f"--template-config describes a Keras 3 model: {src} is not a Keras 3 file (.weights.h5, "
                         ".keras, .weights.json), and a TF --template goes with the Keras 3 bridge")
    if not ema:
        raise UsageError("--template-config goes with --ema (which of a Keras 3 source's optimizer variables are "
                         "moving averages) or --template (the Keras 3 bridge)")
    return read_model_config(path)


def _write(dst: str, fmt: str, specs: list[Spec], result: ConvertResult, num_shards: int,
           force: tuple[bool, Sequence[str]], progress: Callable[[int, int], None] | None, casts: dict[str, str],
           over: Overflows, sync: bool, skip: bool, names: str, opened: Opened) -> None:
    if fmt == TF:
        to_tf(dst, specs, result, num_shards, force, progress, casts, over, sync)
    elif fmt == NPZ:
        to_npz(dst, _supported(specs, NPZ, casts, skip, result, dst), result, force, skip, progress, casts,
                over, sync)
    else:
        from ckptool.ops.transform.convert.to_safetensors import to_safetensors

        kept = _supported(specs, SAFETENSORS, casts, skip, result, dst)
        to_safetensors(dst, kept, result, force, progress, casts, over, names, opened, sync)


def _supported(specs: list[Spec], fmt: str, casts: dict[str, str], skip: bool, result: ConvertResult,
               dst: str) -> list[Spec]:
    """Refuse (or skip) dtypes the target has no type for, before any data is read."""
    from ckptool.format.safetensors_meta import TF_TO_ST

    out = []
    target = ".npz" if fmt == NPZ else ".safetensors"
    for s in specs:
        dt = target_dtype(casts, s.dtype)
        if fmt == NPZ:
            ok = dt == "string" or (dt in dtypes.BY_NAME and dtypes.BY_NAME[dt].npy_portable)
        else:
            ok = dt in TF_TO_ST or dt == "string"
        if ok:
            out.append(s)
            continue
        if skip:
            result.skipped.append(s.name)
            continue
        hint = " (use .safetensors or a TF checkpoint)" if fmt == NPZ and dt in TF_TO_ST else ""
        raise UnsupportedError(f"{dst}: tensor {s.name!r} has dtype {dt}, which {target} cannot hold{hint}; "
                               "--exclude it, --cast it, or --skip-unsupported leaves out all such")
    return out


def _check_not_source(dst: str, ids: Sequence[str]) -> None:
    """DST names the source itself (in any form): refused before anything else, even with --force."""
    from ckptool.io.backends.urls import storage_for

    storage, path = storage_for(dst)
    check_destination(storage, [path, path + ".index"], force=True, sources=ids, label=dst)


__all__ = ["convert"]
