"""The vocabularies of a tf_keras model's lookup layers (``TextVectorization``, ``StringLookup``,
``IntegerLookup``) in the Keras 3 config: Keras 3 takes a vocabulary given as a list in the layer's
config. tf_keras records a list there as it was given; a file given at construction is kept by
the SavedModel in ``assets/`` under the file's base name, whose lines are the tokens. A vocabulary
learnt by ``adapt()`` is in neither: tf_keras keeps it in ``saved_model.pb``'s graph, which is not
read here, and the layer is refused rather than written empty."""

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
    """Put each lookup layer's vocabulary into its config (from ``assets/`` when tf_keras recorded a
    file); notes saying where each came from. A vocabulary that cannot be found is refused."""
    notes = []
    for entry in _layers(doc):
        if entry.get("class_name") not in LOOKUPS:
            continue
        cfg = entry["config"]
        label = f"{src}: layer {cfg.get('name')!r} ({entry['class_name']})"
        size_, has_input = cfg.pop("vocabulary_size", None), cfg.pop("has_input_vocabulary", False)
        vocab = cfg.get("vocabulary")
        if isinstance(vocab, list):
            notes.append(f"{label}: its vocabulary ({len(vocab)} tokens) is in its config")
        elif isinstance(vocab, str) and saved_model_dir is not None:
            cfg["vocabulary"] = _read_asset(saved_model_dir, vocab, label, entry["class_name"])
            notes.append(f"{label}: its vocabulary ({len(cfg['vocabulary'])} tokens) read from the SavedModel's "
                         f"assets/{posixpath.basename(vocab.replace(chr(92), '/'))}")
        else:
            how = "given as a list" if has_input else "learnt by adapt()"
            size = f" of {size_} tokens" if isinstance(size_, int) else ""
            raise RefusedError(f"{label}: its vocabulary{size} ({how}) is not in the model config nor in the "
                               "SavedModel's assets/: tf_keras keeps it only as a table in saved_model.pb's graph, "
                               "which ckptool does not read, and Keras 3 would load the layer empty: nothing written. "
                               "Give the layer its vocabulary as a file (vocabulary='vocab.txt') in tf_keras and save "
                               "again")
    return notes


def _read_asset(saved_model_dir: str, vocab: str, label: str, cls: str) -> list[Any]:
    from ckptool.io.backends.urls import storage_for

    storage, base = storage_for(saved_model_dir)
    name = posixpath.basename(vocab.replace("\\", "/"))
    path = storage.join(base, "assets", name)
    if not storage.isfile(path):
        raise RefusedError(f"{label}: its vocabulary file {vocab!r} is not in the SavedModel's assets/ ({path}): "
                           "nothing written")
    if storage.size(path) > VOCAB_LIMIT:
        raise RefusedError(f"{label}: {path} is over {VOCAB_LIMIT >> 20} MiB, more than a vocabulary")
    try:
        lines = storage.read_bytes(path).decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise RefusedError(f"{label}: {path} is not UTF-8 text (byte {exc.start})") from None
    if cls == "IntegerLookup":
        try:
            return [int(t) for t in lines]
        except ValueError:
            raise RefusedError(f"{label}: {path} holds a line that is not an integer") from None
    return list(lines)


__all__ = ["LOOKUPS", "fill_vocabularies"]
