"""The operations of the CLI as Python functions that return result objects (dataclasses with
``.to_json()``, the document ``--json`` prints); nothing is printed. Each is a thin wrapper over
the function in ``ckptool.ops`` that the command calls: keyword arguments not named here pass
through to it, and every error raised is a :class:`ckptool.CkptError`.

Reach them as ``ckptool.verify``, ``ckptool.prune``, ``ckptool.convert``,
``ckptool.rewrite_names``, ``ckptool.average`` and ``ckptool.save``. The examples run (as a
test, in this order) in a directory holding ``runs/``, a copy of the bundled
``examples/keras_adam`` (ckpt-3, ckpt-4, ckpt-5 and a state file), and ``keras/``: a tf.keras
checkpoint ``keras/tf/ckpt`` and ``keras/template.weights.h5``, what the same model saves
under Keras 3 (tests/data/keras3/sequential).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptool.ops.inspect.verify import VerifyReport
    from ckptool.ops.retain.outcome import PruneResult
    from ckptool.ops.transform.average import AverageResult
    from ckptool.ops.transform.convert.formats import ConvertResult
    from ckptool.ops.transform.convert.keras.bridge import KerasResult
    from ckptool.ops.transform.hf.export import HfResult
    from ckptool.ops.transform.rename.assignment import Plan as RenamePlan
    from ckptool.ops.transform.save import SaveResult


def verify(checkpoint: str, **options: Any) -> VerifyReport:
    """Read every stored byte of a checkpoint and check every CRC32C (``ckptool verify``).

    Returns a report: ``.ok``, ``.tensors``, ``.bytes`` and ``.problems`` (each with ``.name``
    and ``.error``); a damaged checkpoint is a report with problems, not an exception.
    ``options``: ``workers``, ``progress(done_bytes, total_bytes)``.

        >>> report = ckptool.verify("runs/ckpt-5")
        >>> report.ok, report.tensors
        (True, 16)
    """
    from ckptool.ops.inspect.verify import verify as verify_checkpoint
    from ckptool.ops.read.reader import open as open_checkpoint

    with open_checkpoint(checkpoint) as ck:
        return verify_checkpoint(ck, **options)


def prune(directory: str, *, dry_run: bool = False, **options: Any) -> PruneResult:
    """Delete the checkpoints of ``directory`` that a retention policy does not keep, as
    ``tf.train.CheckpointManager`` would (``ckptool prune``).

    With ``dry_run=True`` nothing changes and the result is the plan. ``options``:
    ``max_to_keep`` (default 5), ``keep_every_n_hours``, ``keep_steps_every``, ``min_age``
    (seconds), ``keep`` (names never deleted), ``clean_temp``, ``policy_file`` (read
    ``.ckptool.toml``, default True; an option given beats it, it beats the defaults:
    ``.sources`` says which). The result lists ``.kept``, ``.deleted``,
    ``.preserved``, ``.reasons`` and ``.bytes_freed``. ``series="model-{epoch:02d}.keras"``
    prunes a Keras ModelCheckpoint file series of ``directory`` instead (``prune --series``;
    the result also has ``.in_progress`` and ``.damaged``).

        >>> ckptool.prune("runs/", max_to_keep=2, dry_run=True).deleted   # the plan
        ['runs/ckpt-3']
        >>> ckptool.prune("runs/", max_to_keep=2).deleted
        ['runs/ckpt-3']
    """
    from ckptool.ops.retain.prune import prune as prune_directory

    return prune_directory(directory, dry_run=dry_run, **options)


def convert(src: str, dst: str, *, template: str | None = None, allow_missing: bool = False,
            allow_unused: bool = False, template_config: str | None = None, skip_optimizer: bool = False,
            **options: Any) -> ConvertResult | KerasResult | HfResult:
    """Write ``src`` (a checkpoint, ``.safetensors``, ``.npz`` or ``.npy``) as ``dst``: a TF
    prefix, ``.npz`` or ``.safetensors`` by its suffix (``ckptool convert``).

    ``options``: ``to`` (the format, overriding the suffix), ``match``/``exclude`` (globs; a
    filter that selects no tensor is an error), ``num_shards``, ``casts``
    (``{"float32": "bfloat16"}``), ``force`` (overwrite), ``skip_unsupported``,
    ``names="short"`` (PyTorch-style names in ``.safetensors``), ``jobs`` (ranged GETs in
    flight from an object store), ``ema=True`` (each variable written with its exponential
    moving average's value: TF1 ``ExponentialMovingAverage``, tf_keras / Keras 3 ``use_ema``;
    ``.ema`` reports it; a Keras 3 ``.weights.h5`` source with ``template_config``, the JSON file
    of its model's config, ``model.to_json()``), ``strip_optimizer=True`` (the optimizer's state
    and the averages left out).

    ``to="hf"``: a Hugging Face folder ``dst`` that transformers' ``from_pretrained`` loads
    (``convert --to hf``); options ``arch``, ``config``, ``vocab``, ``max_shard_size``,
    ``dry_run``, ``allow_unused``, ``force``, ``ema``; returns an
    :class:`~ckptool.ops.transform.hf.export.HfResult` (``.mapping``, ``.files``, ``.config``).

    The Keras 3 bridge (``convert --template``): with ``template``, a tf.keras checkpoint goes
    to ``dst.weights.h5`` / ``dst.keras`` shaped like ``template`` (what the Keras 3 model
    saved), or a Keras 3 file goes back to a TF checkpoint shaped like ``template`` (the old
    tf.keras checkpoint); variables are placed by structure. ``allow_missing`` keeps the
    template's value where ``src`` fills nothing, ``allow_unused`` leaves out ``src``
    variables the template has no place for (by default both are errors). A ``.weights.h5``
    ``dst`` without ``template`` takes the layout from a SavedModel's ``keras_metadata.pb``; a
    ``.keras`` ``dst`` without it is the whole model, its tf_keras config translated to Keras 3's
    (``with_optimizer=True``: its compile config and optimizer state too).
    ``template_config`` names a JSON file holding the Keras 3 model's config (``model.to_json()``),
    which records the layer order and the optimizer a ``.weights.h5`` does not; where the order
    or the optimizer state cannot be proved to fit, the conversion is refused.
    ``skip_optimizer`` carries the weights alone (Keras starts the optimizer fresh).
    ``ema`` gives each weight its moving average's value there too (a Keras 3 ``.weights.h5``
    source needs ``template_config``); ``strip_optimizer`` there is ``skip_optimizer``.
    The bridge takes ``dry_run``, ``force``, ``sync``, ``ema``, ``strip_optimizer`` and ``with_optimizer`` of the
    options and returns a
    :class:`~ckptool.ops.transform.convert.keras.bridge.KerasResult` (``.filled``, ``.kept``,
    ``.unused``, ``.mapping``; ``.to_json()``); the other options are refused with it.

        >>> ckptool.convert("runs/ckpt-5", "weights.npz").tensors
        16
        >>> ckptool.convert("keras/tf/ckpt", "new.weights.h5",
        ...                 template="keras/template.weights.h5").filled
        14
    """
    from ckptool.errors import UsageError
    from ckptool.ops.transform.convert.keras.bridge import BRIDGE_OPTIONS, convert_keras, is_bridge

    if options.get("to") == "hf" and template is None and not allow_missing:
        from ckptool.ops.transform.hf.export import convert_hf

        del options["to"]
        return convert_hf(src, dst, allow_unused=allow_unused, **options)
    keras_only = {k: v for k, v in (("template_config", template_config), ("skip_optimizer", skip_optimizer)) if v}
    if is_bridge(dst, template, options.get("to")):
        options.update(keras_only)
        other = sorted(k for k in options if k not in BRIDGE_OPTIONS)
        if other:
            raise UsageError(f"{other[0]}= does not go with a Keras 3 conversion (template=, or a .weights.h5/"
                             ".keras dst): the template decides what is written")
        return convert_keras(src, dst, template, allow_missing=allow_missing, allow_unused=allow_unused,
                             **options)
    if allow_missing or allow_unused or skip_optimizer:
        raise UsageError("allow_missing, allow_unused and skip_optimizer go with template=")
    from ckptool.ops.transform.convert.run import convert as convert_checkpoint

    return convert_checkpoint(src, dst, template_config=template_config, **options)


def rewrite_names(src: str, dst: str, rules: Mapping[str, str] | Iterable[str] = (), **options: Any) -> RenamePlan:
    """Write ``src``'s tensors at ``dst`` under new names (``ckptool rewrite-names``).

    ``rules`` is an assignment map ``{old: new}`` as ``init_from_checkpoint`` reads it
    (exact names, ``"scope/": "new/"``, ``"re:PATTERN": "REPL"``) or ``"OLD=NEW"`` strings.
    ``options``: ``drop`` (globs), ``strip_optimizer``, ``template`` (a checkpoint whose
    names and object graph to fill), ``dry_run``, ``force``, ``allow_unused``,
    ``allow_missing``, ``compact``. The result's ``.renames`` are ``(old, new)`` pairs.

        >>> plan = ckptool.rewrite_names("runs/ckpt-5", "renamed/ckpt-5", {"optimizer/": "opt/"})
        >>> plan.renames[1]
        ('optimizer/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE', 'opt/_learning_rate/.ATTRIBUTES/VARIABLE_VALUE')
        >>> len(ckptool.rewrite_names("runs/ckpt-5", "small/ckpt-5", strip_optimizer=True).renames)
        5
    """
    from ckptool.ops.transform.rename.rewrite import rewrite_names as rewrite
    from ckptool.ops.transform.rename.rules import parse_map, parse_rule

    parsed = parse_map(dict(rules)) if isinstance(rules, Mapping) else [parse_rule(r) for r in rules]
    return rewrite(src, dst, parsed, **options)


def average(checkpoints: str | Iterable[str], out: str, **options: Any) -> AverageResult:
    """Average checkpoints (float64 mean of the floating tensors, the rest from the newest)
    into ``out`` (``ckptool average``).

    ``checkpoints`` is a list of checkpoints, or one directory with ``last=N``.
    ``options``: ``last``, ``strip_optimizer``, ``num_shards``, ``force``, ``dry_run``.

        >>> ckptool.average("runs/", "avg/ckpt", last=3).inputs
        ['runs/ckpt-3', 'runs/ckpt-4', 'runs/ckpt-5']
    """
    from ckptool.ops.transform.average import average as average_checkpoints

    paths = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    return average_checkpoints(paths, out, **options)


def save(prefix: str, sources: str | Iterable[str], **options: Any) -> SaveResult:
    """Write the tensors of files (``.npz``, ``.npy``, ``.safetensors``, checkpoints) as a V2
    checkpoint at ``prefix`` and record it in the directory's state file (``ckptool save``).
    For arrays in memory, :func:`ckptool.write`.

    ``options``: ``global_step`` (``prefix-N``), ``object_based``, ``num_shards``, ``force``,
    ``state`` (update the state file, default True), ``max_to_keep`` and
    ``keep_every_n_hours`` (retention after saving; nothing is deleted unasked).

        >>> ckptool.save("out/ckpt", "weights.npz", global_step=7).prefix
        'out/ckpt-7'
    """
    from ckptool.ops.transform.save import save as save_checkpoint

    files = [sources] if isinstance(sources, str) else list(sources)
    return save_checkpoint(prefix, files, **options)
