"""``ckptool save``: sources, naming, object-based output, shards, --force, state and retention."""

import json
import os
import pathlib
import sys
import types

import ml_dtypes
import numpy as np
import pytest

import ckptool
from ckptool.format.objgraph import OBJECT_GRAPH_KEY
from ckptool.ops.transform.save import open_source, step_prefix
from clirun import run  # noqa: E402


def read_all(prefix):
    with ckptool.open(str(prefix)) as ck:
        return {v.name: ck.read(v.name) for v in ck.variables()}


@pytest.fixture
def srcs(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    np.savez(d / "a.npz", w=np.arange(6, dtype=np.float32).reshape(2, 3), **{"dense/k": np.ones((2, 2))},
             s=np.array([b"x", b"", b"\xff\x00"]))
    np.save(d / "step.npy", np.int64(42))
    return d


def test_save_npz_npy(capsys, tmp_path, srcs):
    code, out, err = run(capsys, "save", str(tmp_path / "out" / "ck"), "--from", str(srcs / "a.npz"),
                         "--from", str(srcs / "step.npy"), "--no-state", "--json")
    assert code == 0, err
    doc = json.loads(out)
    prefix = str(tmp_path / "out" / "ck")
    assert doc["prefix"] == prefix and doc["variables"] == 4 and doc["retention"] is None
    assert doc["files"] == [prefix + ".data-00000-of-00001", prefix + ".index"]
    assert doc["bytes"] == os.path.getsize(prefix + ".data-00000-of-00001")
    vals = read_all(prefix)
    np.testing.assert_array_equal(vals["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    assert vals["step"].item() == 42 and vals["step"].dtype == np.int64
    assert vals["s"].tolist() == [b"x", b"", b"\xff"]  # numpy 'S' arrays drop trailing NULs
    assert sorted(os.listdir(tmp_path / "out")) == ["ck.data-00000-of-00001", "ck.index"]


def test_save_text_output(capsys, tmp_path, srcs):
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(srcs / "step.npy"), "--no-state")
    # a status line: stderr; stdout carries data only (none here)
    assert code == 0 and out == "" and err.startswith(f"saved {tmp_path / 'ck'}: 1 variable, 8 B in 2 files")


def test_save_safetensors_keeps_bfloat16_and_float8(capsys, tmp_path):
    from safetensors.numpy import save_file

    vals = {"bf": np.array([1.5, -2, 3e38], dtype=ml_dtypes.bfloat16),
            "f8": np.array([0.5, -448], dtype=ml_dtypes.float8_e4m3fn),
            "f8b": np.array([2, -57344], dtype=ml_dtypes.float8_e5m2),
            "f16": np.array([1, 2], np.float16), "i": np.arange(3, dtype=np.int32), "b": np.array([True, False])}
    save_file(vals, str(tmp_path / "m.safetensors"))
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(tmp_path / "m.safetensors"),
                         "--no-state")
    assert code == 0, err
    got = read_all(tmp_path / "ck")
    for name, want in vals.items():
        assert got[name].dtype == want.dtype
        assert got[name].tobytes() == want.tobytes(), name


def test_safetensors_raw_fallback_and_corruption(tmp_path):
    from safetensors.numpy import save_file

    save_file({"f8": np.array([1, 2], dtype=ml_dtypes.float8_e4m3fn)}, str(tmp_path / "a.safetensors"))
    with open_source(str(tmp_path / "a.safetensors")) as src:  # bytes read at the header's offsets
        [(name, arr)] = list(src.items())
    assert name == "f8" and arr.dtype == ml_dtypes.float8_e4m3fn and arr.tolist() == [1, 2]
    (tmp_path / "bad.safetensors").write_bytes(b"\x00\x00\x00\x01" + b"\x00" * 4 + b"{}")
    with pytest.raises(ckptool.CorruptError, match="header length"):
        open_source(str(tmp_path / "bad.safetensors"))


def test_save_from_checkpoint_copies_bytes(capsys, tmp_path):
    src = tmp_path / "a"
    ckptool.write(str(src), {"b": np.arange(4, dtype=np.float32), "a": np.array([b"q", b""], dtype=object),
                             "m/x" + "/.ATTRIBUTES/VARIABLE_VALUE": np.ones(2)})
    code, out, err = run(capsys, "save", str(tmp_path / "b"), "--from", str(src), "--no-state")
    assert code == 0, err
    for suffix in (".index", ".data-00000-of-00001"):
        assert (tmp_path / ("a" + suffix)).read_bytes() == (tmp_path / ("b" + suffix)).read_bytes()


def test_save_from_partitioned_checkpoint_renamed(capsys, tmp_path):
    from ckptool.format import bundle
    from ckptool.ops.write.writer import BundleWriter

    full = np.arange(12, dtype=np.int32).reshape(4, 3)
    sl = [((0, 2), (0, -1)), ((2, 2), (0, -1))]
    with BundleWriter(str(tmp_path / "p")) as w:
        w.add_sliced("part", "int32", (4, 3), sl)
        w.add(bundle.encode_tensor_name_slice(b"part", sl[1]), full[2:])
        w.add(bundle.encode_tensor_name_slice(b"part", sl[0]), full[:2])
    code, out, err = run(capsys, "save", str(tmp_path / "o"), "--from", str(tmp_path / "p"), "--object-based",
                         "--no-state", "--json")
    assert code == 0, err
    with ckptool.open(str(tmp_path / "o")) as ck:
        key = "part/.ATTRIBUTES/VARIABLE_VALUE"
        assert ck.names() == [OBJECT_GRAPH_KEY, key]
        np.testing.assert_array_equal(ck.read(key), full)
        assert ck.variable(key).num_slices == 2


def test_global_step_and_padding(capsys, tmp_path, srcs):
    assert step_prefix("r/ck", 7) == "r/ck-7" and step_prefix("r/ck", 7, True) == "r/ck-00000007"
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(srcs / "step.npy"),
                         "--global-step", "12", "--pad-step-number", "--no-state", "--json")
    assert code == 0, err
    assert json.loads(out)["prefix"] == str(tmp_path / "ck-00000012")
    assert (tmp_path / "ck-00000012.index").exists()
    code, out, err = run(capsys, "save", str(tmp_path / "x"), "--from", str(srcs / "step.npy"),
                         "--pad-step-number", "--no-state")
    assert code == 2 and "--global-step" in err


def test_object_based_names(capsys, tmp_path, srcs):
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(srcs / "a.npz"),
                         "--object-based", "--no-state", "--json")
    assert code == 0, err
    assert json.loads(out)["object_graph_synthesized"] is True
    with ckptool.open(str(tmp_path / "ck")) as ck:
        assert ck.names() == [OBJECT_GRAPH_KEY, "dense/k/.ATTRIBUTES/VARIABLE_VALUE",
                              "s/.ATTRIBUTES/VARIABLE_VALUE", "w/.ATTRIBUTES/VARIABLE_VALUE"]
        g = ck.object_graph()
        assert g.nodes[0].children == [("w", 1), ("dense", 2), ("s", 3)]


def test_shards_and_force(capsys, tmp_path, srcs):
    prefix = str(tmp_path / "ck")
    code, _, err = run(capsys, "save", prefix, "--from", str(srcs / "a.npz"), "--shards", "2", "--no-state")
    assert code == 0, err
    assert sorted(os.listdir(tmp_path))[:2] == ["ck.data-00000-of-00002", "ck.data-00001-of-00002"]
    before = (tmp_path / "ck.index").read_bytes()
    code, out, err = run(capsys, "save", prefix, "--from", str(srcs / "step.npy"), "--no-state")
    assert code == 1 and err.startswith("ckptool: error: ") and "--force" in err and out == ""
    assert (tmp_path / "ck.index").read_bytes() == before
    code, _, err = run(capsys, "save", prefix, "--from", str(srcs / "step.npy"), "--no-state", "--force")
    assert code == 0, err
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("ck")) == ["ck.data-00000-of-00001", "ck.index"]
    assert list(read_all(prefix)) == ["step"]


@pytest.mark.parametrize("args,match", [
    (["--from", "missing.npz"], "no such file"),
    (["--from", "nowhere/ckpt-1"], "nowhere"),
])
def test_missing_sources(capsys, tmp_path, args, match):
    os.chdir(tmp_path)
    code, out, err = run(capsys, "save", "out/ck", *args, "--no-state")
    assert code == 1 and match in err and not os.path.exists("out/ck.index")


def test_duplicate_names_across_sources(capsys, tmp_path, srcs):
    np.save(srcs / "w.npy", np.ones(2))
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(srcs / "a.npz"), "--from",
                         str(srcs / "w.npy"), "--no-state")
    assert code == 1 and "'w'" in err and "a.npz" in err
    assert not (tmp_path / "ck.index").exists() and not list(tmp_path.glob("ck*"))


def test_pickled_npz_is_refused(capsys, tmp_path):
    np.savez(tmp_path / "o.npz", o=np.array([b"a"], dtype=object))
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", str(tmp_path / "o.npz"), "--no-state")
    assert code == 1 and "pickle" in err and not list(tmp_path.glob("ck*"))


def test_usage_errors(capsys, tmp_path):
    code, out, err = run(capsys, "save", str(tmp_path / "ck"))
    assert code == 2 and "--from" in err
    code, out, err = run(capsys, "save", str(tmp_path / "ck"), "--from", "x.npy", "--shards", "0")
    assert code == 2


# --------------------------------------------------------------------------- state file and retention


class _FakeResult:
    def __init__(self, kept, deleted):
        self.kept, self.deleted, self.preserved = kept, deleted, []

    def to_json(self):
        return {"kept": self.kept, "deleted": self.deleted, "preserved": self.preserved}


def test_state_update_calls_the_retention_engine(capsys, tmp_path, srcs, monkeypatch):
    """save hands the new prefix and the policy to ckptool.ops.retain.prune.record_save, and reports its result."""
    calls = []
    fake = types.ModuleType("ckptool.ops.retain.prune")

    def record_save(directory, prefix, *, max_to_keep, keep_every_n_hours, now=None, storage=None):
        calls.append((directory, prefix, max_to_keep, keep_every_n_hours, now))
        return _FakeResult([prefix], ["old-1"])

    fake.record_save = record_save
    monkeypatch.setitem(sys.modules, "ckptool.ops.retain.prune", fake)
    import ckptool.ops
    monkeypatch.setattr(ckptool.ops, "prune", fake, raising=False)
    prefix = str(tmp_path / "run" / "ck")
    code, out, err = run(capsys, "save", prefix, "--from", str(srcs / "step.npy"), "--global-step", "3",
                         "--max-to-keep", "2", "--keep-every-n-hours", "1.5", "--json")
    assert code == 0, err
    assert calls == [(str(tmp_path / "run"), prefix + "-3", 2, 1.5, None)]
    assert json.loads(out)["retention"] == {"kept": [prefix + "-3"], "deleted": ["old-1"], "preserved": []}
    code, out, err = run(capsys, "save", prefix, "--from", str(srcs / "step.npy"), "--global-step", "4",
                         "--max-to-keep", "0")
    assert code == 0 and "deleted old-1" in err and out == ""  # status: stderr
    assert calls[-1][2] is None and calls[-1][3] is None  # 0 keeps all; no hours unless asked


def test_state_file_written_and_retention_applied(capsys, tmp_path, srcs):
    from ckptool.io.control.state import read_state

    d = tmp_path / "run"
    for step in range(1, 5):
        code, out, err = run(capsys, "save", str(d / "ckpt"), "--from", str(srcs / "step.npy"),
                             "--global-step", str(step), "--max-to-keep", "2", "--json")
        assert code == 0, err
    state = read_state(str(d))
    assert state.model_checkpoint_path == "ckpt-4"
    assert state.all_model_checkpoint_paths == ["ckpt-3", "ckpt-4"]
    assert len(state.all_model_checkpoint_timestamps) == 2
    assert not (d / "ckpt-1.index").exists() and not (d / "ckpt-2.index").exists()
    assert json.loads(out)["retention"]["kept"]


CKPT = pathlib.Path(__file__).parents[1] / "data" / "ckpt_save"


@pytest.mark.parametrize("command", [
    "save {out} --from {npz} --no-state",
    "convert {ckpt}/ckpt-3 {out}",
    "convert {ckpt}/ckpt-3 {out}.npz",
    "convert {ckpt}/ckpt-3 {out}.safetensors",
    "rewrite-names {ckpt}/ckpt-3 {out} --rule x/=y/ --allow-unused",
    "rewrite-names {ckpt}/ckpt-3 {out} --rule x/=y/ --allow-unused --compact",
    "average {ckpt}/ckpt-2 {ckpt}/ckpt-3 -o {out}",
])
def test_no_sync_skips_every_fsync_and_the_default_fsyncs(tmp_path, monkeypatch, command):
    """Durability is the default for every writing command; --no-sync gives TF's behaviour
    (no fsync at all), and the output is the same."""
    import os as _os

    from clirun import completed

    npz = tmp_path / "v.npz"
    np.savez(npz, w=np.arange(4.0))
    calls = []
    real = _os.fsync
    monkeypatch.setattr(_os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    outputs = {}
    for flag in ("--no-sync", None):
        calls.clear()
        out = tmp_path / (flag or "sync") / "ckpt"
        args = command.format(out=out, npz=npz, ckpt=CKPT).split() + ([flag] if flag else [])
        assert completed(*args).returncode == 0, args
        assert bool(calls) == (flag is None), (flag, calls)
        outputs[flag] = sorted(p.name for p in out.parent.iterdir())
    assert outputs["--no-sync"] == outputs[None]
