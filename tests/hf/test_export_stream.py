"""``convert --to hf`` streams its bytes: a weight kept as stored (here word embeddings of 25.6 MB,
three 8 MiB chunks and a tail) is copied a chunk at a time through one buffer, its CRC32C checked
across the chunks: the exported bytes are the stored ones, and a byte flipped in the last chunk
fails the export after the first chunks were written, with nothing left behind. A stored matrix
is transposed as it is read, a block of rows at a time (the CRC32C likewise chained across the
blocks), and any large transpose (a strip of rows at a time) is numpy's, byte for byte, whatever
the dtype, shape or strides."""

import json

import numpy as np
import pytest
from test_export import DATA, folder

import ckptool
from ckptool.ops.transform.hf.weightmap import apply
from clirun import completed

VOCAB = 800_000  # x hidden 8 x 4 bytes: 25.6 MB, past three 8 MiB chunks
FF = 200_000  # the feed-forward kernels: 8 x FF and FF x 8, 6.4 MB, read in 512 KiB blocks of rows


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The bert_pretraining fixture with a vocabulary of VOCAB rows, and its config."""
    d = tmp_path_factory.mktemp("big")
    with ckptool.open(str(DATA / "bert_pretraining" / "model.ckpt")) as ck:
        values = {v.name: ck.read(v.name) for v in ck.variables()}
    rng = np.random.default_rng(0)
    emb = "bert/embeddings/word_embeddings"
    values[emb] = rng.standard_normal((VOCAB, values[emb].shape[1]), dtype=np.float32)
    values["cls/predictions/output_bias"] = rng.standard_normal(VOCAB, dtype=np.float32)
    for i in range(2):
        p = f"bert/encoder/layer_{i}"
        values[f"{p}/intermediate/dense/kernel"] = rng.standard_normal((8, FF), dtype=np.float32)
        values[f"{p}/intermediate/dense/bias"] = rng.standard_normal(FF, dtype=np.float32)
        values[f"{p}/output/dense/kernel"] = rng.standard_normal((FF, 8), dtype=np.float32)
    ckptool.write(str(d / "model.ckpt"), values, sync=False)
    cfg = json.loads((DATA / "bert_pretraining" / "bert_config.json").read_text())
    (d / "bert_config.json").write_text(json.dumps(dict(cfg, vocab_size=VOCAB, intermediate_size=FF)))
    return d, values


def _export(d, out):
    return completed("convert", d / "model.ckpt", out, "--to", "hf", "--config", d / "bert_config.json")


def test_a_weight_kept_as_stored_is_copied_in_chunks_byte_for_byte(big, tmp_path):
    d, values = big
    r = _export(d, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    got = folder(tmp_path / "out")
    assert got["bert.embeddings.word_embeddings.weight"].tobytes() == \
        values["bert/embeddings/word_embeddings"].tobytes()
    assert got["cls.predictions.bias"].tobytes() == values["cls/predictions/output_bias"].tobytes()
    for i in range(2):  # transposed as read: one block (8 rows of 800 KB) and 13 blocks of 16,384 rows
        for tf, hf in (("intermediate/dense", "intermediate.dense"), ("output/dense", "output.dense")):
            kernel = values[f"bert/encoder/layer_{i}/{tf}/kernel"]
            assert got[f"bert.encoder.layer.{i}.{hf}.weight"].tobytes() == np.ascontiguousarray(kernel.T).tobytes()


@pytest.mark.parametrize("name", ["bert/embeddings/word_embeddings", "bert/encoder/layer_1/output/dense/kernel"])
def test_a_bad_crc_in_the_last_chunk_fails_and_leaves_nothing(big, tmp_path, name):
    d, _ = big
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in d.iterdir():
        (bad / f.name).write_bytes(f.read_bytes())
    with ckptool.open(str(bad / "model.ckpt")) as ck:
        e = ck.lookup(name)
    data = bad / "model.ckpt.data-00000-of-00001"
    with open(data, "r+b") as f:
        f.seek(e.offset + e.size - 5)
        b = f.read(1)
        f.seek(e.offset + e.size - 5)
        f.write(bytes([b[0] ^ 0x40]))
    r = _export(bad, tmp_path / "out")
    assert r.returncode == 1
    assert f"checksum does not match for tensor {name!r}" in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.uint16])
@pytest.mark.parametrize("shape", [(1024, 4096), (4096, 1024), (257, 1031), (3, 40000), (40000, 3)])
def test_a_large_transpose_is_numpys(dtype, shape):
    x = (np.arange(np.prod(shape)) % 251).astype(dtype).reshape(shape)
    assert apply("T", x, {}).tobytes() == np.ascontiguousarray(x.T).tobytes()
    y = (np.arange(2 * np.prod(shape)) % 251).astype(dtype).reshape(shape[0], 2 * shape[1])[:, 1::2]  # strided
    got = apply("T", y, {})
    assert got.flags.c_contiguous and got.tobytes() == np.ascontiguousarray(y.T).tobytes()
