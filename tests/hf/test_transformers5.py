"""The exported folders in transformers 5 (torch): ``from_pretrained`` of the class config.json names
loads every weight with nothing missing, unexpected or mis-shaped, and each equals what
transformers 4.57.6's TF loader put there (``expected.safetensors``); ``AutoTokenizer`` reads the
tokenizer files. The CI tier ``hf`` runs these beside transformers 5 and torch==2.13.0
(``CKPTOOL_HF_TIER=1``: there a missing transformers is a failure, not a skip)."""

import json
import os

import numpy as np
import pytest
from test_export import CASES, DATA, body_only, case, expected, export, folder

pytestmark = pytest.mark.hf

if os.environ.get("CKPTOOL_HF_TIER"):
    import torch
    import transformers
else:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")


def test_transformers_is_5():
    assert int(transformers.__version__.split(".")[0]) >= 5


def load(out):
    config = transformers.AutoConfig.from_pretrained(out)
    cls = getattr(transformers, config.architectures[0])
    return cls.from_pretrained(out, output_loading_info=True)


@pytest.mark.parametrize("name", CASES)
def test_from_pretrained_loads_the_tf_loaders_weights(name, tmp_path):
    out = tmp_path / "out"
    r = export(name, out, "--max-shard-size", "4KB" if name == "t5_v1_1" else "5GB")
    assert r.returncode == 0, r.stderr
    model, info = load(out)
    assert type(model).__name__ == case(name)["architecture"]
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    state = model.state_dict()
    for k, want in expected(name).items():
        got = state[k].detach().to(torch.float64).numpy()
        assert got.shape == want.shape, k
        assert np.array_equal(got, want.astype(np.float64)), k
    if json.loads((out / "config.json").read_text())["dtype"] == "bfloat16":
        assert model.dtype == torch.bfloat16


@pytest.mark.parametrize("name, drop", [("bert_pretraining", ("cls/",)), ("albert", ("cls/",)),
                                        ("mobilenet_v1", ("MobilenetV1/Logits/",))])
def test_base_models_load_clean(name, drop, tmp_path):
    from clirun import completed

    args = [DATA / name / a if (DATA / name / a).exists() else a for a in case(name)["args"]]
    r = completed("convert", body_only(name, tmp_path, drop), tmp_path / "out", "--to", "hf", *args)
    assert r.returncode == 0, r.stderr
    _, info = load(tmp_path / "out")
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info


def test_tied_weights_follow_the_embeddings(tmp_path):
    assert export("gpt2", tmp_path / "gpt2").returncode == 0
    model, _ = load(tmp_path / "gpt2")
    assert torch.equal(model.lm_head.weight, model.transformer.wte.weight)
    assert export("bert_pretraining", tmp_path / "bert").returncode == 0
    model, _ = load(tmp_path / "bert")
    assert torch.equal(model.cls.predictions.decoder.weight, model.bert.embeddings.word_embeddings.weight)


def test_auto_tokenizer(tmp_path):
    out = tmp_path / "bert"
    assert export("bert_pretraining", out).returncode == 0
    tok = transformers.AutoTokenizer.from_pretrained(out)
    vocab = (DATA / "bert_pretraining" / "vocab.txt").read_text().splitlines()
    ids = tok("Hello, World cats!")["input_ids"]  # uncased: lower-cased before WordPiece
    assert [vocab[i] for i in ids] == ["[CLS]", "hello", ",", "world", "cat", "##s", "!", "[SEP]"]
    cased = tmp_path / "cased"
    cased.mkdir()
    (cased / "vocab.txt").write_text("\n".join(vocab).replace("hello", "Hello") + "\n")
    assert export("bert_pretraining", tmp_path / "bert2", "--vocab", cased / "vocab.txt").returncode == 0
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "bert2")
    assert tok.convert_ids_to_tokens(tok("Hello hello")["input_ids"]) == ["[CLS]", "Hello", "[UNK]", "[SEP]"]
    assert export("gpt2", tmp_path / "gpt2").returncode == 0
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "gpt2")
    assert tok("the")["input_ids"] == [257]


def test_auto_tokenizer_sentencepiece(tmp_path):
    pytest.importorskip("sentencepiece") if not os.environ.get("CKPTOOL_HF_TIER") else None
    out = tmp_path / "t5"
    assert export("t5_v1_1", out).returncode == 0
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert type(tok).__name__.startswith("T5Tokenizer")
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(DATA / "t5_v1_1" / "spiece.model"))
    assert tok("the quick fox")["input_ids"] == sp.encode("the quick fox") + [1]  # T5 ends with </s>


@pytest.mark.slow
@pytest.mark.parametrize("old_shard, new_shard", [("2KB", "5GB"), ("5GB", "2KB")])
def test_an_overwrite_killed_anywhere_loads_old_or_new_or_not_at_all(old_shard, new_shard, tmp_path):
    """tests/hf/test_export_killed.py's kills, judged by from_pretrained: each folder a kill leaves
    loads as the old export or the new one (config and every weight), or does not load."""
    from test_export_killed import sweep

    judged = {}

    def judge(out, kind):
        files = tuple(sorted(p.name for p in out.iterdir() if ".tempstate" not in p.name))
        if (kind, files) in judged:
            return
        if kind == "none":
            with pytest.raises((OSError, ValueError)):
                load(out)
        else:
            model, info = load(out)
            assert not info["missing_keys"] and not info["unexpected_keys"], info
            want = tmp_path / ("old" if kind == "old" else "want")
            ref = {k: np.asarray(v, np.float64) for k, v in folder(want).items()}
            state = model.state_dict()
            assert all(np.array_equal(state[k].detach().to(torch.float64).numpy(), v) for k, v in ref.items()), files
            assert model.config.initializer_range == json.loads((want / "config.json").read_text())[
                "initializer_range"]
        judged[(kind, files)] = True

    sweep(tmp_path, old_shard, new_shard, judge)
    assert {k for k, _ in judged} == {"old", "new", "none"}
