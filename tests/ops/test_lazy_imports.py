"""Imports on first use: ml_dtypes only for bfloat16, float8, int4 ...; numpy not for an object graph."""

import numpy as np

import ckptool
from clirun import imports_module


def _float32_checkpoint(tmp_path):
    src = str(tmp_path / "src" / "ckpt")
    ckptool.write(src, {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, np.float32),
                        "step": np.array(3, np.int64)}, sync=False)
    return src


def test_cast_to_float16_and_listing_do_not_import_ml_dtypes(tmp_path):
    src = _float32_checkpoint(tmp_path)
    assert not imports_module("ml_dtypes", "-q", "convert", src, tmp_path / "half", "--cast", "float32=float16")
    with ckptool.open(str(tmp_path / "half")) as ck:
        assert ck.read("w").dtype == np.float16 and ck.read("w").tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not imports_module("ml_dtypes", "list-variables", src)
    assert not imports_module("ml_dtypes", "inspect", src, "--stats", "--json")


def test_bfloat16_still_imports_it(tmp_path):
    src = _float32_checkpoint(tmp_path)
    assert imports_module("ml_dtypes", "-q", "convert", src, tmp_path / "bf", "--cast", "float32=bfloat16")
    with ckptool.open(str(tmp_path / "bf")) as ck:
        assert ck.variable("w").dtype == "bfloat16"
        assert ck.read("w").astype(np.float32).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_object_based_rename_reads_the_graph_without_numpy(tmp_path):
    import os

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "keras_adam", "ckpt-1")
    out = tmp_path / "r" / "ckpt"
    argv = ("-q", "rewrite-names", src, out, "--rule", "re:optimizer/(.*)=opt/\\1")
    assert not imports_module("numpy", *argv)
    with ckptool.open(src) as a, ckptool.open(str(out)) as b:
        assert b.is_object_based
        assert b.object_graph() is not None and a.object_graph() is not None
        names = {n.replace("optimizer/", "opt/", 1) for n in a.names()}
        assert set(b.names()) == names
        for n in a.names():
            if n != "_CHECKPOINTABLE_OBJECT_GRAPH":
                assert a.read(n).tolist() == b.read(n.replace("optimizer/", "opt/", 1)).tolist()
