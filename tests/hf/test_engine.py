"""The one weight-map engine: a table's steps are parsed when the rules are built (a typo fails at
import), and the shape, the values and --dry-run's words all come from that one parsed form."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_export import DATA, body_only, case, completed

from ckptool.ops.transform.hf import ARCHS
from ckptool.ops.transform.hf.coverage import unfilled
from ckptool.ops.transform.hf.steps import STEPS
from ckptool.ops.transform.hf.weightmap import Arch, Rule, TableError, apply, describe, match, out_shape


@pytest.mark.parametrize("op, needle", [
    ("T squeze", "unknown step 'squeze'"), ("transpose", "unknown step"), ("merge", "takes 1"),
    ("merge:x", "bad argument"), ("perm:0,0,1", "not a permutation"), ("rows:", "bad argument"),
    ("take:0", "takes 2"), ("reshape:hidden_size,-", "bad argument"), ("part:0,1", "takes 3"),
])
def test_a_typo_in_a_step_raises_when_the_rule_is_built(op, needle):
    with pytest.raises(TableError, match=needle):
        Rule("a/kernel", "a.weight", op)


def test_a_bad_template_or_pattern_raises_when_built():
    with pytest.raises(TableError, match="names no group"):
        Rule(r"l_(?P<n>\d+)/kernel", "layer.{m}.weight")
    with pytest.raises(TableError, match="does not compile"):
        Rule(r"l_(?P<n>\d+/kernel", "layer.{n}.weight")
    with pytest.raises(TableError, match="reads group"):
        Rule(r"l_(?P<n>\d+)/kernel", "layer.{n}.weight", "take:0,k")
    with pytest.raises(TableError, match="NAME:AXIS"):
        Rule("r_w_bias", "layer.{k}.bias", "take:0,k", fan="k")
    with pytest.raises(TableError, match="does not compile"):
        Arch("x", "x", "x", "X", (), ("(",))


def test_a_family_module_with_a_typo_fails_at_import(tmp_path):
    (tmp_path / "fam.py").write_text(textwrap.dedent("""
        from ckptool.ops.transform.hf.weightmap import Arch, Rule
        ARCHS = [Arch("fam", "fam", "fam", "FamModel", (Rule("w", "w.weight", "T sqeeze"),), ("^w$",))]
    """))
    r = subprocess.run([sys.executable, "-c", "import fam"], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": f"{tmp_path}:{':'.join(sys.path)}"})
    assert r.returncode == 1 and "TableError" in r.stderr and "unknown step 'sqeeze'" in r.stderr


CONFIG = {"hidden_size": 6, "num_heads": 2, "vocab_size": 3, "big": 5}
CASES = [("T", (2, 3)), ("squeeze", (1, 2, 1, 3)), ("merge:2", (2, 3, 2)), ("flat", (2, 3)),
         ("perm:2,0,1", (2, 3, 4)), ("rows:vocab_size", (4, 2)), ("pad:big", (4, 2)),
         ("reshape:num_heads,-1", (2, 3)), ("reshape:hidden_size", (2, 3)), ("take:1,2", (2, 3)),
         ("take:0,k", (2, 3)), ("part:1,1,3", (2, 6)), ("squeeze T merge:1", (1, 2, 3, 2))]


def test_every_step_has_a_case():
    assert {w.split(":")[0] for op, _ in CASES for w in op.split()} == set(STEPS)


@pytest.mark.parametrize("op, shape", CASES)
def test_shape_values_and_words_agree(op, shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    groups = {"k": "1"}
    got = apply(op, x, CONFIG, groups)
    assert got.shape == out_shape(op, shape, CONFIG, "t", groups)
    assert describe(op) and "?" not in describe(op)
    ref = {"T": lambda: x.T, "squeeze": x.squeeze, "merge:2": lambda: x.reshape(6, 2), "flat": lambda: x.reshape(-1),
           "perm:2,0,1": lambda: x.transpose(2, 0, 1), "rows:vocab_size": lambda: x[:3],
           "pad:big": lambda: np.concatenate([x, np.zeros((1, 2), np.float32)]),
           "reshape:num_heads,-1": lambda: x.reshape(2, 3), "reshape:hidden_size": lambda: x.reshape(6),
           "take:1,2": lambda: x[:, 2], "take:0,k": lambda: x[1], "part:1,1,3": lambda: x[:, 2:4],
           "squeeze T merge:1": lambda: x.squeeze().T.reshape(2, 6)}[op]()
    assert np.array_equal(got, ref)


def _spec(name, shape):
    from ckptool.ops.read.spec import Spec

    return Spec(name, "float32", shape, lambda: np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def test_fan_makes_one_weight_per_index():
    arch = Arch("x", "x", "x", "X", (Rule("model/r_w_bias", "layer.{k}.r_w_bias", "take:0,k", fan="k:0"),), ())
    p = match(arch, [_spec("model/r_w_bias", (3, 2, 4))], {})
    assert [(pl.hf, pl.shape) for pl in p.placed] == [(f"layer.{i}.r_w_bias", (2, 4)) for i in range(3)]
    x = p.placed[0].spec.load()
    assert np.array_equal(apply(p.placed[2].op, x, {}, p.placed[2].groups), x[2])


def test_unfilled_weights_are_named():
    arch = next(a for a in ARCHS if a.name == "bert-pretraining")
    from ckptool.ops.read.source import open_specs

    src = open_specs(str(DATA / "bert_pretraining" / "model.ckpt"))
    try:
        specs = src.specs
        assert unfilled(match(arch, specs)) == []
        less = [s for s in specs if "position_embeddings" not in s.name and "layer_1/attention/self/key/" not in s.name]
        assert unfilled(match(arch, less)) == ["bert.embeddings.position_embeddings.weight",
                                              "bert.encoder.layer.1.attention.self.key.weight",
                                              "bert.encoder.layer.1.attention.self.key.bias"]
    finally:
        src.close()


def test_every_family_fixture_fills_every_weight():
    from ckptool.ops.read.source import open_specs
    for name in sorted(p.name for p in DATA.iterdir() if (p / "case.json").is_file()):
        src = open_specs(str(DATA / name / case(name)["src"]))
        try:
            archs = [a for a in ARCHS if a.architecture == case(name)["architecture"]]
            assert any(unfilled(match(a, src.specs)) == [] for a in archs), name
        finally:
            src.close()


def test_a_release_without_position_embeddings_is_not_bert(tmp_path):
    """RoFormer's release: BERT's names, no position embeddings (rotary), its own bert_config.json."""
    src = body_only("bert_pretraining", tmp_path, ("bert/embeddings/position_embeddings",))
    r = completed("convert", src, tmp_path / "out", "--to", "hf", "--config", DATA / "bert_pretraining" /
                  "bert_config.json", "--dry-run", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["architecture"] == "RoFormerForMaskedLM", r.stderr
    r = completed("convert", src, tmp_path / "out", "--to", "hf", "--config", DATA / "bert_pretraining" /
                  "bert_config.json", "--arch", "bert")
    assert r.returncode == 1
    assert "'bert.embeddings.position_embeddings.weight'" in r.stderr and "at random" in r.stderr
    assert "traceback" not in r.stderr.lower() and not (tmp_path / "out").exists()
