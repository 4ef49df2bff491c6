"""Issue 53: every reading command reads every source convert reads. inspect (summary, --stats,
--tree), list-variables, verify and diff take .safetensors, .npz, .npy and a Hugging Face folder
(model.safetensors, or shards named by model.safetensors.index.json), and verify checks what each
format can say (the safetensors header and data extent, the zip CRC-32 of an .npz member, the
folder's weight_map, total_size and config.json). Files are written as the formats' own writers
lay them out (safetensors' header by its spec, numpy's savez), checked against convert."""

import json
import os
import struct
import zipfile

import numpy as np
import pytest

import ckptool
from clirun import run


def st_bytes(tensors):
    """A .safetensors file as the reference writer lays it out (format "pt", as transformers)."""
    header, data = {"__metadata__": {"format": "pt"}}, b""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.float16): "F16"}
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": codes[arr.dtype], "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data


W = {"bert.embeddings.word_embeddings.weight": np.arange(12, dtype=np.float32).reshape(4, 3),
     "bert.pooler.dense.bias": np.ones(3, np.float32),
     "bert.encoder.layer.0.attention.self.query.weight": np.full((3, 3), 0.5, np.float16)}


def hf_folder(d, sharded=True):
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 3}))
    names = sorted(W)
    if not sharded:
        (d / "model.safetensors").write_bytes(st_bytes(W))
        return d
    shards = {"model-00001-of-00002.safetensors": names[:2], "model-00002-of-00002.safetensors": names[2:]}
    wmap = {}
    for shard, ns in shards.items():
        (d / shard).write_bytes(st_bytes({n: W[n] for n in ns}))
        wmap.update((n, shard) for n in ns)
    total = sum(a.nbytes for a in W.values())
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": wmap}))
    return d


@pytest.mark.parametrize("sharded", [True, False])
def test_a_hugging_face_folder_reads_everywhere(tmp_path, capsys, sharded):
    d = hf_folder(tmp_path / "hf", sharded)
    with ckptool.open(str(d)) as ck:
        assert ck.names() == sorted(W) and ck.format == "Hugging Face folder"
        for n, a in W.items():
            np.testing.assert_array_equal(ck.read(n), a)
            assert ck.variable(n).nbytes == a.nbytes and ck.variable(n).dtype == a.dtype.name
    code, out, err = run(capsys, "list-variables", d, "--json")
    assert code == 0 and [v["name"] for v in json.loads(out)] == sorted(W)
    code, out, err = run(capsys, "inspect", d)
    assert code == 0 and "Hugging Face folder" in out and "3 variables" not in err and "variables   3" in out
    code, out, err = run(capsys, "inspect", d, "--stats")
    assert code == 0 and "bert.pooler.dense.bias" in out
    code, out, err = run(capsys, "inspect", d, "--tree")
    assert code == 0 and "pooler" in out
    code, out, err = run(capsys, "verify", d)
    assert code == 0 and out.startswith("ok ") and "3 tensors" in out
    code, out, err = run(capsys, "verify", tmp_path, "--recursive")
    assert code == 0 and out.count("ok ") == 1
    code, out, err = run(capsys, "convert", d, tmp_path / "o.npz")  # convert and diff read it too
    assert code == 0, err
    code, out, err = run(capsys, "diff", d, tmp_path / "o.npz")
    assert code == 0 and "3 unchanged" in out + err


def test_verify_says_what_each_folder_problem_is(tmp_path, capsys):
    d = hf_folder(tmp_path / "hf")
    index = d / "model.safetensors.index.json"
    doc = json.loads(index.read_text())
    cases = [
        (lambda: (d / "model-00002-of-00002.safetensors").unlink(), "names model-00002-of-00002.safetensors, which is not there"),
        (lambda: index.write_text(json.dumps({**doc, "metadata": {"total_size": 1}})), "total_size is 1"),
        (lambda: index.write_text(json.dumps({**doc, "weight_map": {**doc["weight_map"], "x": doc["weight_map"][sorted(W)[0]]}})),
         "weight_map puts 'x' in model-00001-of-00002.safetensors, which does not hold it"),
        (lambda: index.write_text(json.dumps({**doc, "weight_map": {**doc["weight_map"], sorted(W)[0]: "model-00002-of-00002.safetensors"}})),
         "but model-00001-of-00002.safetensors holds it"),
        (lambda: index.write_text(json.dumps({**doc, "weight_map": {"a": "../x.safetensors"}})), "not a file beside it"),
        (lambda: (d / "config.json").write_text("{" * 10), "config.json: not a config.json"),
    ]
    saved = {p: p.read_bytes() for p in d.iterdir()}
    for damage, said in cases:
        damage()
        code, out, err = run(capsys, "verify", d)
        assert code == 1 and "DAMAGED" in out and said in out, (said, out)
        for p, b in saved.items():
            p.write_bytes(b)
    code, out, err = run(capsys, "verify", d)
    assert code == 0


def test_safetensors_and_npz_files_read_and_verify(tmp_path, capsys):
    st = tmp_path / "m.safetensors"
    st.write_bytes(st_bytes(W))
    npz = tmp_path / "m.npz"
    np.savez_compressed(npz, **{k.replace(".", "_"): v for k, v in W.items()})
    npy = tmp_path / "one.npy"
    np.save(npy, W["bert.pooler.dense.bias"])
    for f, n in ((st, 3), (npz, 3), (npy, 1)):
        code, out, err = run(capsys, "verify", f)
        assert code == 0 and f"{n} tensor" in out, err
        code, out, err = run(capsys, "list-variables", f)
        assert code == 0 and len(out.splitlines()) == n + 1
        code, out, err = run(capsys, "inspect", f, "--stats", "--json")
        assert code == 0 and len(json.loads(out)) == n
    # damage: a cut .safetensors, a flipped byte in an .npz member (its CRC-32)
    st.write_bytes(st.read_bytes()[:-5])
    code, out, err = run(capsys, "verify", st)
    assert code == 1 and "DAMAGED" in out
    with zipfile.ZipFile(npz) as z:
        info = z.infolist()[0]
        start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw = bytearray(npz.read_bytes())
    raw[start + info.compress_size // 2] ^= 0xFF
    npz.write_bytes(bytes(raw))
    code, out, err = run(capsys, "verify", npz)
    assert code == 1 and "DAMAGED" in out and info.filename.removesuffix(".npy") in out


def test_inspect_of_a_safetensors_convert_wrote(tmp_path, capsys):
    ck = tmp_path / "ckpt-1"
    ckptool.write(str(ck), {"a/b": np.arange(6, dtype=np.float32).reshape(2, 3),
                            "s": np.array([b"x", b"yy"], dtype=object)}, sync=False)
    code, out, err = run(capsys, "convert", ck, tmp_path / "m.safetensors")
    assert code == 0, err
    code, out, err = run(capsys, "list-variables", tmp_path / "m.safetensors", "--json")
    assert [(v["name"], v["dtype"], v["shape"]) for v in json.loads(out)] == [("a/b", "float32", [2, 3]),
                                                                            ("s", "string", [2])]
    code, out, err = run(capsys, "inspect", tmp_path / "m.safetensors", "--tensor", "s")
    assert code == 0 and "yy" in out
    code, out, err = run(capsys, "diff", ck, tmp_path / "m.safetensors")
    assert code == 0
    assert os.path.exists(tmp_path / "m.safetensors")
