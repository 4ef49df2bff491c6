"""``--vocab`` is streamed (a chunk at a time, its size checked as it goes) and every JSON read or
written by ``convert --to hf`` goes through ckptool.format.json_doc: a hostile ``--config`` or
``encoder.json`` is a one-line error, never a traceback."""

import io
import json
import random
import shutil
import time
import tracemalloc

import pytest
from test_export import DATA, completed

from ckptool.ops.transform.hf.tokenizer import lines, tokenizer_files


def _big_vocab(path, mib):
    """A WordPiece vocabulary of about ``mib`` MiB (lower-case), [UNK] near its end."""
    line = b"".join(b"tok%07d\n" % i for i in range(10000))
    with open(path, "wb") as f:
        f.write(b"[PAD]\n")
        for _ in range(mib * (1 << 20) // len(line)):
            f.write(line)
        f.write(b"[UNK]\n")
    return path


def test_a_big_vocabulary_is_streamed(tmp_path):
    path = _big_vocab(tmp_path / "vocab.txt", 16)
    size = path.stat().st_size
    notes = []
    tracemalloc.start()
    try:
        t = time.perf_counter()
        files = tokenizer_files(str(path), "BertTokenizer", {"vocab_size": 10**8}, notes)
        copied = sum(len(c) for name, data in files if name == "vocab.txt" for c in data())
        took = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert copied == size
    assert peak < 4 << 20, peak  # read whole and split it took ~9x the file
    assert took < 60
    cfg = json.loads(dict(files)["tokenizer_config.json"])
    assert cfg["do_lower_case"] is True
    assert notes and "tokens for 100000000 embedding rows" in notes[0]


def test_a_vocabulary_bigger_than_the_embeddings_stops_early(tmp_path):
    path = _big_vocab(tmp_path / "vocab.txt", 48)
    tracemalloc.start()
    t = time.perf_counter()
    try:
        with pytest.raises(Exception, match="25 tokens or more, but the model's embeddings have 24 rows"):
            tokenizer_files(str(path), "BertTokenizer", {"vocab_size": 24}, [])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t < 5 and peak < 8 << 20


@pytest.mark.parametrize("seed", range(20))
def test_lines_are_what_transformers_reads(seed):
    """Cut anywhere, the lines are those of a text-mode read (universal newlines), as load_vocab's readlines."""
    rnd = random.Random(seed)
    words = ["a", "é", "[UNK]", "漢字", "", "x y"]
    seps = ["\n", "\r\n", "\r"]
    text = "".join(rnd.choice(words) + rnd.choice(seps) for _ in range(rnd.randint(0, 40)))
    if rnd.random() < 0.5:
        text += rnd.choice(words)
    data = text.encode("utf-8")
    cuts = sorted(rnd.sample(range(len(data) + 1), min(len(data) + 1, rnd.randint(0, 8))))
    parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    want = [t.rstrip("\n") for t in io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").readlines()]
    assert [t for batch in lines(iter(parts), "v") for t in batch] == want


def _bert(tmp_path, config):
    d = tmp_path / "src"
    shutil.copytree(DATA / "bert_pretraining", d)
    (d / "cfg.json").write_text(config)
    return completed("convert", d / "model.ckpt", tmp_path / "out", "--to", "hf", "--config", d / "cfg.json")


def _one_line_error(r):
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("ckptool: error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_a_lone_surrogate_in_the_config_is_one_line(tmp_path):
    cfg = json.loads((DATA / "bert_pretraining" / "bert_config.json").read_text())
    text = json.dumps(cfg)[:-1] + ', "note": "\\ud800"}'
    r = _bert(tmp_path, text)
    _one_line_error(r)
    assert "cfg.json" in r.stderr and "surrogate" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_config_nested_100000_deep_is_one_line(tmp_path):
    cfg = json.loads((DATA / "bert_pretraining" / "bert_config.json").read_text())
    text = json.dumps(cfg)[:-1] + ', "deep": ' + "[" * 100000 + "]" * 100000 + "}"
    r = _bert(tmp_path, text)
    _one_line_error(r)
    assert "cfg.json" in r.stderr and "deep" in r.stderr


def test_a_gin_value_that_is_not_text_is_one_line_when_config_json_is_written(tmp_path):
    """A gin string can hold a lone surrogate (Python's literal syntax): dump_json refuses it, naming config.json."""
    from test_export import case

    d = tmp_path / "t5"
    shutil.copytree(DATA / "t5_v1_0", d)
    gin = d / "operative_config.gin"
    gin.write_text(gin.read_text() + "\ndropout_rate = '\\ud800'\n")
    args = [d / a if (d / a).exists() else a for a in case("t5_v1_0")["args"]]
    r = completed("convert", d / case("t5_v1_0")["src"], tmp_path / "out", "--to", "hf", *args)
    _one_line_error(r)
    assert "config.json" in r.stderr and "not text" in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_hostile_encoder_json_is_one_line(tmp_path):
    d = tmp_path / "gpt2"
    shutil.copytree(DATA / "gpt2", d)
    (d / "encoder.json").write_text("{" + '"a": ' * 0 + '"x": ' + "[" * 100000 + "]" * 100000 + "}")
    r = completed("convert", d / "model.ckpt", tmp_path / "out", "--to", "hf", "--vocab", d / "encoder.json")
    _one_line_error(r)
    assert "encoder.json" in r.stderr and "deep" in r.stderr
    (d / "encoder.json").write_text('{"a": ' + "9" * 500 + "}")
    r = completed("convert", d / "model.ckpt", tmp_path / "out", "--to", "hf", "--vocab", d / "encoder.json")
    _one_line_error(r)
