"""What ``inspect`` prints for a new user (issue 32): the directory's state beside a prefix too,
the object graph out of --all-tensors' values."""

import json

from clirun import completed


def test_inspect_of_a_prefix_shows_its_directorys_state(example):
    for arg in (example / "ckpt-5", example / "ckpt-5.index", example):
        out = completed("inspect", arg)
        assert out.returncode == 0, out.stderr
        assert f"state       {example / 'checkpoint'}" in out.stdout, arg
        rows = out.stdout.split("STEP", 1)[1].splitlines()[1:]
        assert [r.split()[0] for r in rows] == ["3", "4", "5"], arg
        assert rows[-1].split()[-2:] == ["latest", "ckpt-5"]
        doc = json.loads(completed("inspect", arg, "--json").stdout)
        assert [c["step"] for c in doc["state"]["entries"]] == [3, 4, 5]


def test_inspect_of_a_prefix_without_a_state_file_has_no_state(example):
    (example / "checkpoint").unlink()
    out = completed("inspect", example / "ckpt-4")
    assert out.returncode == 0 and "state" not in out.stdout and "STEP" not in out.stdout
    assert json.loads(completed("inspect", example / "ckpt-4", "--json").stdout)["state"] is None


def test_all_tensors_does_not_print_the_object_graph_bytes(example):
    out = completed("inspect", example / "ckpt-5", "--all-tensors")
    assert out.returncode == 0, out.stderr
    assert max(len(ln) for ln in out.stdout.splitlines()) < 200
    assert "b'\\n" not in out.stdout
    lines = out.stdout.splitlines()
    i = lines.index("_CHECKPOINTABLE_OBJECT_GRAPH  string  []")
    assert lines[i + 1] == "(the serialized object graph, 2.3 KiB: shown by inspect --tree)"
    assert "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE  int64  []" in lines


def test_the_object_graph_by_name_is_drawn_as_the_tree(example):
    out = completed("inspect", example / "ckpt-5", "--tensor", "_CHECKPOINTABLE_OBJECT_GRAPH")
    tree = completed("inspect", example / "ckpt-5", "--tree")
    assert out.returncode == 0 and tree.returncode == 0
    assert out.stdout.splitlines() == ["_CHECKPOINTABLE_OBJECT_GRAPH  string  []", *tree.stdout.splitlines()]


def test_json_keeps_the_object_graph_value_exact(example):
    docs = json.loads(completed("inspect", example / "ckpt-5", "--all-tensors", "--json").stdout)
    graph = next(d for d in docs if d["name"] == "_CHECKPOINTABLE_OBJECT_GRAPH")
    assert graph["value"]  # the bytes, as text or base64


def test_a_prefix_is_inspected_whatever_its_directorys_state(example):
    (example / "ckpt-3.data-00000-of-00001").unlink()
    (example / "ckpt-3.data-00000-of-00001").symlink_to("nowhere")  # a sibling's dangling file
    out = completed("inspect", example / "ckpt-5")
    assert out.returncode == 0, out.stderr
    (example / "checkpoint").write_text("garbage {{{")
    out = completed("inspect", example / "ckpt-5")
    assert out.returncode == 0 and "STEP" not in out.stdout
    assert "ckptool: warning: the directory's state is not shown: " in out.stderr
    assert completed("inspect", example).returncode == 1  # the directory itself: its state is the argument
