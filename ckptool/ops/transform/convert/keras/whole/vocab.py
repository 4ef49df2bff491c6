"""The vocabularies of a tf_keras model's lookup layers (``TextVectorization``, ``StringLookup``,
``IntegerLookup``) in the Keras 3 config, which takes a vocabulary given as a list in the layer's
config. A SavedModel's config records none (``vocabulary: null``, ``has_input_vocabulary`` and
``vocabulary_size``); a vocabulary file given at construction is copied into ``assets/`` under its
base name (a token a line) and is taken when it is the one asset whose size fits the layer's
(tokens + OOV and mask indices). A vocabulary given as a list or learnt by ``adapt()`` is kept only
in ``saved_model.pb``'s graph, which is not read here: the layer is refused rather than written
empty."""

from __future__ import annotations

import posixpath
from typing import Any

from ckptool.errors import RefusedError

LOOKUPS = {"TextVectorization", "StringLookup", "IntegerLookup"}
#: the largest vocabulary file read (a token a line; 256 MiB is a few million tokens)
VOCAB_LIMIT = 256 << 20


def _layers(doc: Any) -> list[dict[str, Any]]:
    """Every layer entry of a translated model config, nested models' and wrappers' too."""
    out, stack = [], [doc]
    while stack:
        d = stack.pop()
        if not isinstance(d, dict):
            continue
        cfg = d.get("config")
        if isinstance(cfg, dict):
            out.append(d)
            stack.extend(cfg.get("layers") or [])
            stack.extend(cfg.get(k) for k in ("layer", "backward_layer", "cell"))
    return out


def fill_vocabularies(doc: dict[str, Any], src: str, saved_model_dir: str | None) -> list[str]:
    """Put each lookup layer's vocabulary into its config (a list tf_keras recorded there, or a file
    of the SavedModel's ``assets/``); notes saying where each came from. A vocabulary that cannot be
    found is refused."""
    notes: list[str] = []
    assets = _assets(saved_model_dir)
    for entry in _layers(doc):
        if entry.get("class_name") not in LOOKUPS:
            continue
        cfg, cls = entry["config"], entry["class_name"]
        label = f"{src}: layer {cfg.get('name')!r} ({cls})"
        size, has_input = cfg.pop("vocabulary_size", None), cfg.pop("has_input_vocabulary", False)
        vocab = cfg.get("vocabulary")
        if isinstance(vocab, list):
            notes.append(f"{label}: its vocabulary ({len(vocab)} tokens) is in its config")
            continue
        name = posixpath.basename(vocab.replace("\\", "/")) if isinstance(vocab, str) else None
        if name is None and has_input and isinstance(size, int):
            fits = [n for n, tokens in assets.items() if len(tokens) + _specials(cls, cfg) == size]
            name = fits[0] if len(fits) == 1 else None
        if name is None or name not in assets:
            how = "given as a list" if has_input else "learnt by adapt()"
            of = f" of {size} tokens" if isinstance(size, int) else ""
            raise RefusedError(f"{label}: its vocabulary{of} ({how}) is not in the model config nor, as one file whose "
                               "size fits, in the SavedModel's assets/: tf_keras keeps it as a table in "
                               "saved_model.pb's graph, which ckptool does not read, and Keras 3 would load the layer "
                               "empty: nothing written. Give the layer its vocabulary as a file (vocabulary="
                               "'vocab.txt') in tf_keras and save again")
        cfg["vocabulary"] = _typed(assets.pop(name), cls, label)
        notes.append(f"{label}: its vocabulary ({len(cfg['vocabulary'])} tokens) read from the SavedModel's "
                     f"assets/{name}")
    return notes


def _specials(cls: str, cfg: dict[str, Any]) -> int:
    """How many indices a lookup layer keeps before its vocabulary: the OOV ones, the mask's."""
    if cls == "TextVectorization":
        return 2  # "" (mask) and "[UNK]"
    oov = cfg.get("num_oov_indices", 1)
    return (oov if isinstance(oov, int) else 1) + (cfg.get("mask_token") is not None)


def _assets(saved_model_dir: str | None) -> dict[str, list[str]]:
    """The text files of a SavedModel's ``assets/``, each as its lines."""
    from ckptool.io.backends.urls import storage_for

    if saved_model_dir is None:
        return {}
    storage, base = storage_for(saved_model_dir)
    d = storage.join(base, "assets")
    out = {}
    for name in sorted(storage.listdir(d)) if storage.isdir(d) else []:
        path = storage.join(d, name)
        if not storage.isfile(path):
            continue
        if storage.size(path) > VOCAB_LIMIT:
            raise RefusedError(f"{path}: over {VOCAB_LIMIT >> 20} MiB, more than a vocabulary")
        try:
            out[name] = storage.read_bytes(path).decode("utf-8").splitlines()
        except UnicodeDecodeError:
            continue  # not a vocabulary
    return out


def _typed(lines: list[str], cls: str, label: str) -> list[Any]:
    if cls != "IntegerLookup":
        return lines
    try:
        return [int(t) for t in lines]
    except ValueError:
        raise RefusedError(f"{label}: its vocabulary file holds a line that is not an integer") from None


__all__ = ["LOOKUPS", "fill_vocabularies"]
