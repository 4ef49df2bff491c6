"""The tokenizer files of ``convert --to hf --vocab V``, so that ``AutoTokenizer.from_pretrained(out)``
works: the release's vocabulary copied under transformers' file name, and a
``tokenizer_config.json`` naming the class, its special tokens, its casing and the model's length.

``V`` is a WordPiece ``vocab.txt`` (BERT, ELECTRA: lower-cased exactly when the vocabulary has no
upper-case token, as the uncased releases are), a SentencePiece ``.model`` (ALBERT, lower-cased as
its releases are; T5, mT5), GPT-2's ``encoder.json`` (its ``vocab.bpe`` beside it), or a directory
holding one of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ckptool.errors import CkptError, MissingError

WORDPIECE = ("BertTokenizer", "ElectraTokenizer", "RoFormerTokenizer", "TapasTokenizer",
             "ConvBertTokenizer", "MobileBertTokenizer", "FunnelTokenizer")
SENTENCEPIECE = ("AlbertTokenizer", "T5Tokenizer", "RemBertTokenizer", "BigBirdTokenizer")
BPE = ("GPT2Tokenizer",)
_SPECIAL = {
    "wordpiece": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"},
    "AlbertTokenizer": {"unk_token": "<unk>", "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
                        "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"},
    "T5Tokenizer": {"unk_token": "<unk>", "pad_token": "<pad>", "eos_token": "</s>"},
    "BigBirdTokenizer": {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                         "sep_token": "[SEP]", "mask_token": "[MASK]", "cls_token": "[CLS]"},
    "RemBertTokenizer": {"unk_token": "<unk>", "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
                         "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"},
    "bpe": {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
}


def _kind(path: str, listdir: Callable[[str], list[str]], isdir: bool) -> tuple[str, str]:
    """``(kind, file)``: which vocabulary ``path`` is."""
    if isdir:
        names = listdir(path)
        for name, kind in (("vocab.txt", "wordpiece"), ("encoder.json", "bpe"), ("spiece.model", "sentencepiece")):
            if name in names:
                return kind, f"{path.rstrip('/')}/{name}"
        models = sorted(n for n in names if n.endswith(".model"))
        if models:
            return "sentencepiece", f"{path.rstrip('/')}/{models[0]}"
        raise CkptError(f"{path}: no vocabulary here (vocab.txt, a SentencePiece .model, or encoder.json)")
    low = path.lower()
    if low.endswith(".model"):
        return "sentencepiece", path
    if low.endswith(".json"):
        return "bpe", path
    return "wordpiece", path


def tokenizer_files(vocab: str, arch_tokenizer: str, config: dict[str, Any],
                    notes: list[str]) -> list[tuple[str, bytes]]:
    """``[(file name, bytes)]`` to write beside the model."""
    from ckptool.io.backends.urls import storage_for

    storage, local = storage_for(vocab)
    if not storage.exists(local):
        raise MissingError(f"{vocab}: no such file or directory")
    kind, path = _kind(local, storage.listdir, storage.isdir(local))
    data = storage.read_bytes(path)
    length = config.get("max_position_embeddings") or config.get("n_positions") or 512
    if kind == "wordpiece":
        tokens = _wordpiece(data, vocab, config, notes)
        cls = arch_tokenizer if arch_tokenizer in WORDPIECE else "BertTokenizer"
        lower = not any(c.isupper() for t in tokens if not (t.startswith("[") and t.endswith("]")) for c in t)
        settings: dict[str, Any] = {"do_lower_case": lower, "tokenize_chinese_chars": True, "strip_accents": None,
                                    **_SPECIAL["wordpiece"]}
        files = [("vocab.txt", data)]
    elif kind == "sentencepiece":
        cls = arch_tokenizer if arch_tokenizer in SENTENCEPIECE else "T5Tokenizer"
        settings = dict(_SPECIAL[cls])
        if cls == "AlbertTokenizer":
            settings.update(do_lower_case=True, keep_accents=False, remove_space=True)
        elif cls == "RemBertTokenizer":  # cased, accents kept: RemBERT's multilingual vocabulary
            settings.update(do_lower_case=False, keep_accents=True, remove_space=True)
        elif cls == "T5Tokenizer":
            settings["extra_ids"] = 100
        files = [("sentencepiece.model" if cls == "RemBertTokenizer" else "spiece.model", data)]
    else:
        cls = "GPT2Tokenizer"
        merges = storage.join(storage.dirname(path), "vocab.bpe")
        if not storage.exists(merges):
            merges = storage.join(storage.dirname(path), "merges.txt")
        if not storage.exists(merges):
            raise MissingError(f"{vocab}: GPT-2's BPE merges (vocab.bpe) are not beside it")
        _bpe_size(data, vocab, config, notes)
        settings = {"add_prefix_space": False, **_SPECIAL["bpe"]}
        files = [("vocab.json", data), ("merges.txt", storage.read_bytes(merges))]
    doc = {"tokenizer_class": cls, "model_max_length": length, **settings}
    special = {k: v for k, v in settings.items() if k.endswith("_token")}
    files += [("tokenizer_config.json", _json(doc)), ("special_tokens_map.json", _json(special))]
    return files


def _json(doc: dict[str, Any]) -> bytes:
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _check_size(n: int, vocab: str, config: dict[str, Any], notes: list[str]) -> None:
    rows = config.get("vocab_size")
    if isinstance(rows, int) and n > rows:
        raise CkptError(f"{vocab}: {n} tokens, but the model's embeddings have {rows} rows (vocab_size)")
    if isinstance(rows, int) and n < rows:
        notes.append(f"{vocab}: {n} tokens for {rows} embedding rows (the rest are padding)")


def _wordpiece(data: bytes, vocab: str, config: dict[str, Any], notes: list[str]) -> list[str]:
    try:
        tokens = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise CkptError(f"{vocab}: not a UTF-8 WordPiece vocabulary (one token a line)") from None
    if "[UNK]" not in tokens:
        raise CkptError(f"{vocab}: not a BERT WordPiece vocabulary (no [UNK] token)")
    _check_size(len(tokens), vocab, config, notes)
    return tokens


def _bpe_size(data: bytes, vocab: str, config: dict[str, Any], notes: list[str]) -> None:
    try:
        doc = json.loads(data)
    except ValueError:
        raise CkptError(f"{vocab}: not GPT-2's encoder.json") from None
    if not isinstance(doc, dict):
        raise CkptError(f"{vocab}: not GPT-2's encoder.json (a JSON object token -> id)")
    _check_size(len(doc), vocab, config, notes)


__all__ = ["tokenizer_files"]
