"""Hostile Keras files (issue 39 items 1-2): a .keras zip bomb is streamed or refused, never read
whole; its JSON members are bounded; a MemoryError is one error line; HDF5 object references are
refused at open."""

import os
import struct
import tracemalloc
import zipfile

import h5py
import numpy as np
import pytest

import ckptool
from ckptool.errors import CorruptError, UnsupportedError
from clirun import completed

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "keras3")
TEMPLATE = os.path.join(DATA, "functional", "template.keras")


def _rezip(dst, extra=(), pad_mib=0):
    """The functional template.keras with every member deflated (Keras stores them), the weights
    member padded with ``pad_mib`` MiB of zeros (HDF5 ignores bytes past its end), and ``extra``."""
    with zipfile.ZipFile(TEMPLATE) as zt, zipfile.ZipFile(dst, "w", compression=zipfile.ZIP_DEFLATED) as zo:
        for info in zt.infolist():
            with zt.open(info) as m, zo.open(info.filename, "w") as out:
                while chunk := m.read(1 << 20):
                    out.write(chunk)
                if info.filename == "model.weights.h5":
                    for _ in range(pad_mib):
                        out.write(bytes(1 << 20))
        for name, data in extra:
            zo.writestr(name, data)
    return dst


def _no_whole_reads(monkeypatch):
    def refuse(self, name, pwd=None):
        raise AssertionError(f"zipfile read {name} whole")
    monkeypatch.setattr(zipfile.ZipFile, "read", refuse)


def test_a_deflated_member_is_streamed(tmp_path, monkeypatch):
    """128 MiB of deflated zeros behind the weights: read through in zipfile's chunks (16 MiB when it
    seeks), never held whole (the old reader's BytesIO held all of it)."""
    p = _rezip(tmp_path / "big.keras", pad_mib=128)
    assert os.path.getsize(p) < 2 << 20
    _no_whole_reads(monkeypatch)
    tracemalloc.start()
    try:
        with ckptool.open(str(p)) as ck:
            kernel = ck.read("layers/dense/vars/0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kernel.shape == (4, 8) and peak < 64 << 20, peak
    with ckptool.open(TEMPLATE) as ck:
        assert (ck.read("layers/dense/vars/0") == kernel).all()


def test_a_zip_bomb_is_refused(tmp_path):
    """A member declaring 3 GiB from a few KB: refused before anything is inflated."""
    p = _rezip(tmp_path / "bomb.keras")
    data = bytearray(p.read_bytes())
    with zipfile.ZipFile(p) as z:
        info = z.getinfo("model.weights.h5")
    # the central directory entry of model.weights.h5: its uncompressed size (offset 24) made 3 GiB
    at = data.find(b"PK\x01\x02", 0)
    while at >= 0:
        n = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + n] == b"model.weights.h5":
            struct.pack_into("<I", data, at + 24, 3 << 30)
            break
        at = data.find(b"PK\x01\x02", at + 4)
    assert at >= 0 and info.compress_size < 1 << 20
    p.write_bytes(bytes(data))
    with pytest.raises(CorruptError, match="zip bomb"):
        ckptool.open(str(p))
    r = completed("inspect", p)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "zip bomb" in r.stderr, r.stderr


def test_json_members_are_bounded(tmp_path, monkeypatch):
    import ckptool.ops.read.keras_zip as reader
    p = _rezip(tmp_path / "cfg.keras")
    monkeypatch.setattr(reader, "JSON_LIMIT", 1000)  # config.json is ~5 KB
    r = completed("list-variables", p)
    assert r.returncode == 1 and "config.json: over 1000 bytes" in r.stderr, r.stderr
    q = tmp_path / "notjson.keras"
    with zipfile.ZipFile(TEMPLATE) as zt, zipfile.ZipFile(q, "w") as zo:
        for info in zt.infolist():
            zo.writestr(info, b"[" * 100000 if info.filename == "config.json" else zt.read(info))
    monkeypatch.undo()
    r = completed("list-variables", q)
    assert r.returncode == 1 and "config.json: not a Keras file's config.json: nested too deep" in r.stderr, r.stderr


def test_memory_error_is_one_line(monkeypatch):
    from ckptool.ops.read import keras as reader

    def starve(self):
        raise MemoryError()
    monkeypatch.setattr(reader.KerasCheckpoint, "_open", starve)
    r = completed("inspect", TEMPLATE)
    assert r.returncode == 1 and r.stderr.startswith("ckptool: error: out of memory") and \
        r.stderr.count("\n") == 1, r.stderr


def test_a_keras_template_is_copied_streaming(tmp_path, monkeypatch):
    """--template T.keras: every member but the weights copied through as it is, none read whole."""
    blob = np.random.default_rng(0).bytes(3 << 20)
    t = _rezip(tmp_path / "t.keras", extra=[("assets/blob.bin", blob)])
    _no_whole_reads(monkeypatch)
    dst = tmp_path / "o.keras"
    r = completed("convert", os.path.join(DATA, "functional", "tf", "ckpt"), dst, "--template", t)
    assert r.returncode == 0, r.stderr
    monkeypatch.undo()
    with zipfile.ZipFile(dst) as a, zipfile.ZipFile(t) as b:
        assert a.namelist() == b.namelist()
        for m in ("config.json", "metadata.json", "assets/blob.bin"):
            assert a.read(m) == b.read(m)


@pytest.mark.parametrize("shape", [(), (2,)])
def test_object_references_are_refused_at_open(tmp_path, shape):
    p = tmp_path / "refs.weights.h5"
    with h5py.File(p, "w") as f:
        d = f.create_dataset("layers/dense/vars/0", data=np.ones(2, "f4"))
        r = f.create_dataset("layers/dense/vars/1", shape, dtype=h5py.ref_dtype)
        r[()] = d.ref if not shape else [d.ref, d.ref]
    with pytest.raises(UnsupportedError, match="object references, which have no TensorFlow equivalent"):
        ckptool.open(str(p))
    for args in (["list-variables", p], ["inspect", "--verify", p], ["diff", p, p],
                 ["convert", p, tmp_path / "o.safetensors"]):
        r = completed(*args)
        assert r.returncode == (2 if args[0] == "diff" else 1) and r.stderr.count("\n") == 1 \
            and "no TensorFlow equivalent" in r.stderr, (args, r)
    assert not (tmp_path / "o.safetensors").exists()
