"""The vocabularies of a tf_keras model's lookup layers (``TextVectorization``, ``StringLookup``,
``IntegerLookup``) in the Keras 3 config, which takes a vocabulary given as a list in the layer's
config. A SavedModel's config records none (``vocabulary: null``, ``has_input_vocabulary`` and
``vocabulary_size``). A vocabulary given as a list or learnt by ``adapt()`` initializes the layer's
``lookup_table`` from two constants of ``saved_model.pb`` (tokens and indices), read through
:mod:`ckptool.format.saved_model`; a vocabulary file given at construction is copied into
``assets/`` under its base name (a token a line) and is taken when it is the one asset whose size
fits the layer's (tokens + OOV and mask indices). What is found neither way (no ``saved_model.pb``,
or a table initialized otherwise) is refused rather than written empty, as is a ``tf_idf`` layer's
(Keras 3 wants its ``idf_weights`` beside the vocabulary)."""

from __future__ import annotations

import posixpath
from typing import Any

from ckptool.errors import RefusedError
from ckptool.format.saved_model import SavedObjects

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
    """Put each lookup layer's vocabulary into its config (a list tf_keras recorded there, the
    constants ``saved_model.pb`` initializes its table from, or a file of the SavedModel's
    ``assets/``); notes saying where each came from. A vocabulary that cannot be found is refused."""
    notes: list[str] = []
    assets = _assets(saved_model_dir)
    graph = _Tables(saved_model_dir)
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
        found = graph.vocabulary(cfg, cls, label, size) if name is None else None
        if found is not None:
            cfg["vocabulary"] = found
            notes.append(f"{label}: its vocabulary ({len(found)} tokens) read from the constants saved_model.pb "
                         "initializes its lookup table from")
            continue
        if name is None and has_input and isinstance(size, int):
            fits = [n for n, tokens in assets.items() if len(tokens) + _specials(cls, cfg) == size]
            name = fits[0] if len(fits) == 1 else None
        if name is None or name not in assets:
            how = "given as a list" if has_input else "learnt by adapt()"
            of = f" of {size} tokens" if isinstance(size, int) else ""
            raise RefusedError(f"{label}: its vocabulary{of} ({how}) is not in the model config, nor (as one file "
                               f"whose size fits) in the SavedModel's assets/, nor {graph.why}, and Keras 3 would "
                               "load the layer empty: nothing written. Give the layer its vocabulary as a file "
                               "(vocabulary='vocab.txt') in tf_keras and save again")
        cfg["vocabulary"] = _typed(assets.pop(name), cls, label)
        notes.append(f"{label}: its vocabulary ({len(cfg['vocabulary'])} tokens) read from the SavedModel's "
                     f"assets/{name}")
    return notes


class _Tables:
    """The lookup tables' constants of a SavedModel's ``saved_model.pb``, read when first asked;
    ``why``: what was missing, for the refusal."""

    def __init__(self, saved_model_dir: str | None):
        self.dir = saved_model_dir
        self.objs: SavedObjects | None = None
        self.paths: dict[str, list[str]] = {}
        self.why = ("in saved_model.pb (none beside keras_metadata.pb)" if saved_model_dir is not None else
                    "in a SavedModel's saved_model.pb (this source is not a SavedModel)")

    def _load(self) -> SavedObjects | None:
        from ckptool.format.keras_metadata import parse as parse_metadata
        from ckptool.format.saved_model import SAVED_MODEL_LIMIT, parse
        from ckptool.io.backends.urls import storage_for

        if self.objs is not None or self.dir is None:
            return self.objs
        storage, base = storage_for(self.dir)
        path, meta = storage.join(base, "saved_model.pb"), storage.join(base, "keras_metadata.pb")
        if not storage.isfile(path) or not storage.isfile(meta):
            return None
        if storage.size(path) > SAVED_MODEL_LIMIT:
            raise RefusedError(f"{path}: over {SAVED_MODEL_LIMIT >> 20} MiB: not read for lookup layers' vocabularies")
        self.objs = parse(storage.read_bytes(path), path)
        for n in parse_metadata(storage.read_bytes(meta), meta):
            if n.class_name in LOOKUPS and not n.path.endswith("._lookup_layer"):
                self.paths.setdefault(n.name, []).append(n.path)
        self.why = "among the constants saved_model.pb initializes its lookup table from"
        return self.objs

    def vocabulary(self, cfg: dict[str, Any], cls: str, label: str, size: Any) -> list[Any] | None:
        """The layer's tokens in index order, from the two constants (keys, values) its table is
        initialized from; None where there are no such constants."""
        objs = self._load()
        paths = self.paths.get(str(cfg.get("name")), [])
        if objs is None or len(paths) != 1:
            return None
        nid = objs.resolve(paths[0])
        for step in ("_lookup_layer", "lookup_table", "_initialize"):
            nid = objs.kids(nid).get(step, nid) if step == "_lookup_layer" else objs.kids(nid).get(step)
        got = objs.captured(nid) if nid is not None else None
        if got is None or len(got) != 2 or None in got or len(got[0]) != len(got[1]):
            return None
        if cfg.get("output_mode") == "tf_idf":
            raise RefusedError(f"{label}: output_mode 'tf_idf': Keras 3 takes its idf_weights beside the vocabulary, "
                               "and ckptool does not carry them; nothing written")
        keys, values = got[::-1] if cfg.get("invert") else got
        start = _specials(cls, cfg)
        if sorted(values) != list(range(start, start + len(values))) or (isinstance(size, int) and
                                                                         size != start + len(values)):
            raise RefusedError(f"{label}: its lookup table's indices are not {start}..{start + len(values) - 1}"
                               f"{f' ({size} with the OOV and mask indices)' if isinstance(size, int) else ''}: "
                               "not the vocabulary tf_keras's config describes; nothing written")
        tokens = [k for _, k in sorted(zip(values, keys))]
        if cls == "IntegerLookup":
            return [int(t) for t in tokens] if all(isinstance(t, int) for t in tokens) else None
        if not all(isinstance(t, bytes) for t in tokens):
            return None
        try:
            return [t.decode(str(cfg.get("encoding") or "utf-8")) for t in tokens]
        except (UnicodeDecodeError, LookupError):
            raise RefusedError(f"{label}: a token of its vocabulary is not {cfg.get('encoding') or 'utf-8'}") from None


def _specials(cls: str, cfg: dict[str, Any]) -> int:
    """How many indices a lookup layer keeps before its vocabulary: the OOV ones, the mask's."""
    if cls == "TextVectorization":  # "" (the mask, in 'int' mode only) and "[UNK]"
        return 2 if cfg.get("output_mode", "int") == "int" else 1
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
