"""Issue 50: the JSON inputs this helper reads go through the one bounded reader
(ckptool.format.json_doc.load_json): --vocab encoder.json nested 100,000 deep is one CorruptError
naming the file, not a RecursionError; a sound one still reads."""

import json

import pytest

from ckptool.errors import CkptError, CorruptError
from ckptool.ops.transform.hf.tokenizer import tokenizer_files


def test_a_gpt2_vocab_is_read_bounded(tmp_path):
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\nh e\n")
    enc = tmp_path / "encoder.json"
    enc.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(CorruptError, match="encoder.json: not GPT-2's encoder.json: nested too deep"):
        tokenizer_files(str(enc), "GPT2Tokenizer", {"vocab_size": 2}, [])
    enc.write_text(json.dumps({"h": 0, "e": 1}))
    files = dict(tokenizer_files(str(enc), "GPT2Tokenizer", {"vocab_size": 2}, []))
    assert b"".join(files["vocab.json"]()) == enc.read_bytes() and "merges.txt" in files  # streamed


@pytest.mark.parametrize("ids", ['{"h": 0, "e": NaN}', '{"h": 0, "e": -Infinity}', '{"h": 0, "e": 1e500}',
                                 '{"h": 0, "e": -1}', '{"h": 0, "e": 1.5}', '{"h": 0, "e": true}',
                                 '{"h": 0, "e": 0}', '{"h": 0, "e": 2}', '{"h": 0, "e": "1"}'])
def test_a_gpt2_vocab_whose_ids_no_tokenizer_takes_is_refused(tmp_path, ids):
    """Copied as vocab.json, an id that is no integer below vocab_size (NaN, -Infinity, 1e500,
    negative, a float, a bool, a string) or one taken twice would be exported with exit 0 and fail
    (or mislead) the tokenizer that loads it: one CorruptError naming the file and the token."""
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\nh e\n")
    enc = tmp_path / "encoder.json"
    enc.write_text(ids)
    with pytest.raises(CkptError, match="encoder.json: not GPT-2's encoder.json: token 'e' has id"):
        tokenizer_files(str(enc), "GPT2Tokenizer", {"vocab_size": 2}, [])
