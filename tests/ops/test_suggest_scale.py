"""Rules that match nothing, by the thousand (issue 42): the error is one short line, a few rules
shown with suggestions found through one index of the names, the rest counted. Counted, never
timed: the names difflib compares, and the questions asked of the index."""

import difflib
import json

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.ops.read import suggest
from ckptool.ops.read.suggest import SCAN_ALL, Suggester, listed, shorten
from ckptool.ops.transform.rename.assignment import plan_names
from ckptool.ops.transform.rename.rules import parse_map
from clirun import completed

VV = "/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture
def compared(monkeypatch):
    """How many names difflib compares with a typed one (each one set_seq1 call)."""
    counts = {"n": 0}
    real = difflib.SequenceMatcher.set_seq1

    def counted(self, a):
        counts["n"] += 1
        return real(self, a)

    monkeypatch.setattr(difflib.SequenceMatcher, "set_seq1", counted)
    return counts


def _names(n):
    return [f"model/v{i}{VV}" for i in range(n)] + ["save_counter" + VV, "_CHECKPOINTABLE_OBJECT_GRAPH"]


def test_3000_rules_that_miss_fail_in_one_short_line(monkeypatch, compared):
    names = _names(5000)
    asked = []
    real = Suggester.closest
    monkeypatch.setattr(Suggester, "closest", lambda self, name: asked.append(name) or real(self, name))
    rules = parse_map({f"model/v/{i}": f"net/w{i}" for i in range(3000)})  # the short form: no such names
    with pytest.raises(CkptError) as info:
        plan_names(names, rules, allow_unused=False)
    msg = str(info.value)
    assert len(msg) < 1000 and "\n" not in msg, msg
    assert msg.startswith("these rules match no source name: model/v/0=net/w0 (did you mean "
                          f"'model/v0{VV}'?), model/v/1=net/w1 (did you mean 'model/v1{VV}'?), "
                          f"model/v/2=net/w2 (did you mean 'model/v2{VV}'?) and 2,997 more"), msg
    assert len(asked) == 3  # the rules shown; the other 2,997 are counted, not looked up
    assert compared["n"] == 0  # punctuation apart, the name is there: no fuzzy comparison at all


def test_a_typo_among_many_names_is_found_comparing_a_few(compared):
    names = [f"block_{b:03d}/layer_{i:02d}/{k}" for b in range(100) for i in range(50) for k in ("kernel", "bias")]
    assert len(names) > SCAN_ALL
    index = Suggester(names)
    assert index.closest("block_042/layer_17/kernal") == ["block_042/layer_17/kernel"]  # the typo last
    assert index.closest("blokc_042/layer_17/bias") == ["block_042/layer_17/bias"]  # and first
    assert 0 < compared["n"] <= 2 * 4 * suggest.NEIGHBOURS  # two questions, ~2 x 2 x 24 neighbours each
    assert Suggester(names[:100] + ["block_042/layer_17/kernel"]).closest("block_042/layer_17/kernal") == [
        "block_042/layer_17/kernel"]  # a few names: all compared, as before the index


def test_listed_and_shorten():
    assert listed(["a", "b", "c"], 3000) == "a, b, c and 2,997 more"
    assert listed(["a"], 1) == "a" and listed(["a", "b"], 2, sep="; ") == "a; b"
    assert shorten("x" * 10) == "x" * 10
    assert shorten("x" * 1000) == "x" * 200 + "... (800 more characters)"


def test_cli_3000_rule_miss_is_one_line(tmp_path):
    src = str(tmp_path / "src" / "ckpt")
    ckptool.write(src, {f"model/v{i}{VV}": np.full(2, i, np.float32) for i in range(50)}, sync=False)
    m = tmp_path / "map.json"
    m.write_text(json.dumps({f"model/v/{i}" + "x" * 500: f"net/w{i}" for i in range(3000)}))
    r = completed("rewrite-names", src, tmp_path / "out" / "ckpt", "--map", m)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr[:300]
    assert r.stderr.startswith("ckptool: error: these rules match no source name: ")
    assert "and 2,997 more (nothing written; --allow-unused accepts them)" in r.stderr
    assert len(r.stderr) < 2500  # each rule shown cut to 200 characters
    assert not (tmp_path / "out").exists()
