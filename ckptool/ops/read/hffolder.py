"""Reading a Hugging Face folder as ``save_pretrained`` (and ``convert --to hf``) lays it out:
``model.safetensors``, or the shards ``model.safetensors.index.json``'s ``weight_map`` names
(``{"metadata": {"total_size"}, "weight_map": {tensor: shard}}``), beside ``config.json``.

Opened, it is what ``convert`` reads of any source (:class:`ckptool.ops.read.spec.Opened`),
so every reading command takes it. What is checked on opening (what the layout can say): the
index and ``config.json`` parse (bounded: :func:`ckptool.format.json_doc.load_json`); each
shard the ``weight_map`` names is a plain file name beside it, there, and a safetensors file
whose header parses; every tensor is in the shard the ``weight_map`` names, and every name
of the ``weight_map`` is in its shard; ``total_size`` (when given) is the tensors' bytes.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ckptool.errors import CorruptError, MissingError
from ckptool.format.json_doc import load_json
from ckptool.io.backends.urls import storage_for
from ckptool.ops.read.spec import Opened, Spec

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.read.stfile import StFile

HF_SINGLE, HF_INDEX, HF_CONFIG = "model.safetensors", "model.safetensors.index.json", "config.json"
#: An index or config.json larger than this is no Hugging Face folder's.
JSON_MAX = 64 << 20


def hf_weights(storage: Storage, path: str) -> str | None:
    """The weights file of the Hugging Face folder ``path`` (its index, else ``model.safetensors``);
    None when ``path`` is no such folder."""
    if not storage.isdir(path):
        return None
    for name in (HF_INDEX, HF_SINGLE):
        p = storage.join(path, name)
        if storage.isfile(p):
            return p
    return None


def _weight_map(storage: Storage, index: str) -> tuple[dict[str, str], int | None]:
    doc = load_json(storage.read_bytes(index), index, max_bytes=JSON_MAX, what="a model.safetensors.index.json")
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in wmap.items()):
        raise CorruptError(f"{index}: no 'weight_map' object of tensor names to shard files")
    for shard in set(wmap.values()):
        if not shard or "/" in shard or "\\" in shard or shard in (".", ".."):
            raise CorruptError(f"{index}: weight_map names {shard!r}, not a file beside it")
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return wmap, total if isinstance(total, int) and not isinstance(total, bool) else None


def open_hf(path: str) -> Opened:
    """The tensors of the Hugging Face folder ``path``, under their names there."""
    from ckptool.ops.read.stfile import StFile

    storage, local = storage_for(path)
    weights = hf_weights(storage, local)
    if weights is None:
        raise MissingError(f"{path}: no {HF_INDEX} or {HF_SINGLE} here (not a Hugging Face folder)")
    config = storage.join(local, HF_CONFIG)
    if storage.isfile(config):
        load_json(storage.read_bytes(config), config, max_bytes=JSON_MAX, what="a config.json")
    wmap, total = _weight_map(storage, weights) if weights.endswith(HF_INDEX) else (None, None)
    shards = sorted(set(wmap.values())) if wmap is not None else [HF_SINGLE]
    files: list[StFile] = []

    def close() -> None:
        for f in files:
            f.close()

    try:
        specs = []
        for shard in shards:
            where = storage.join(local, shard)
            if not storage.isfile(where):
                raise MissingError(f"{weights}: names {shard}, which is not there")
            f = StFile(storage.join(path, shard))
            files.append(f)
            for t in f.tensors:
                if wmap is not None and wmap.get(t.name) != shard:
                    raise CorruptError(f"{weights}: weight_map puts {t.name!r} in {wmap.get(t.name)!r}, "
                                       f"but {shard} holds it")
                specs.append(Spec(t.name, t.tf_dtype, t.shape, functools.partial(f.read, t.name)))
        _check_totals(weights, wmap, total, specs, files)
    except BaseException:
        close()
        raise
    return Opened(specs, close)


def _check_totals(weights: str, wmap: dict[str, str] | None, total: int | None, specs: list[Any],
                  files: list[StFile]) -> None:
    names = {s.name for s in specs}
    if wmap is not None:
        lost = sorted(set(wmap) - names)
        if lost:
            raise CorruptError(f"{weights}: weight_map puts {lost[0]!r} in {wmap[lost[0]]}, which does not hold it"
                               + (f" ({len(lost)} such names)" if len(lost) > 1 else ""))
    stored = sum(t.end - t.begin for f in files for t in f.tensors)
    if total is not None and total != stored:
        raise CorruptError(f"{weights}: total_size is {total}, the shards' tensors hold {stored} bytes")


__all__ = ["HF_CONFIG", "HF_INDEX", "HF_SINGLE", "hf_weights", "open_hf"]
