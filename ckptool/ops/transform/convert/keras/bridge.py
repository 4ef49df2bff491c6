"""``convert --template``: a Keras 2 TF checkpoint into a Keras 3 ``.weights.h5`` / ``.keras``
file, and a Keras 3 file back into a TF checkpoint, by the structural mapping of
:mod:`ckptool.ops.transform.convert.keras.mapping`.

The output is the template with its values replaced: a Keras file keeps every group, attribute
and dataset of the template (a ``.keras`` file every member but ``model.weights.h5``, so its
``config.json`` and ``metadata.json``), a TF checkpoint the template's object graph and
variables. Nothing is written unless every template entry is filled (``allow_missing`` keeps the
template's value) and every source variable is used (``allow_unused``); shapes and dtypes must
agree. Written to a temporary name and renamed into place.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import RefusedError, UsageError
from ckptool.io.readerfile import ReaderFile
from ckptool.io.safety.atomic import AtomicFile, make_output_dir, publish
from ckptool.io.safety.destination import check_destination, checkpoint_identity
from ckptool.ops.read.keras import WEIGHTS_MEMBER, KerasCheckpoint, import_h5py, is_keras_path, read_model_config
from ckptool.ops.transform.convert.averaged import EmaReport
from ckptool.ops.transform.convert.keras.averaged_weights import averaged
from ckptool.ops.transform.convert.keras.mapping import Mapping, describe, map_keras
from ckptool.ops.transform.convert.keras.optim import HYPER

KERAS_H5, KERAS_ZIP, TF = "keras-weights", "keras", "tf"
_SHOWN = 5


@dataclass
class KerasResult:
    dst: str
    format: str
    mapping: Mapping
    dry_run: bool = False
    files: list[str] = field(default_factory=list)
    filled: int = 0
    kept: list[str] = field(default_factory=list)  # template entries kept (allow_missing)
    unused: list[str] = field(default_factory=list)  # source variables left out (allow_unused)
    hints: list[str] = field(default_factory=list)  # what the user does next (how Keras loads the state)
    ema: EmaReport | None = None  # --ema: the variables written with their averages' values

    def to_json(self) -> dict[str, Any]:
        doc = {"dst": self.dst, "format": self.format, "dry_run": self.dry_run, "tensors": self.filled,
               "files": list(self.files), "kept_from_template": list(self.kept), "unused": list(self.unused),
               "hints": list(self.hints)}
        if self.ema is not None:
            doc["ema"] = self.ema.to_json()
        doc.update(describe(self.mapping))
        return doc


def is_bridge(dst: str, template: str | None, to: str | None) -> bool:
    """Whether converting to ``dst`` goes through the Keras 3 bridge (:func:`convert_keras`): a
    template is given, or ``dst`` is a Keras 3 file whose suffix no target format overrides. The one
    rule of ``ckptool convert`` and ``ckptool.convert``."""
    return template is not None or (keras_target(dst) is not None and to is None)


#: what :func:`convert_keras` takes besides its paths and allow flags (the rest goes with plain conversion)
BRIDGE_OPTIONS = ("dry_run", "force", "sync", "template_config", "skip_optimizer", "ema", "strip_optimizer",
                  "with_optimizer")
#: how Keras 3 takes the optimizer state of a converted .weights.h5 (it skips it into an unbuilt optimizer)
LOAD_HINT = ("Keras 3 loads the optimizer state only into a built optimizer: model.optimizer.build("
             "model.trainable_variables) before model.load_weights(...)")
KERAS_HINT = "keras.saving.load_model restores the optimizer state (it builds the optimizer)"


def keras_target(dst: str) -> str | None:
    low = dst.lower()
    if low.endswith(".weights.h5"):
        return KERAS_H5
    if low.endswith(".keras"):
        return KERAS_ZIP
    return None


def _shown(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(repr(n) for n in names[:_SHOWN]) + more


def _check(mapping: Mapping, src: str, template: str, missing: list[str], unused: list[str],
           allow_missing: bool, allow_unused: bool) -> None:
    if mapping.problems:
        more = f" (and {len(mapping.problems) - 1} more)" if len(mapping.problems) > 1 else ""
        raise RefusedError(f"{src} -> template {template}: {mapping.problems[0]}{more}; nothing written")
    notes = [n for n in mapping.notes if not n.startswith("optimizer")] or mapping.notes
    why = f" ({notes[0]})" if notes else ""
    if missing and not allow_missing:
        raise RefusedError(f"template {template}: {len(missing)} entries have no source in {src}: "
                           f"{_shown(missing)}{why}; --allow-missing keeps the template's values")
    if unused and not allow_unused:
        raise RefusedError(f"{src}: {len(unused)} variables have no place in template {template}: "
                           f"{_shown(unused)}{why}; --allow-unused leaves them out")


def convert_keras(src: str, dst: str, template: str | None, *, dry_run: bool = False, allow_missing: bool = False,
                  allow_unused: bool = False, force: bool = False, sync: bool = True,
                  template_config: str | None = None, skip_optimizer: bool = False, ema: bool = False,
                  strip_optimizer: bool = False, with_optimizer: bool = False) -> KerasResult:
    """Convert ``src`` into ``dst`` shaped like ``template``; see the module doc. Without a template, a
    ``.keras`` DST is the whole model (:mod:`~ckptool.ops.transform.convert.keras.whole`; its
    optimizer only ``with_optimizer``). ``template_config``:
    a JSON file holding the Keras 3 model's config (``model.to_json()``), which records the layer
    order a ``.weights.h5`` does not; ``skip_optimizer``: carry the weights alone. ``ema``: each
    weight takes its moving average's value (:mod:`~ckptool.ops.transform.convert.keras.averaged_weights`);
    ``strip_optimizer``: no optimizer state of the source's goes across (as ``skip_optimizer``)."""
    from ckptool.ops.read.reader import open as open_checkpoint

    kind = keras_target(dst)
    skip_optimizer = skip_optimizer or strip_optimizer
    if template is None:
        if kind is None:
            raise UsageError(no_template_message(src, dst))
        if template_config is not None and kind != KERAS_ZIP:
            raise UsageError("--template-config goes with --template (the Keras 3 file it describes), a Keras 3 SRC "
                             "with --ema, or a .keras DST (the tf_keras model's model.to_json())")
        if with_optimizer and (kind != KERAS_ZIP or skip_optimizer):
            raise UsageError("--with-optimizer goes with a .keras DST without --template (a .weights.h5 carries the "
                             "optimizer state unless --skip-optimizer)")
        skip_optimizer = skip_optimizer or (kind == KERAS_ZIP and not with_optimizer)
        return _from_metadata(src, dst, kind, dry_run, allow_unused, force, sync, skip_optimizer, ema,
                              (template_config, with_optimizer))
    if with_optimizer:
        raise UsageError("--with-optimizer goes with a .keras DST without --template (with --template the optimizer "
                         "state goes across unless --skip-optimizer)")
    to_keras = is_keras_path(template)
    if kind is not None and not to_keras:
        raise UsageError(f"{dst}: a Keras 3 DST needs a Keras 3 --template (NEW.weights.h5 or NEW.keras, "
                         "what the new model saves), not a TF checkpoint")
    if kind is None and to_keras:
        raise UsageError(f"{dst}: with a Keras 3 --template, DST is a .weights.h5 or .keras file")
    if kind == KERAS_ZIP and not template.lower().endswith(".keras"):
        raise UsageError(f"{dst}: a .keras DST needs a .keras --template (its config.json and metadata.json)")
    if not to_keras and not is_keras_path(src):
        raise UsageError(f"{src}: with a TF --template, SRC is a Keras 3 file (.weights.h5, .keras, .weights.json)")
    with open_checkpoint(src) as s, open_checkpoint(template) as t:
        tf, kc = (s, t) if to_keras else (t, s)
        if not isinstance(kc, KerasCheckpoint):  # pragma: no cover - is_keras_path said so
            raise UsageError(f"{template}: not a Keras 3 file")
        config = read_model_config(template_config) if template_config is not None else None
        mapping = map_keras(tf, kc, to_keras, config=config, skip_optimizer=skip_optimizer)
        if to_keras:
            _leave_token_counts(mapping, s, kind)
        missing, unused = (mapping.keras_left, mapping.tf_left) if to_keras else (mapping.tf_left, mapping.keras_left)
        _check(mapping, src, template, missing, unused, allow_missing, allow_unused)
        report = averaged(s, src, None if to_keras else config) if ema else None
        reads = report.source if report is not None else {}
        if report is not None and strip_optimizer:
            names = set(s.names())
            report.dropped = len(names.intersection(mapping.not_carried + mapping.drop_tf))
        result = KerasResult(dst, kind or TF, mapping, dry_run, kept=list(missing), unused=list(unused), ema=report)
        result.filled = len(mapping.pairs) + len(mapping.added)
        if mapping.optimizer_pairs and kind is not None:
            result.hints.append(KERAS_HINT if kind == KERAS_ZIP else LOAD_HINT)
        ids = [f for ck in (s, t) for f in (ck.files if isinstance(ck, KerasCheckpoint) else checkpoint_identity(ck))]
        if dry_run:
            _check_dst(dst, kind, force, ids)
            return result
        values: dict[str, tuple[Any, str]] = {}
        for tk, k in mapping.pairs:  # output name <- source name (its average's, under --ema)
            out_name, src_name = (k, tk) if to_keras else (tk, k)
            values[out_name] = (s, reads.get(src_name, src_name))
        values.update({k: (s, tk) for tk, k in mapping.added})  # new datasets (an unbuilt optimizer's slots)
        values.update({tk: (_Zeros(t), tk) for tk in mapping.zeros})  # slots a fresh optimizer starts from
        if kind is None:
            result.files = _write_tf(dst, t, values, set(mapping.drop_tf), force, ids, sync)
        else:
            result.files = _write_keras(dst, kind, kc, values, force, ids, sync)
    return result


def _leave_token_counts(mapping: Mapping, ck: Any, kind: str | None) -> None:
    """tf_keras lookup layers' always-empty ``token_counts`` tables are left out by name, and said;
    a lookup layer's vocabulary is in none of the variables, so a ``.keras`` keeps its template's."""
    from ckptool.ops.transform.convert.keras.synth import TOKEN_COUNTS

    empty = [n for n in mapping.tf_left if n.endswith(TOKEN_COUNTS) and not any(ck.variable(n).shape)]
    if not empty:
        return
    mapping.tf_left = [n for n in mapping.tf_left if n not in set(empty)]
    mapping.ignored += empty
    mapping.notes.append(f"left out {len(empty)} tensors of lookup layers' token_counts tables: tf_keras writes them "
                         "always empty, and Keras 3 keeps no such table")
    if kind == KERAS_ZIP:
        mapping.notes.append("lookup layers: their vocabularies are not variables of the source; the .keras keeps its "
                             "template's assets/ (the template model's vocabularies)")


class _Zeros:
    """Reads as zeros shaped like a checkpoint's values (the slots of a fresh optimizer)."""

    def __init__(self, ck: Any):
        self.ck = ck

    def read(self, key: str) -> Any:
        import numpy as np

        return np.zeros_like(self.ck.read(key))


def _check_dst(dst: str, kind: str | None, force: bool, ids: list[str]) -> None:
    from ckptool.io.backends.urls import storage_for

    storage, path = storage_for(dst)
    check_destination(storage, [path] if kind else [path + ".index"], force=force, sources=ids, label=dst)


def _fill_h5(path: str, values: dict[str, Any]) -> None:
    """Replace the datasets of the h5 file at ``path`` (a copy of the template) in place; a name
    the template lacks is created (an unbuilt optimizer's slots, after its existing datasets)."""
    import ml_dtypes
    import numpy as np

    h5py = import_h5py()
    with h5py.File(path, "r+") as h5:
        for name, (ck, key) in values.items():
            arr = np.asarray(ck.read(key))
            arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
            if name not in h5:
                ds = h5.create_dataset(name, data=arr)
                if arr.dtype == ml_dtypes.bfloat16:
                    ds.attrs["dtype"] = "bfloat16"
                continue
            ds = h5[name]
            if ds.dtype.kind == "V" and arr.dtype.itemsize == ds.dtype.itemsize:
                arr = arr.view(ds.dtype)  # Keras's bfloat16: a 2-byte opaque type
            elif arr.dtype != ds.dtype:
                arr = arr.astype(ds.dtype)  # same dtype name (checked by the mapping): byte order only
            ds[()] = arr


def _write_keras(dst: str, kind: str, template: KerasCheckpoint, values: dict[str, Any], force: bool,
                 ids: list[str], sync: bool) -> list[str]:
    """The template's h5 (its ``.keras``'s member) copied to a temporary, filled in place by h5py,
    then published as ``dst`` (a ``.keras``: the template's members around it, streamed); every
    file reached through its Storage, the scratch copy a temporary of its own."""
    from ckptool.io.backends.urls import storage_for

    if template.path.lower().endswith(".weights.json"):
        raise UsageError(f"{template.path}: a sharded template is not supported; save the template unsharded")
    storage, path = storage_for(dst)
    check_destination(storage, [path], force=force, sources=ids, label=dst)
    make_output_dir(storage, storage.dirname(path))
    f = AtomicFile(storage, path, sync=sync)
    scratch = AtomicFile(storage, f.name + ".h5", sync=False) if kind == KERAS_ZIP else f
    tstore, tpath = storage_for(template.path)
    try:
        with ReaderFile.of(tstore.open_reader(tpath)) as src:
            if tpath.lower().endswith(".keras"):
                with zipfile.ZipFile(io.BufferedReader(src)) as zt, zt.open(WEIGHTS_MEMBER) as m:
                    _copy(m, scratch)
            else:
                _copy(src, scratch)
        scratch.writer().flush()
        _fill_h5(scratch.name, values)  # h5py edits the temporary by its own name
        if kind == KERAS_ZIP:
            with ReaderFile.of(tstore.open_reader(tpath)) as src, zipfile.ZipFile(io.BufferedReader(src)) as zt, \
                    zipfile.ZipFile(f.writer(), "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zo:
                for info in zt.infolist():
                    if info.filename == WEIGHTS_MEMBER:
                        zo.write(scratch.name, WEIGHTS_MEMBER)
                    else:  # streamed: a member is never whole in memory
                        with zt.open(info) as m, zo.open(info, "w", force_zip64=info.file_size > 1 << 30) as out:
                            shutil.copyfileobj(m, out, 1 << 20)
        publish([f])
    except BaseException:
        f.discard()
        raise
    finally:
        if scratch is not f:
            scratch.discard()
    return [path]


def _copy(src: Any, to: AtomicFile) -> None:
    """Stream a file object into ``to``, a MiB at a time."""
    while chunk := src.read(1 << 20):
        to.write(chunk)


def _write_tf(dst: str, template: Any, values: dict[str, Any], drop: set[str], force: bool, ids: list[str],
              sync: bool) -> list[str]:
    """The template's variables with the mapped ones replaced; ``drop`` (its optimizer's) left out,
    the object graph cut to match, so that tf.keras starts that optimizer fresh."""
    from ckptool.format.objkeys import OBJECT_GRAPH_KEY
    from ckptool.ops.write.writer import BundleWriter

    graph: bytes | None = None
    keys: dict[str, str | None] = {}
    if drop:
        g, keys = template.object_graph().edited({}, strip_optimizer=True)
        graph = g.serialize()
    with BundleWriter(dst, force=force, sync=sync, sources=ids) as w:
        for v in template.variables():
            if v.name == OBJECT_GRAPH_KEY and graph is not None:
                w.add(v.name, graph)
                continue
            if v.name in drop or (v.name in keys and keys[v.name] is None):
                continue
            ck, key = values.get(v.name, (template, v.name))
            w.add(keys.get(v.name) or v.name, ck.read(key))
        res = w.finish()
    return list(res.files)


def _from_metadata(src: str, dst: str, kind: str, dry_run: bool, allow_unused: bool, force: bool, sync: bool,
                   skip_optimizer: bool, ema: bool, whole_args: tuple[str | None, bool]) -> KerasResult:
    """No template: the layout from a SavedModel's keras_metadata.pb
    (:mod:`~ckptool.ops.transform.convert.keras.synth`); a .keras DST with the model's config
    (:mod:`~ckptool.ops.transform.convert.keras.whole`)."""
    from ckptool.format.objkeys import OBJECT_GRAPH_KEY
    from ckptool.io.backends.urls import storage_for
    from ckptool.ops.transform.convert.keras.synth import plan, write_h5
    from ckptool.ops.transform.convert.keras.whole.h5_source import left_out, open_source, source_nodes
    from ckptool.ops.transform.convert.keras.whole.model_config import prepare
    from ckptool.ops.transform.convert.keras.whole.write import write_keras

    with open_source(src) as ck:
        nodes = source_nodes(ck, src, kind == KERAS_ZIP and whole_args[1])
        whole = prepare(ck, src, *whole_args) if kind == KERAS_ZIP else None
        p = plan(ck, src, skip_optimizer, nodes=whole.nodes if whole is not None else nodes)
        left_out(ck, p)
        p.notes += whole.notes if whole is not None else []
        mapping = Mapping(pairs=p.pairs, shapes={k: list(ck.variable(t).shape) for t, k in p.pairs},
                          not_carried=p.dropped, notes=p.notes, optimizer_pairs=p.optimizer)
        mapped = {t for t, _ in p.pairs} | set(p.dropped)
        for v in ck.variables():
            if v.name in mapped:
                continue
            if v.name == OBJECT_GRAPH_KEY or v.name.startswith(("save_counter/", "keras_api/")) or \
                    v.name.startswith("optimizer/") and v.name.split("/")[1] in _NOT_STATE:
                mapping.ignored.append(v.name)
            else:
                mapping.tf_left.append(v.name)
        _check(mapping, src, "(from keras_metadata.pb)", [], mapping.tf_left, False, allow_unused)
        report = averaged(ck, src) if ema else None
        if report is not None:  # each weight reads its average
            p.pairs = [(report.source.get(t, t), k) for t, k in p.pairs]
            report.dropped = len(p.dropped) if skip_optimizer else 0
        result = KerasResult(dst, kind, mapping, dry_run, unused=list(mapping.tf_left), ema=report)
        result.filled = len(p.pairs) + len(p.consts)
        if p.optimizer:
            result.hints.append(LOAD_HINT if whole is None else KERAS_HINT)
        ids = checkpoint_identity(ck)
        storage, path = storage_for(dst)
        check_destination(storage, [path], force=force, sources=ids, label=dst)
        if dry_run:
            return result
        make_output_dir(storage, storage.dirname(path))
        f = AtomicFile(storage, path, sync=sync)
        try:  # h5py writes the temporary by its own name; the AtomicFile syncs and renames it
            if whole is None:
                write_h5(f.name, ck, p)
            else:
                write_keras(f, storage, ck, p, whole.config)
            publish([f])
        except BaseException:
            f.discard()
            raise
        result.files = [path]
    return result


#: optimizer variables Keras 3 keeps as config, not state: legacy hyperparameters, a schedule's current value
_NOT_STATE = HYPER | {"_current_learning_rate"}


def no_template_message(src: str, dst: str) -> str:
    return (f"{dst}: converting to a Keras 3 file needs --template: the file the new Keras 3 model writes "
            f"(model.save_weights('NEW.weights.h5') or model.save('NEW.keras'), untrained is fine); {src}'s "
            "variables are then placed by structure")


__all__ = ["BRIDGE_OPTIONS", "KERAS_H5", "KERAS_ZIP", "KerasResult", "convert_keras", "is_bridge", "keras_target",
           "no_template_message"]
