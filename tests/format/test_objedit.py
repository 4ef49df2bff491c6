"""The object graph edited as its node records (ckptool.format.objedit: rewrite-names, and through
ObjectGraph.edited convert, average, the Keras bridge and the slots' strip) gives byte for byte
what a reference model editing Node objects gives (tests/format/objgraph_reference.py, the
editor ObjectGraph.edited was), and the same final keys, on the
committed object-based fixtures under several rule sets (prefix moves, swaps, drops, stripped
optimizers, keys leaving the graph) and on a synthetic graph of thousands of objects."""

import glob
import os

import numpy as np
import objgraph_reference as reference
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.format.objedit import edit_records
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph
from ckptool.ops.transform.rename.rules import Renamer, parse_rule

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _object_based():
    out = []
    for index in sorted(glob.glob(os.path.join(DATA, "**", "*.index"), recursive=True)):
        try:
            with ckptool.open(index[:-6]) as ck:
                if ck.is_object_based:
                    out.append(index[:-6])
        except CkptError:
            continue
    return out


FIXTURES = _object_based()


def _cases(names):
    firsts = sorted({n.split("/")[0] for n in names if "/" in n}) or ["x"]
    mid = sorted(names)[len(names) // 2]
    return {
        "prefix": ([f"{firsts[0]}/=renamed/"], (), False),
        "strip": ([], (), True),
        "drop": ([f"{firsts[-1]}/=z/"], ("*bias*", "*kernel*"), False),
        "root": (["/=top/"], (), True),
        "exact": ([f"{mid}=a/b/.ATTRIBUTES/VARIABLE_VALUE"], (), False),
        "plain": ([f"{mid}=plain_name"], (), False),
        "swap": ([f"{firsts[0]}/={firsts[-1]}/", f"{firsts[-1]}/={firsts[0]}/"], (), False),
    }


def _compare(data, names, rules, drop, strip):
    renamer = Renamer([parse_rule(r) for r in rules])
    import fnmatch

    dropped = {n for n in names if any(fnmatch.fnmatch(n, g) for g in drop)}
    renames = {n: renamer(n) for n in names if n not in dropped and n != OBJECT_GRAPH_KEY}
    renames = {o: n for o, n in renames.items() if o != n}
    try:
        graph, keys = reference.edited(ObjectGraph.parse(data), renames, dropped, strip_optimizer=strip)
        expected = (graph.serialize(), keys)
    except CkptError as exc:
        expected = str(exc)
    try:
        out, changed = edit_records(data, renames, dropped, strip_optimizer=strip)
        got = (bytes(out), changed)
    except CkptError as exc:
        got = str(exc)
    assert got == expected
    if isinstance(got, tuple):  # ObjectGraph.edited is this edit, parsed
        graph, keys = ObjectGraph.parse(data).edited(renames, dropped, strip_optimizer=strip)
        assert (graph.serialize(), keys) == got
    return expected


@pytest.mark.parametrize("prefix", FIXTURES, ids=[os.path.relpath(p, DATA) for p in FIXTURES])
def test_edited_records_are_the_edited_graph(prefix):
    with ckptool.open(prefix) as ck:
        names = ck.names()
        data = ck.object_graph_bytes()
    results = [_compare(data, names, *case) for case in _cases(names).values()]
    assert any(isinstance(r, tuple) and r[0] != data for r in results)  # the graph did change


def test_fixtures_found():
    assert len(FIXTURES) >= 10
    assert any("keras_adam" in p for p in FIXTURES) and any("dtensor" in p for p in FIXTURES)


def test_many_objects_under_one_parent(tmp_path):
    """Thousands of objects: a prefix moved (every object detached and attached anew, the old
    scope emptied), part of it dropped, one object moved onto a free path."""
    prefix = str(tmp_path / "ckpt")
    suffix = "/.ATTRIBUTES/VARIABLE_VALUE"
    ckptool.write(prefix, {f"model/block_{i // 100:03d}/layer_{i % 100:02d}/{'wb'[i % 2]}" + suffix:
                           np.full(2, i, np.float32) for i in range(3000)}, sync=False)
    with ckptool.open(prefix) as ck:
        names = ck.names()
        data = ck.object_graph_bytes()
    for rules, drop in ((["model/=net/"], ()), (["model/block_001/=other/"], ("*/layer_1*",)),
                        ([f"model/block_002/layer_03/b{suffix}=solo/x{suffix}"], ()), (["/=top/"], ())):
        out = _compare(data, names, rules, drop, False)
        assert isinstance(out, tuple) and out[0] != data


@pytest.mark.parametrize("data", [b"\x0a\xff", b"\x0a\x05\x0a\x03\x08\x09", b"\xff\xff\xff", b"\x0a\x02\x0a"])
def test_unparsable_graphs_are_one_error(data):
    """Records running past the end, a child that is no node, bytes that are no graph: the
    CorruptError ObjectGraph.parse gives, naming the graph."""
    with pytest.raises(CkptError) as old:
        ObjectGraph.parse(data, "g").edited({"a/.ATTRIBUTES/V": "b/.ATTRIBUTES/V"})
    with pytest.raises(CkptError) as new:
        edit_records(data, {"a/.ATTRIBUTES/V": "b/.ATTRIBUTES/V"}, where="g")
    assert type(new.value) is type(old.value) and str(new.value) == str(old.value)


def test_a_graph_with_other_top_level_fields_is_edited_as_parsed(tmp_path):
    """A top level holding more than node records (an unknown field) is parsed whole, as
    protobuf reads it, then edited the same way."""
    prefix = str(tmp_path / "ckpt")
    ckptool.write(prefix, {"m/a/.ATTRIBUTES/VARIABLE_VALUE": np.zeros(2, np.float32)}, sync=False)
    with ckptool.open(prefix) as ck:
        data = ck.object_graph_bytes() + b"\x10\x07"  # field 2, a varint: unknown to TrackableObjectGraph
    renames = {"m/a/.ATTRIBUTES/VARIABLE_VALUE": "n/a/.ATTRIBUTES/VARIABLE_VALUE"}
    graph, _ = reference.edited(ObjectGraph.parse(data), renames)
    assert bytes(edit_records(data, renames)[0]) == graph.serialize()
