"""``ckptool rewrite-names`` and ckptool.ops.transform.rename: rules, collisions, object graphs, fast path, safety."""

import contextlib
import io
import json
import os
import pathlib
import sys
import types

import numpy as np
import pytest

import ckptool
from ckptool.cli.main import main
from ckptool.errors import CkptError
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph
from ckptool.format.slots import is_optimizer_name
from ckptool.ops.transform.rename.assignment import plan_names
from ckptool.ops.transform.rename.rules import Renamer, parse_map, parse_rule

DATA = pathlib.Path(__file__).parents[1] / "data"
VV = "/.ATTRIBUTES/VARIABLE_VALUE"


def run(*argv, code=0, stdin=None):
    """ckptool's own entry point (error handling and exit codes included), in-process."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(a) for a in argv])
        rc = 0
    except SystemExit as exc:
        rc = exc.code or 0
    finally:
        sys.stdin = old_stdin
    r = types.SimpleNamespace(stdout=out.getvalue(), stderr=err.getvalue(), output=out.getvalue() + err.getvalue())
    assert rc == code, r.output
    return r


@pytest.fixture
def tf1(tmp_path):
    p = str(tmp_path / "src" / "model.ckpt-5")
    ckptool.write(p, {"dense/kernel": np.arange(12, dtype=np.float32).reshape(4, 3),
                      "dense/bias": np.float32([1, 2, 3]), "global_step": np.int64(5),
                      "dense/kernel/Adam": np.zeros((4, 3), np.float32),
                      "dense/kernel/Adam_1": np.ones((4, 3), np.float32),
                      "beta1_power": np.float32(0.9), "emb/table": np.array([b"a", b"\xff"], dtype=object)},
                  sync=False)
    return p


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize("rule,name,want", [
    ("a/b=c/d", "a/b", "c/d"),
    ("a/b=c/d", "a/bc", "a/bc"),
    ("a/=x/", "a/b/c", "x/b/c"),
    ("a/=/", "a/b", "b"),
    ("/=scope/", "w", "scope/w"),
    (r"re:layer_(\d+)/(.*)=block\1/\2", "layer_3/kernel", "block3/kernel"),
    (r"re:(?P<n>\w+)=v_\g<n>", "w", "v_w"),
    ("re:a=b", "ab", "ab"),  # full match only
])
def test_rule_forms(rule, name, want):
    assert Renamer([parse_rule(rule)])(name) == want


def test_exact_beats_prefix_and_longest_prefix_wins():
    r = Renamer(parse_map({"a/": "x/", "a/b/": "y/", "a/b/c": "exact"}))
    assert [r("a/b/c"), r("a/b/d"), r("a/z")] == ["exact", "y/d", "x/z"]


@pytest.mark.parametrize("bad", ["noequals", "a/=b", "/=b", "=x", "re:(=x"])
def test_bad_rules_are_errors(bad):
    with pytest.raises(CkptError):
        parse_rule(bad)


def test_optimizer_names():
    for n in ["dense/kernel/Adam", "dense/kernel/Adam_1", "w/Momentum", "beta1_power", "beta2_power_1",
              "optimizer/iter" + VV, "v/.OPTIMIZER_SLOT/optimizer/m" + VV]:
        assert is_optimizer_name(n), n
    for n in ["dense/kernel", "Adam_layer/kernel", "global_step", "model/adam" + VV]:
        assert not is_optimizer_name(n), n


def test_collision_is_an_error_naming_both():
    with pytest.raises(CkptError, match="'a'.*'b'.*-> 'c'"):
        plan_names(["a", "b"], [parse_rule("a=c"), parse_rule("b=c")])


# --------------------------------------------------------------------------- CLI, name-based


def test_rename_values_and_fast_path_links_data(tf1, tmp_path):
    dst = tmp_path / "out" / "ck"
    r = run("rewrite-names", tf1, dst, "--rule", "dense/=model/dense/", "--json")
    plan = json.loads(r.stdout)
    assert plan["fast_path"] and plan["renamed"] == 4 and plan["dropped"] == []
    with ckptool.open(tf1) as a, ckptool.open(str(dst)) as b:
        assert b.names() == sorted(["model/dense/kernel", "model/dense/bias", "global_step",
                                    "model/dense/kernel/Adam", "model/dense/kernel/Adam_1", "beta1_power",
                                    "emb/table"])
        assert b.read("model/dense/kernel").tobytes() == a.read("dense/kernel").tobytes()
        assert b.read("emb/table").tolist() == [b"a", b"\xff"]
        assert all(err is None for _, err in b.verify())
    assert os.stat(str(dst) + ".data-00000-of-00001").st_nlink == 2  # linked, not copied
    assert os.stat(tf1 + ".data-00000-of-00001").st_nlink == 2


def test_compact_copies_only_what_is_kept(tf1, tmp_path):
    dst = tmp_path / "small"
    run("rewrite-names", tf1, dst, "--strip-optimizer", "--compact")
    with ckptool.open(str(dst)) as ck:
        assert ck.names() == ["dense/bias", "dense/kernel", "emb/table", "global_step"]
        assert ck.total_bytes() == 48 + 12 + 8 + ck.variable("emb/table").nbytes
    assert os.stat(str(dst) + ".data-00000-of-00001").st_nlink == 1
    assert os.path.getsize(str(dst) + ".data-00000-of-00001") < os.path.getsize(tf1 + ".data-00000-of-00001")


def test_dry_run_writes_nothing_and_prints_the_plan(tf1, tmp_path):
    dst = tmp_path / "nothing"
    r = run("rewrite-names", tf1, dst, "--drop", "*/Adam*", "--dry-run", "--json")
    plan = json.loads(r.stdout)
    assert plan["dropped"] == ["dense/kernel/Adam", "dense/kernel/Adam_1"]
    assert {"old": "global_step", "new": "global_step"} in plan["tensors"]
    assert not list(tmp_path.glob("nothing*"))


def test_strict_unmatched_rule_fails_and_writes_nothing(tf1, tmp_path):
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "nope=yes", "--strict", code=1)
    assert "ckptool: error:" in r.output and "nope=yes" in r.output
    assert not list(tmp_path.glob("x*"))
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "nope=yes", code=1)  # an error by default
    assert "nope=yes" in r.output and "--allow-unused" in r.output and not list(tmp_path.glob("x*"))
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "nope=yes", "--allow-unused")
    assert "nope=yes matches no variable" in r.stderr and r.stdout == ""


def test_collision_from_the_cli_writes_nothing(tf1, tmp_path):
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "dense/bias=w", "--rule", "global_step=w", code=1)
    assert "two sources land on one name" in r.output and not list(tmp_path.glob("x*"))


def test_existing_dst_needs_force_and_src_is_never_dst(tf1, tmp_path):
    dst = tmp_path / "d"
    run("rewrite-names", tf1, dst, "--rule", "global_step=step")
    r = run("rewrite-names", tf1, dst, "--rule", "global_step=step2", code=1)
    assert "--force" in r.output
    run("rewrite-names", tf1, dst, "--rule", "global_step=step2", "--force")
    with ckptool.open(str(dst)) as ck:
        assert "step2" in ck and "step" not in ck
    before = pathlib.Path(tf1 + ".index").read_bytes()
    r = run("rewrite-names", tf1, tf1, "--rule", "global_step=x", "--force", code=1)
    assert "SRC is never modified" in r.output
    assert pathlib.Path(tf1 + ".index").read_bytes() == before


def test_map_file_errors_are_one_line(tf1, tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    r = run("rewrite-names", tf1, tmp_path / "x", "--map", bad, code=1)
    assert r.output.startswith("ckptool: error:") and "m.json" in r.output
    bad.write_text('["a", "b"]')
    r = run("rewrite-names", tf1, tmp_path / "x", "--map", bad, code=2)  # a bad map is a usage error
    assert "JSON object" in r.output
    run("rewrite-names", tf1, tmp_path / "x", code=2)  # nothing to do is a usage error


def test_template_missing_lists_closest_source_names(tf1, tmp_path):
    tmpl = str(tmp_path / "t" / "ckpt-0")
    ckptool.write(tmpl, {"net/dens/kernel" + VV: np.zeros((4, 3), np.float32)}, sync=False)
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "dense/=net/dense/", "--template", tmpl,
            "--allow-unused", code=1)
    assert "net/dens/kernel" + VV in r.output and "closest in SRC: dense/kernel" in r.output
    assert not list(tmp_path.glob("x*"))


def test_bad_rules_are_usage_errors(tf1, tmp_path):
    for rule in ("re:[=x", "noequals", "a/=b"):
        r = run("rewrite-names", tf1, tmp_path / "x", "--rule", rule, code=2)
        assert "--rule" in r.output
    assert not list(tmp_path.glob("x*"))


def test_map_from_stdin(tf1, tmp_path):
    run("rewrite-names", tf1, tmp_path / "s", "--map", "-", stdin='{"/": "net/"}')
    with ckptool.open(str(tmp_path / "s")) as ck:
        assert all(n.startswith("net/") for n in ck.names())


def test_partitioned_fixture_keeps_its_slices(tmp_path):
    src = DATA / "partitioned" / "model.ckpt"
    if not src.with_suffix(".ckpt.index").exists():
        pytest.skip("fixture not generated")
    for extra in ([], ["--compact"]):
        dst = tmp_path / f"p{len(extra)}"
        run("rewrite-names", src, dst, "--rule", "emb/=embedding/", *extra)
        with ckptool.open(str(src)) as a, ckptool.open(str(dst)) as b:
            assert b.read("embedding/weights").tobytes() == a.read("emb/weights").tobytes()
            assert b.variable("embedding/weights").shape == a.variable("emb/weights").shape
            assert all(err is None for _, err in b.verify())


# --------------------------------------------------------------------------- object-based


def _object_ckpt(path):
    keys = {"model/enc/w" + VV: np.arange(6, dtype=np.float32).reshape(2, 3),
            "model/enc/b" + VV: np.float32([1, 2, 3]),
            "model/enc/w/.OPTIMIZER_SLOT/optimizer/m" + VV: np.full((2, 3), 0.5, np.float32),
            "optimizer/iter" + VV: np.int64(10),
            "save_counter" + VV: np.int64(1)}
    ckptool.write(path, keys, sync=False)
    return keys


def _graph(path):
    with ckptool.open(path) as ck:
        return ck.object_graph()


def test_object_rename_moves_objects_and_keeps_slot_references(tmp_path):
    src = str(tmp_path / "o" / "ckpt-1")
    _object_ckpt(src)
    dst = str(tmp_path / "n" / "ckpt-1")
    run("rewrite-names", src, dst, "--rule", "model/enc/=model/encoder/")
    g = _graph(dst)
    paths = {v: k for k, v in g.paths().items()}
    w = paths["model/encoder/w"]
    assert "model/enc" not in paths  # the emptied object is gone
    (owner, var, slot), = g.slot_owners().values()
    assert var == w and slot == "m" and owner == paths["optimizer"]
    with ckptool.open(dst) as ck:
        assert "model/encoder/w/.OPTIMIZER_SLOT/optimizer/m" + VV in ck
        assert sorted(g.keys()) == sorted(n for n in ck.names() if n != OBJECT_GRAPH_KEY)


def test_object_strip_optimizer_drops_slots_and_optimizer(tmp_path):
    src = str(tmp_path / "o" / "ckpt-1")
    _object_ckpt(src)
    dst = str(tmp_path / "n" / "ckpt-1")
    r = run("rewrite-names", src, dst, "--strip-optimizer", "--json")
    assert sorted(json.loads(r.stdout)["dropped"]) == ["model/enc/w/.OPTIMIZER_SLOT/optimizer/m" + VV,
                                                       "optimizer/iter" + VV]
    g = _graph(dst)
    assert not g.slot_owners() and "optimizer" not in g.paths().values()
    assert all(n.has_checkpoint_values for n in g.nodes)


def test_edit_keeps_aliases_and_rekeys_what_ran_through_the_optimizer():
    """Keras 3: a variable keyed optimizer/_trainable_variables/0 is also model/dense/kernel."""
    g = ObjectGraph.from_keys(["optimizer/_trainable_variables/0" + VV, "optimizer/iter" + VV])
    paths = {v: k for k, v in g.paths().items()}
    var = paths["optimizer/_trainable_variables/0"]
    root = g.nodes[0]
    from ckptool.format.objgraph import Node

    model, dense = len(g.nodes), len(g.nodes) + 1
    g.nodes += [Node(model, children=[("dense", dense)]), Node(dense, children=[("kernel", var)])]
    root.children.append(("model", model))
    out, keys = g.edited({}, set(), strip_optimizer=True)
    assert keys == {"optimizer/_trainable_variables/0" + VV: "model/dense/kernel" + VV,
                    "optimizer/iter" + VV: None}
    assert out.keys() == ["model/dense/kernel" + VV]
    assert set(out.paths().values()) == {"", "model", "model/dense", "model/dense/kernel"}


def test_moving_onto_an_existing_object_is_an_error(tmp_path):
    src = str(tmp_path / "o" / "ckpt-1")
    _object_ckpt(src)
    r = run("rewrite-names", src, tmp_path / "x", "--rule",
            "model/enc/w/.ATTRIBUTES/VARIABLE_VALUE=model/enc/b/.ATTRIBUTES/VARIABLE_VALUE", code=1)
    assert "two sources land on one name" in r.output


def test_name_based_to_object_keys_gets_a_graph(tf1, tmp_path):
    dst = str(tmp_path / "o")
    run("rewrite-names", tf1, dst, "--rule", r"re:dense/(kernel|bias)=model/dense/\1/.ATTRIBUTES/VARIABLE_VALUE",
        "--strip-optimizer", "--drop", "emb/*", "--drop", "global_step")
    with ckptool.open(dst) as ck:
        assert ck.is_object_based
        assert sorted(ck.object_graph().keys()) == ["model/dense/bias" + VV, "model/dense/kernel" + VV]


def test_template_reports_missing_unused_and_mismatched(tf1, tmp_path):
    tmpl = str(tmp_path / "t" / "ckpt-0")
    ckptool.write(tmpl, {"model/dense/kernel" + VV: np.zeros((4, 3), np.float32),
                         "model/dense/bias" + VV: np.zeros(4, np.float32),  # shape differs
                         "model/extra" + VV: np.zeros(2, np.float32)}, sync=False)
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "dense/=model/dense/", "--template", tmpl,
            "--strict", "--strip-optimizer", code=1)
    assert "model/extra" + VV in r.output and "mismatch" in r.output and "global_step" in r.output
    r = run("rewrite-names", tf1, tmp_path / "x", "--rule", "dense/=model/dense/", "--template", tmpl,
            "--dry-run", "--json", code=1)
    assert "mismatch" in r.output


def test_template_fills_from_src_and_keeps_the_rest(tf1, tmp_path):
    tmpl = str(tmp_path / "t" / "ckpt-0")
    ckptool.write(tmpl, {"model/dense/kernel" + VV: np.zeros((4, 3), np.float32),
                         "model/extra" + VV: np.full(2, 9, np.float32)}, sync=False)
    dst = str(tmp_path / "d" / "ckpt-1")
    r = run("rewrite-names", tf1, dst, "--rule", "dense/=model/dense/", "--template", tmpl, code=1)
    assert "model/extra" + VV in r.output and "--allow-missing" in r.output and not (tmp_path / "d").exists()
    r = run("rewrite-names", tf1, dst, "--rule", "dense/=model/dense/", "--template", tmpl, "--json",
            "--allow-missing")
    assert "model/extra" + VV in r.stderr and "template's value" in r.stderr
    doc = json.loads(r.stdout)["template"]
    assert doc["from_src"] == [{"key": "model/dense/kernel" + VV, "source": "dense/kernel"}]
    assert doc["missing"] == ["model/extra" + VV] and "global_step" in doc["unused"]
    with ckptool.open(dst) as ck, ckptool.open(tf1) as src:
        assert ck.read("model/dense/kernel" + VV).tobytes() == src.read("dense/kernel").tobytes()
        assert ck.read("model/extra" + VV).tolist() == [9, 9]
        assert sorted(ck.object_graph().keys()) == sorted(n for n in ck.names() if n != OBJECT_GRAPH_KEY)


BERT = {"bert/embeddings/word_embeddings": (30, 8), "bert/encoder/layer_0/attention/self/query/kernel": (8, 8),
        "bert/encoder/layer_0/attention/self/query/bias": (8,), "cls/predictions/output_bias": (30,)}


def _bert(tmp_path):
    vals = {}
    for n, shape in BERT.items():
        vals[n] = np.full(shape, 1.5, np.float32)
        vals[n + "/adam_m"] = np.zeros(shape, np.float32)
        vals[n + "/adam_v"] = np.ones(shape, np.float32)
    vals["global_step"] = np.int64(1000)
    src = str(tmp_path / "bert" / "model.ckpt-1000")
    ckptool.write(src, vals, sync=False)
    return src


def test_strip_optimizer_knows_bert_and_dry_run_lists_what_goes(tmp_path):
    src = _bert(tmp_path)
    dst = tmp_path / "small" / "model.ckpt-1000"
    r = run("rewrite-names", src, dst, "--strip-optimizer", "--dry-run")
    gone = sorted(n + s for n in BERT for s in ("/adam_m", "/adam_v"))
    assert sorted(line.split()[0] for line in r.stdout.splitlines() if "(dropped)" in line) == gone
    assert "would write" in r.stderr and f"{len(gone)} dropped" in r.stderr
    assert not dst.parent.exists()
    r = run("rewrite-names", src, dst, "--strip-optimizer")
    assert r.stdout == ""  # status on stderr only
    with ckptool.open(str(dst)) as ck:
        assert sorted(ck.names()) == sorted([*BERT, "global_step"])


def test_rename_copies_bytes_without_numpy(tf1, tmp_path):
    """A V2 rename decodes no tensor, so numpy is never imported (its import is most of the time)."""
    from clirun import imports_numpy

    for extra in ([], ["--compact"], ["--strip-optimizer"]):
        assert not imports_numpy("-q", "rewrite-names", tf1, tmp_path / "o", "--rule", "dense/=model/dense/",
                                 "--force", *extra), extra
    with ckptool.open(str(tmp_path / "o")) as ck:
        assert "model/dense/kernel" in ck.names()


def _summary(r):
    return [line.replace("would write", "wrote").split("; data files")[0]
            for line in r.stderr.splitlines() if line.startswith("# ")]


def test_dry_run_reports_what_the_real_run_does(tf1, tmp_path):
    tmpl = str(tmp_path / "t" / "ckpt-0")
    ckptool.write(tmpl, {"model/dense/kernel" + VV: np.zeros((4, 3), np.float32),
                         "model/extra" + VV: np.full(2, 9, np.float32)}, sync=False)
    cases = [["--rule", "dense/=model/dense/", "--drop", "emb*"],
             ["--rule", "dense/=model/dense/", "--template", tmpl, "--allow-missing"]]
    for i, args in enumerate(cases):
        dst = str(tmp_path / f"d{i}" / "ckpt-1")
        dry = run("rewrite-names", tf1, dst, *args, "--dry-run")
        real = run("rewrite-names", tf1, dst, *args)
        assert _summary(dry) == _summary(real) and _summary(real), (dry.stderr, real.stderr)
        dry_json = json.loads(run("rewrite-names", tf1, dst + "x", *args, "--dry-run", "--json").stdout)
        real_json = json.loads(run("rewrite-names", tf1, dst + "x", *args, "--json").stdout)
        real_json.pop("files", None)
        assert dry_json == real_json


def _v1_with_graph(path, graph: bytes, w):
    """A V1 (TensorSliceWriter) file of a float32 tensor ``w`` and a string tensor holding an
    object graph, built from the protos as TF lays them out (docs/FORMAT.md §9)."""
    from ckptool.format import dtypes
    from ckptool.format.objgraph import OBJECT_GRAPH_KEY
    from ckptool.format.protos.tensor_bundle_pb2 import SavedTensorSlices
    from ckptool.format.slices import encode_tensor_name_slice
    from ckptool.format.table_build import TableBuilder

    meta = SavedTensorSlices()
    items = []
    for name, dtype, shape in (("w", "float32", w.shape), (OBJECT_GRAPH_KEY, "string", ())):
        t = meta.meta.tensor.add(name=name, type=dtypes.from_name(dtype).value)
        for d in shape:
            t.shape.dim.add(size=d)
        full = tuple((0, -1) for _ in shape)
        sl = t.slice.add()
        for _ in shape:
            sl.extent.add()
        data = SavedTensorSlices()
        data.data.name = name
        data.data.slice.CopyFrom(sl)
        data.data.data.dtype = t.type
        if dtype == "string":
            data.data.data.string_val.append(graph)
        else:
            data.data.data.float_val.extend(w.reshape(-1).tolist())
        items.append((encode_tensor_name_slice(name.encode(), full), data.SerializeToString()))
    items.append((b"", meta.SerializeToString()))
    with open(path, "wb") as f:
        tb = TableBuilder(f)
        for k, v in sorted(items):
            tb.add(k, v)
        tb.finish()


def test_v1_source_with_an_object_graph_keeps_it(tmp_path):
    """A V1 file whose graph is a string tensor (no raw entry to copy): the graph is
    kept as its value, and the output restores under the same graph."""
    with ckptool.open(str(DATA / "keras_adam" / "ckpt-1")) as ck:
        graph = ck.object_graph().serialize()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    src = str(tmp_path / "v1ckpt")
    _v1_with_graph(src, graph, w)
    with ckptool.open(src) as ck:
        assert ck.format == "V1" and ck.is_object_based
    for rule, name in (("nothing/=x/", "w"), ("w=v", "v")):  # the graph kept as it is; rebuilt
        out = str(tmp_path / name / "ckpt-1")
        run("rewrite-names", src, out, "--rule", rule, "--allow-unused")
        with ckptool.open(out) as ck:
            np.testing.assert_array_equal(ck.read(name), w)
            assert ck.is_object_based


def test_a_map_goes_through_the_one_bounded_json_reader(tmp_path, capsys):
    """Issue 50: --map nested 100,000 deep, or with a 400-digit number, is one error line, not a
    RecursionError traceback."""
    import numpy as np

    import ckptool
    from clirun import run

    ckptool.write(str(tmp_path / "ckpt-1"), {"a/b": np.zeros(2, np.float32)}, sync=False)
    for text, said in (("[" * 100000 + "]" * 100000, "nested too deep"), ('{"a": ' + "1" * 400 + "}", "400 digits")):
        (tmp_path / "map.json").write_text(text)
        code, out, err = run(capsys, "rewrite-names", tmp_path / "ckpt-1", tmp_path / "out", "--map", tmp_path / "map.json")
        assert code == 1 and err.startswith("ckptool: error: ") and said in err and "Traceback" not in err
        assert err.count("\n") == 1
