"""The tokenizer files of ``convert --to hf --vocab V``, so that ``AutoTokenizer.from_pretrained(out)``
works: the release's vocabulary copied under transformers' file name, and a
``tokenizer_config.json`` naming the class, its special tokens, its casing and the model's length.

``V`` is a WordPiece ``vocab.txt`` (BERT, ELECTRA: lower-cased exactly when the vocabulary has no
upper-case token, as the uncased releases are), a SentencePiece ``.model`` (ALBERT, lower-cased as
its releases are; T5, mT5), GPT-2's ``encoder.json`` (its ``vocab.bpe`` beside it), or a directory
holding one of them.

A vocabulary is streamed: ``vocab.txt`` read a chunk at a time, its lines counted (and its size
checked against the embeddings) as they come, then copied a chunk at a time; memory does not grow
with it. ``encoder.json`` is one JSON document, read by :func:`ckptool.format.json_doc.load_json`
(bounded); the JSON files written go through ``dump_json``.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, MissingError
from ckptool.format.json_doc import dump_json, load_json

if TYPE_CHECKING:
    from ckptool.io.base import Storage

WORDPIECE = ("BertTokenizer", "ElectraTokenizer", "RoFormerTokenizer", "TapasTokenizer",
             "ConvBertTokenizer", "MobileBertTokenizer", "FunnelTokenizer")
SENTENCEPIECE = ("AlbertTokenizer", "T5Tokenizer", "XLNetTokenizer", "RemBertTokenizer", "BigBirdTokenizer")
BPE = ("GPT2Tokenizer",)
_SPECIAL = {
    "wordpiece": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"},
    "AlbertTokenizer": {"unk_token": "<unk>", "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
                        "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"},
    "T5Tokenizer": {"unk_token": "<unk>", "pad_token": "<pad>", "eos_token": "</s>"},
    "XLNetTokenizer": {"unk_token": "<unk>", "sep_token": "<sep>", "pad_token": "<pad>", "cls_token": "<cls>",
                       "mask_token": "<mask>", "bos_token": "<s>", "eos_token": "</s>"},
    "BigBirdTokenizer": {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                         "sep_token": "[SEP]", "mask_token": "[MASK]", "cls_token": "[CLS]"},
    "RemBertTokenizer": {"unk_token": "<unk>", "sep_token": "[SEP]", "pad_token": "<pad>", "cls_token": "[CLS]",
                         "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"},
    "bpe": {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"},
}
CHUNK = 256 << 10
MAX_TOKEN = 1 << 20  # a "line" longer than this is no vocabulary's token
MAX_ENCODER_JSON = 256 << 20
_NEWLINE = re.compile(r"\r\n|\r|\n")  # universal newlines, as transformers' load_vocab reads the file

#: a file's bytes to write: whole, or a function giving them a chunk at a time
Data = bytes | Callable[[], Iterator[bytes]]


def chunks(storage: Storage, path: str) -> Iterator[bytes]:
    """``path``'s bytes, a chunk at a time."""
    reader = storage.open_reader(path)
    try:
        off = 0
        while off < reader.size:
            chunk = bytes(reader.read(off, min(CHUNK, reader.size - off)))
            if not chunk:
                raise CkptError(f"{path}: ends at byte {off}, before its size {reader.size}")
            off += len(chunk)
            yield chunk
    finally:
        reader.close()


def lines(parts: Iterator[bytes], where: str) -> Iterator[list[str]]:
    """The lines of UTF-8 text coming in ``parts`` (``\\n``, ``\\r\\n`` or ``\\r`` ending each), a
    batch (those a part completes) at a time."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    rest, done = "", 0
    try:
        for part in parts:
            text = rest + decoder.decode(part)
            done += len(part)
            carry = "\r" if text.endswith("\r") else ""  # its \n may come in the next part
            text = text[:len(text) - len(carry)]
            pieces = _NEWLINE.split(text) if "\r" in text else text.split("\n")
            rest = pieces.pop() + carry
            if len(rest) > MAX_TOKEN:
                raise CkptError(f"{where}: a line of over {MAX_TOKEN} characters near byte {done}: not a vocabulary")
            yield pieces
        pieces = _NEWLINE.split(rest + decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise CkptError(f"{where}: not UTF-8 text (near byte {done}): not a vocabulary (one token a line)") from None
    yield pieces[:-1] if pieces[-1] == "" else pieces


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
                    notes: list[str]) -> list[tuple[str, Data]]:
    """``[(file name, bytes)]`` to write beside the model."""
    from ckptool.io.backends.urls import storage_for

    storage, local = storage_for(vocab)
    if not storage.exists(local):
        raise MissingError(f"{vocab}: no such file or directory")
    kind, path = _kind(local, storage.listdir, storage.isdir(local))
    length = config.get("max_position_embeddings") or config.get("n_positions") or 512
    files: list[tuple[str, Data]]
    if kind == "wordpiece":
        lower = _wordpiece(storage, path, vocab, config, notes)
        cls = arch_tokenizer if arch_tokenizer in WORDPIECE else "BertTokenizer"
        settings: dict[str, Any] = {"do_lower_case": lower, "tokenize_chinese_chars": True, "strip_accents": None,
                                    **_SPECIAL["wordpiece"]}
        files = [("vocab.txt", lambda: chunks(storage, path))]
    elif kind == "sentencepiece":
        cls = arch_tokenizer if arch_tokenizer in SENTENCEPIECE else "T5Tokenizer"
        settings = dict(_SPECIAL[cls])
        if cls == "AlbertTokenizer":
            settings.update(do_lower_case=True, keep_accents=False, remove_space=True)
        elif cls == "XLNetTokenizer":  # cased; pads on the left; <cls> last
            settings.update(do_lower_case=False, keep_accents=False, remove_space=True, padding_side="left",
                            additional_special_tokens=["<eop>", "<eod>"])
        elif cls == "RemBertTokenizer":  # cased, accents kept: RemBERT's multilingual vocabulary
            settings.update(do_lower_case=False, keep_accents=True, remove_space=True)
        elif cls == "T5Tokenizer":
            settings["extra_ids"] = 100
        name = "sentencepiece.model" if cls == "RemBertTokenizer" else "spiece.model"  # the class's file name
        files = [(name, lambda: chunks(storage, path))]
    else:
        cls = "GPT2Tokenizer"
        merges = storage.join(storage.dirname(path), "vocab.bpe")
        if not storage.exists(merges):
            merges = storage.join(storage.dirname(path), "merges.txt")
        if not storage.exists(merges):
            raise MissingError(f"{vocab}: GPT-2's BPE merges (vocab.bpe) are not beside it")
        _bpe_size(storage, path, vocab, config, notes)
        settings = {"add_prefix_space": False, **_SPECIAL["bpe"]}
        files = [("vocab.json", lambda: chunks(storage, path)), ("merges.txt", lambda: chunks(storage, merges))]
    doc = {"tokenizer_class": cls, "model_max_length": length, **settings}
    special = {k: v for k, v in settings.items() if k.endswith("_token")}
    files += [("tokenizer_config.json", dump_json(doc, "tokenizer_config.json", sort_keys=True)),
              ("special_tokens_map.json", dump_json(special, "special_tokens_map.json", sort_keys=True))]
    return files


def _check_size(n: int, vocab: str, config: dict[str, Any], notes: list[str]) -> None:
    rows = config.get("vocab_size")
    if isinstance(rows, int) and n > rows:
        raise CkptError(f"{vocab}: {n} tokens or more, but the model's embeddings have {rows} rows (vocab_size)")
    if isinstance(rows, int) and n < rows:
        notes.append(f"{vocab}: {n} tokens for {rows} embedding rows (the rest are padding)")


def _wordpiece(storage: Storage, path: str, vocab: str, config: dict[str, Any], notes: list[str]) -> bool:
    """Check a WordPiece vocabulary line by line (its size as it goes); whether it is lower-cased
    (no upper-case letter outside ``[SPECIAL]`` tokens, as the uncased releases are)."""
    rows = config.get("vocab_size")
    n, unk, upper = 0, False, False
    for batch in lines(chunks(storage, path), vocab):
        n += len(batch)
        if isinstance(rows, int) and n > rows:
            _check_size(rows + 1, vocab, config, notes)  # raises: stop reading
        unk = unk or "[UNK]" in batch
        if not upper and (text := "\n".join(batch)).lower() != text:  # some token has upper case: which?
            upper = any(not (t.startswith("[") and t.endswith("]")) and any(c.isupper() for c in t)
                        for t in batch if t.lower() != t)
    if not unk:
        raise CkptError(f"{vocab}: not a BERT WordPiece vocabulary (no [UNK] token)")
    _check_size(n, vocab, config, notes)
    return not upper


def _bpe_size(storage: Storage, path: str, vocab: str, config: dict[str, Any], notes: list[str]) -> None:
    if storage.size(path) > MAX_ENCODER_JSON:
        raise CkptError(f"{vocab}: over {MAX_ENCODER_JSON} bytes, more than GPT-2's encoder.json this tool takes")
    doc = load_json(storage.read_bytes(path), vocab, max_bytes=MAX_ENCODER_JSON, what="GPT-2's encoder.json")
    if not isinstance(doc, dict):
        raise CkptError(f"{vocab}: not GPT-2's encoder.json (a JSON object token -> id)")
    _check_size(len(doc), vocab, config, notes)
    rows = config.get("vocab_size")
    bound = rows if isinstance(rows, int) and rows > 0 else len(doc)
    seen: set[int] = set()
    for token, i in doc.items():  # copied as vocab.json: an id a tokenizer cannot take is said here
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < bound or i in seen:
            why = "taken twice" if i in seen else f"not an integer 0..{bound - 1}"
            raise CkptError(f"{vocab}: not GPT-2's encoder.json: token {token[:40]!r} has id {str(i)[:40]} ({why})")
        seen.add(i)


__all__ = ["tokenizer_files"]
