"""``save --from x.safetensors`` honours what ckptool keeps in a safetensors file's
``__metadata__`` (the object graph, string tensors, the original names of --names
short) exactly as ``convert x.safetensors DST`` does: one reader (ops.read.source) for both."""

import os
import shutil

import pytest

import ckptool
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.ops.transform.convert.run import convert
from ckptool.ops.transform.save import save
from clirun import run

pytest.importorskip("safetensors")
DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data")


def _contents(prefix):
    with ckptool.open(str(prefix)) as ck:
        out = {}
        for v in ck.variables():
            arr = ck.read(v.name)
            out[v.name] = (v.dtype, tuple(v.shape), arr.tolist() if arr.dtype == object else arr.tobytes())
        graph = ck.read(OBJECT_GRAPH_KEY).item() if ck.is_object_based else None
    return out, graph


@pytest.fixture
def keras(tmp_path):
    d = tmp_path / "keras"
    shutil.copytree(os.path.join(DATA, "keras_adam"), d)
    return d / "ckpt-1"


@pytest.mark.parametrize("names", ["full", "short"])
def test_save_from_safetensors_equals_convert_back(tmp_path, keras, names):
    st = tmp_path / "m.safetensors"
    convert(str(keras), str(st), names=names, sync=False)
    convert(str(st), str(tmp_path / "conv" / "ckpt-1"), sync=False)
    save(str(tmp_path / "saved" / "ckpt-1"), [str(st)], state=False, sync=False)
    conv, conv_graph = _contents(tmp_path / "conv" / "ckpt-1")
    saved, saved_graph = _contents(tmp_path / "saved" / "ckpt-1")
    assert saved == conv and saved_graph == conv_graph
    orig, orig_graph = _contents(keras)
    assert saved_graph is not None
    if names == "full":
        assert saved == orig and saved_graph == orig_graph  # names, dtypes, shapes, bytes, the graph
    else:  # short names hold the weights only (the graph pruned to them), under checkpoint names again
        assert all(k.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for k in saved if k != OBJECT_GRAPH_KEY)
        weights = [v for k, v in saved.items() if k != OBJECT_GRAPH_KEY]
        assert len(weights) == 5 and all(v in orig.values() for v in weights)


def test_save_from_safetensors_keeps_string_tensors(tmp_path):
    src = os.path.join(DATA, "strings", "strings")
    st = tmp_path / "s.safetensors"
    convert(src, str(st), sync=False)
    save(str(tmp_path / "o" / "ckpt-1"), [str(st)], state=False, sync=False)
    assert _contents(tmp_path / "o" / "ckpt-1") == _contents(src)


def test_the_cli_save_from_safetensors(tmp_path, keras, capsys):
    st = tmp_path / "m.safetensors"
    convert(str(keras), str(st), sync=False)
    code, out, err = run(capsys, "save", tmp_path / "o" / "ckpt-1", "--from", st, "--no-state")
    assert code == 0, err
    assert _contents(tmp_path / "o" / "ckpt-1") == _contents(keras)
