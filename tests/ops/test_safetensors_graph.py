"""A .safetensors source whose object graph is not a string scalar, or does not parse, is one
error line for convert and save --from, never a traceback or a checkpoint TF cannot load."""

import base64
import json
import struct

import pytest

from clirun import completed


def _st(path, meta, name="w"):
    header = {name: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "__metadata__": meta}
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"\0" * 8)
    return path


CASES = {
    "float-graph-by-name": ({}, "_CHECKPOINTABLE_OBJECT_GRAPH"),
    "float-graph-renamed": ({"ckptool.names": json.dumps({"w": "_CHECKPOINTABLE_OBJECT_GRAPH"})}, "w"),
    "garbage-graph": ({"ckptool.object_graph": base64.b64encode(b"\x0a\x02\x08\x01garbage\xff").decode()}, "w"),
    "truncated-graph": ({"ckptool.object_graph": base64.b64encode(b"\x0a\x05\x0a\x03\x08\x01\x12").decode()}, "w"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("how", ["tf", "safetensors", "short", "save"])
def test_bad_object_graph_is_one_error_line(tmp_path, case, how):
    meta, name = CASES[case]
    src = _st(tmp_path / "src.safetensors", meta, name)
    argv = {"tf": ["convert", src, tmp_path / "out"],
            "safetensors": ["convert", src, tmp_path / "out.safetensors"],
            "short": ["convert", src, tmp_path / "out.safetensors", "--names", "short"],
            "save": ["save", tmp_path / "out", "--from", src]}[how]
    r = completed(*argv)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckptool: error: ") and "src.safetensors" in lines[0], r.stderr
    assert "_CHECKPOINTABLE_OBJECT_GRAPH" in lines[0]
    assert not list(tmp_path.glob("out*"))
