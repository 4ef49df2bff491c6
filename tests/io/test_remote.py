"""Checkpoints on object storage (ckptool/remote.py): memory:// unit tests, and round trips
against a real S3-compatible server (moto's) on loopback that counts requests and bytes.

The same CLI commands on s3://bucket/... give the same output as on the local files;
list-variables costs the same number of requests for 10 and 2,000 tensors; reading one
tensor fetches about its own byte range, not its shard.
"""

from __future__ import annotations

import json
import os
import pathlib
import threading
import uuid

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError, MissingError, UnsupportedError

fsspec = pytest.importorskip("fsspec")

from ckptool.io.backends import (
    remote,  # noqa: E402
    remote_files,
)
from ckptool.io.backends.urls import storage_for  # noqa: E402

DATA = pathlib.Path(__file__).parents[1] / "data"
FIXTURES = ["keras_adam", "tf1_saver", "dtensor", "partitioned", "ckpt_save", "strings", "dtypes"]


# --------------------------------------------------------------------------- helpers


def upload(fs, local: pathlib.Path, root: str) -> None:
    """Copy a local directory tree to ``root`` (a path the filesystem understands)."""
    for dirpath, _, files in os.walk(local):
        for name in files:
            src = pathlib.Path(dirpath) / name
            rel = src.relative_to(local).as_posix()
            fs.pipe_file(f"{root}/{rel}", src.read_bytes())


def local_names(directory) -> list[str]:
    """A local directory's names but the advisory lock file (object stores have none)."""
    return sorted(n for n in os.listdir(directory) if n != ".ckptool.lock")


def normalized(doc, remote_root: str, local_root: str):
    """A JSON document with the remote root spelled as the local one; times dropped
    (an uploaded object's mtime is its upload time)."""
    if isinstance(doc, dict):
        return {normalized(k, remote_root, local_root): normalized(v, remote_root, local_root)
                for k, v in doc.items()
                if k not in ("timestamp", "time", "mtime", "last_preserved_timestamp", "latest_age_seconds")}
    if isinstance(doc, list):
        return [normalized(v, remote_root, local_root) for v in doc]
    if isinstance(doc, str):
        return doc.replace(remote_root, local_root)
    return doc


def same_output(run, local_root: str, remote_root: str, *argv, code=0):
    """Run argv (with {} standing for the root) on both; the outputs (and exit codes) agree."""
    lo, le = run(*[a.format(local_root) for a in argv], code=code)
    ro, re_ = run(*[a.format(remote_root) for a in argv], code=code)
    if "--json" in argv:
        assert normalized(json.loads(ro), remote_root, local_root) == normalized(json.loads(lo), local_root,
                                                                               local_root)
    else:
        assert ro.replace(remote_root, local_root) == lo
    assert re_.replace(remote_root, local_root) == le
    return lo, ro


# --------------------------------------------------------------------------- memory://


@pytest.fixture
def mem():
    """A fresh memory:// directory, removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"memory://t{uuid.uuid4().hex[:12]}"
    yield fs, root
    try:
        fs.rm(root, recursive=True)
    except FileNotFoundError:
        pass


def test_url_names():
    st = remote.RemoteStorage(None, "s3")  # names alone: no backend needed
    assert st.join("s3://b/run", "ckpt-1") == "s3://b/run/ckpt-1"
    assert st.join("s3://b/run/", "ckpt-1") == "s3://b/run/ckpt-1"
    assert st.join("s3://b/run", "variables", "variables") == "s3://b/run/variables/variables"
    assert st.join("s3://b/run", "gs://other/x") == "gs://other/x"
    assert st.dirname("s3://b/run/ckpt-1") == "s3://b/run"
    assert st.dirname("s3://b") == "s3://"
    assert st.basename("s3://b/run/ckpt-1.index") == "ckpt-1.index"
    assert st.isabs("s3://b/x") and st.isabs("/abs") and not st.isabs("ckpt-1")
    assert st.atomic_rename is False
    assert remote.storage_for_url("memory://other/y") is remote.storage_for_url("memory://z")  # cached
    assert storage_for("memory://a/b")[0] is remote.storage_for_url("memory://z")
    assert storage_for("file:///tmp/x")[1] == "/tmp/x"


def test_every_local_storage_method_is_mirrored():
    from ckptool.io.backends.local import LocalStorage

    local_only = {"lock", "lstat"}  # no advisory lock, no symlinks on an object store
    wanted = {n for n in vars(LocalStorage) if not n.startswith("_") and n not in local_only}
    missing = sorted(n for n in wanted if not hasattr(remote.RemoteStorage, n))
    assert not missing


def test_missing_backend_names_the_extra(monkeypatch):
    def no_backend(protocol, **kw):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec, "filesystem", no_backend)
    remote.clear_cache()
    try:
        with pytest.raises(UnsupportedError, match=r"pip install 'ckptool\[s3\]'"):
            ckptool.open("s3://bucket/run/ckpt-1")
        with pytest.raises(UnsupportedError, match=r"pip install 'ckptool\[gcs\]'"):
            ckptool.open("gs://bucket/run/ckpt-1")
    finally:
        remote.clear_cache()


def test_without_fsspec_the_cli_names_the_extra(run, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "fsspec", None)
    remote.clear_cache()
    try:
        _, err = run("list-variables", "s3://bucket/run/ckpt-1", code=1)
    finally:
        remote.clear_cache()
    assert err.startswith("ckptool: error: ") and err.count("\n") == 1
    assert "pip install 'ckptool[s3]'" in err


def test_unknown_protocol_is_one_line(run):
    _, err = run("list-variables", "nosuchproto://x/ckpt-1", code=1)
    assert err.startswith("ckptool: error: ") and err.count("\n") == 1


def remote_matches_local(run, fs, root, name):
    """Fixture NAME uploaded under ROOT: the commands print what they print for the local
    copy, and the library lists and reads the same variables, bit for bit."""
    upload(fs, DATA / name, f"{root}/{name}")
    local, url = str(DATA / name), f"{root}/{name}"
    same_output(run, local, url, "list-variables", "{}")
    same_output(run, local, url, "list-variables", "{}", "--json")
    same_output(run, local, url, "inspect", "{}", "--json")
    same_output(run, local, url, "inspect", "{}", "--verify")
    with ckptool.open(local) as lc, ckptool.open(url) as rc:
        assert [v.to_json() for v in rc.variables()] == [v.to_json() for v in lc.variables()]
        for v in lc.variables():
            a, b = lc.read(v.name), rc.read(v.name)
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes() if a.dtype != object else list(a.ravel()) == list(b.ravel())


@pytest.mark.parametrize("name", FIXTURES)
def test_memory_commands_match_local(run, mem, name):
    fs, root = mem
    remote_matches_local(run, fs, root, name)
    assert json.loads((DATA / name / "expected.json").read_text())  # the fixture is the TF-written one


def test_memory_inspect_tensor_matches_local(run, mem):
    fs, root = mem
    upload(fs, DATA / "tf1_saver", f"{root}/tf1")
    same_output(run, str(DATA / "tf1_saver"), f"{root}/tf1", "inspect", "{}", "--tensor", "dense/kernel")
    same_output(run, str(DATA / "tf1_saver"), f"{root}/tf1", "inspect", "{}", "--stats")


def test_memory_missing_checkpoint_is_one_line(run, mem):
    fs, root = mem
    upload(fs, DATA / "tf1_saver", f"{root}/tf1")
    _, err = run("list-variables", f"{root}/tf1/model.ckpt-31", code=1)
    assert err.startswith("ckptool: error: ") and "did you mean" in err
    _, err = run("list-variables", f"{root}/nowhere/ckpt-1", code=1)
    assert err.startswith("ckptool: error: ") and err.count("\n") == 1


def test_memory_verify_finds_a_flipped_byte(run, mem):
    fs, root = mem
    upload(fs, DATA / "keras_adam", f"{root}/k")
    data = f"{root}/k/ckpt-1.data-00000-of-00001"
    raw = bytearray(fs.cat_file(data))
    raw[len(raw) // 2] ^= 0x10
    fs.pipe_file(data, bytes(raw))
    out, _ = run("inspect", f"{root}/k", "--verify", code=1)
    assert "checksum" in out or "checksum" in _


def test_memory_write_data_first_index_last_and_no_temp_names(mem):
    fs, root = mem
    st, prefix = storage_for(f"{root}/run/ckpt-1")
    calls = []
    orig = st.open_write

    def spy(path):
        calls.append(path)
        return orig(path)

    st.open_write = spy
    try:
        res = ckptool.write(prefix, {"a": np.arange(5, dtype=np.int32), "b": np.ones(3)}, num_shards=2)
    finally:
        del st.open_write
    assert calls[-1] == f"{root}/run/ckpt-1.index"
    assert sorted(calls[:-1]) == [f"{root}/run/ckpt-1.data-0000{i}-of-00002" for i in range(2)]
    assert res.files == calls[:-1] + [calls[-1]] or sorted(res.files) == sorted(calls)
    assert not [n for n in st.listdir(f"{root}/run") if "tempstate" in n]
    with ckptool.open(f"{root}/run/ckpt-1") as ck:
        assert ck.read("a").tolist() == [0, 1, 2, 3, 4]


def test_memory_aborted_write_leaves_nothing_and_keeps_the_old_checkpoint(mem):
    fs, root = mem
    prefix = f"{root}/run/ckpt-1"
    ckptool.write(prefix, {"a": np.arange(3, dtype=np.int32)})
    before = {n: fs.cat_file(f"{root}/run/{n}") for n in remote.storage_for_url(root).listdir(f"{root}/run")}

    def boom():
        yield "a", np.arange(4, dtype=np.int32)
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        ckptool.write(prefix, boom(), force=True)
    after = {n: fs.cat_file(f"{root}/run/{n}") for n in remote.storage_for_url(root).listdir(f"{root}/run")}
    assert after == before
    with ckptool.open(prefix) as ck:
        assert ck.read("a").tolist() == [0, 1, 2]


def test_memory_refuses_to_overwrite(mem):
    fs, root = mem
    ckptool.write(f"{root}/r/ckpt-1", {"a": np.zeros(2)})
    with pytest.raises(CkptError, match="already exists"):
        ckptool.write(f"{root}/r/ckpt-1", {"a": np.zeros(2)})


def test_memory_reader_errors(mem):
    fs, root = mem
    st = remote.storage_for_url(root)
    with pytest.raises(MissingError):
        st.open_reader(f"{root}/nope")
    with pytest.raises(MissingError):
        st.read_bytes(f"{root}/nope")
    fs.pipe_file(f"{root}/f", b"0123456789")
    r = st.open_reader(f"{root}/f")
    assert r.size == 10 and bytes(r.read(3, 4)) == b"3456"
    with pytest.raises(CkptError, match="truncated"):
        r.read(8, 4)
    assert st.isfile(f"{root}/f") and not st.isdir(f"{root}/f") and st.isdir(root)
    assert st.listdir(root) == ["f"] and st.glob(root, "*") == ["f"] and st.glob(f"{root}/none", "*") == []
    st.write_bytes_atomic(f"{root}/g", b"x")
    st.rename(f"{root}/g", f"{root}/h")
    assert st.listdir(root) == ["f", "h"] and st.size(f"{root}/h") == 1 and st.mtime(f"{root}/h") > 0
    st.remove(f"{root}/h")
    with pytest.raises(FileNotFoundError):
        st.remove(f"{root}/h")


def test_memory_save_cli_matches_local(run, mem, tmp_path):
    fs, root = mem
    npz = tmp_path / "w.npz"
    np.savez(npz, kernel=np.arange(12, dtype=np.float32).reshape(3, 4), bias=np.zeros(4, np.float64))
    local = tmp_path / "out"
    for r in (str(local), f"{root}/out"):
        for step in (1, 2, 3):
            run("save", f"{r}/ckpt", "--from", npz, "--global-step", step, "--max-to-keep", "2")
    same_output(run, str(local), f"{root}/out", "list-variables", "{}")
    same_output(run, str(local), f"{root}/out", "inspect", "{}", "--json")
    assert remote.storage_for_url(root).listdir(f"{root}/out") == local_names(local)
    state = fs.cat_file(f"{root}/out/checkpoint").decode()
    assert 'model_checkpoint_path: "ckpt-3"' in state and "ckpt-1" not in state


def test_memory_prune_matches_local(run, mem, tmp_path):
    fs, root = mem
    local = tmp_path / "m"
    import shutil

    shutil.copytree(DATA / "manager", local)
    upload(fs, DATA / "manager", f"{root}/m")
    lo, _ = run("prune", local, "--max-to-keep", "1", "--json")
    ro, _ = run("prune", f"{root}/m", "--max-to-keep", "1", "--json")
    assert normalized(json.loads(ro), f"{root}/m", str(local)) == normalized(json.loads(lo), "", "")
    assert sorted(remote.storage_for_url(root).listdir(f"{root}/m")) == sorted(
        n for n in os.listdir(local) if not n.startswith(".ckptool"))


def test_memory_convert_matches_local(run, mem, tmp_path):
    fs, root = mem
    upload(fs, DATA / "keras_adam", f"{root}/k")
    run("convert", DATA / "keras_adam", tmp_path / "local-ckpt")
    run("convert", f"{root}/k", f"{root}/conv/ckpt")
    same_output(run, str(tmp_path / "local-ckpt"), f"{root}/conv/ckpt", "list-variables", "{}")


# --------------------------------------------------------------------------- a real S3 server


def test_s3_endpoint_comes_from_aws_endpoint_url(s3):
    fs, root, counter = s3
    counter.reset()
    st = remote.storage_for_url(root)
    assert not st.exists(f"{root}/nothing")
    assert counter.snapshot(), "the request did not reach the loopback server"


@pytest.mark.parametrize("name", FIXTURES)
def test_s3_commands_match_local(run, s3, name):
    fs, root, _ = s3
    remote_matches_local(run, fs, root, name)


def test_s3_save_cli_and_read_back(run, s3, tmp_path):
    fs, root, counter = s3
    npz = tmp_path / "w.npz"
    kernel = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    np.savez(npz, kernel=kernel, step=np.int64(5))
    local = tmp_path / "out"
    for r in (str(local), f"{root}/out"):
        for step in (1, 2, 3):
            run("save", f"{r}/ckpt", "--from", npz, "--global-step", step, "--max-to-keep", "2",
                "--shards", "2")
    same_output(run, str(local), f"{root}/out", "list-variables", "{}")
    same_output(run, str(local), f"{root}/out", "inspect", "{}", "--json")
    same_output(run, str(local), f"{root}/out", "inspect", "{}", "--verify")
    st = remote.storage_for_url(root)
    assert st.listdir(f"{root}/out") == local_names(local)
    # Objects on the server: data shards, then the index, no temporary names, no copies.
    counter.reset()
    run("save", f"{root}/out/ckpt", "--from", npz, "--global-step", 4, "--shards", "2")
    puts = [r["path"] for r in counter.snapshot() if r["method"] == "PUT"]
    names = [p.rsplit("/", 1)[-1] for p in puts]
    assert names[0] == ".ckptool.lock"  # the directory's lock object, taken first (issue 39)
    names = [n for n in names if n != ".ckptool.lock"]
    assert names[:3] == sorted(names[:2]) + ["ckpt-4.index"], names
    assert ".ckptool.lock" not in st.listdir(f"{root}/out")  # and released
    assert set(names[:2]) == {"ckpt-4.data-00000-of-00002", "ckpt-4.data-00001-of-00002"}
    assert not any("tempstate" in r["path"] or "x-amz-copy-source" in r["query"] for r in counter.snapshot())
    with ckptool.open(f"{root}/out") as ck:
        assert ck.prefix.endswith("ckpt-4")
        np.testing.assert_array_equal(ck.read("kernel"), kernel)


def test_s3_large_object_streams_as_multipart(s3, monkeypatch):
    fs, root, counter = s3
    monkeypatch.setattr(remote_files, "PUT_LIMIT", 6 << 20)
    big = np.arange((12 << 20) // 4, dtype=np.float32)
    counter.reset()
    ckptool.write(f"{root}/big/ckpt-1", {"big": big, "small": np.ones(3)})
    log = counter.snapshot()
    assert any("uploads" in r["query"] for r in log)  # a multipart upload, completed at close
    with ckptool.open(f"{root}/big/ckpt-1") as ck:
        np.testing.assert_array_equal(ck.read("big"), big)


def test_s3_aborted_write_publishes_nothing(s3, monkeypatch):
    fs, root, counter = s3
    monkeypatch.setattr(remote_files, "PUT_LIMIT", 6 << 20)

    def boom():
        yield "big", np.zeros((8 << 20) // 4, np.float32)  # past PUT_LIMIT: a multipart upload began
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError):
        ckptool.write(f"{root}/ab/ckpt-1", boom())
    assert not fs.exists(f"{root}/ab/ckpt-1.index".removeprefix("s3://"))
    assert fs.ls(f"{root}/ab".removeprefix("s3://")) == [] if fs.exists(f"{root}/ab".removeprefix("s3://")) \
        else True
    bucket, key = f"{root}/ab".removeprefix("s3://").split("/", 1)
    pending = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key).get("Uploads", [])
    assert pending == []


def _requests_for(counter, fn):
    counter.reset()
    fn()
    return counter.snapshot()


def test_s3_listing_is_o1_requests_in_the_number_of_tensors(run, s3):
    fs, root, counter = s3
    counts = {}
    for n in (10, 2000):
        ckptool.write(f"{root}/n{n}/ckpt-1", {f"layer_{i:04d}/w": np.full(4, i, np.float32) for i in range(n)})
        log = _requests_for(counter, lambda n=n: run("list-variables", f"{root}/n{n}/ckpt-1"))
        counts[n] = log
        # the index alone is read: nothing touches the data object
        assert not [r for r in log if ".data-" in r["path"]], log
    assert len(counts[10]) == len(counts[2000]), (counts[10], counts[2000])
    assert len(counts[2000]) <= 6
    for n in (10, 2000):  # a directory argument: the state file, then the index
        ckptool.io.backends.urls.storage_for(root)[0].write_bytes_atomic(
            f"{root}/n{n}/checkpoint", b'model_checkpoint_path: "ckpt-1"\n')
    d10 = _requests_for(counter, lambda: run("list-variables", f"{root}/n10"))
    d2000 = _requests_for(counter, lambda: run("list-variables", f"{root}/n2000"))
    assert len(d10) == len(d2000) <= 10
    print(f"\nlist-variables requests: prefix {len(counts[10])} (10 tensors) / {len(counts[2000])} "
          f"(2000 tensors); directory {len(d10)} / {len(d2000)}")


def test_s3_reading_one_tensor_fetches_its_byte_range(s3):
    fs, root, counter = s3
    rng = np.random.default_rng(1)
    tensors = {f"t{i:02d}": rng.standard_normal(64 * 1024).astype(np.float32) for i in range(32)}  # 8 MiB
    ckptool.write(f"{root}/rng/ckpt-1", tensors)
    with ckptool.open(f"{root}/rng/ckpt-1") as ck:
        counter.reset()
        value = ck.read("t17")
        log = counter.snapshot()
    np.testing.assert_array_equal(value, tensors["t17"])
    data = [r for r in log if ".data-" in r["path"] and r["method"] == "GET"]
    fetched = sum(r["bytes"] for r in data)
    shard = fs.size(f"{root}/rng/ckpt-1.data-00000-of-00001".removeprefix("s3://"))
    assert len(data) == 1 and data[0]["range"]
    assert fetched == tensors["t17"].nbytes  # 256 KiB of an 8 MiB shard
    assert shard == 32 * tensors["t17"].nbytes
    print(f"\nread one tensor: {len(log)} requests, {fetched} bytes fetched of a {shard}-byte shard")


def test_s3_verify_reads_each_byte_once(run, s3):
    fs, root, counter = s3
    tensors = {f"t{i}": np.full(1000, i, np.float64) for i in range(20)}
    ckptool.write(f"{root}/v/ckpt-1", tensors)
    log = _requests_for(counter, lambda: run("inspect", f"{root}/v/ckpt-1", "--verify"))
    data = sum(r["bytes"] for r in log if ".data-" in r["path"] and r["method"] == "GET")
    assert data == 20 * 8000


@pytest.mark.parametrize("argv", [("verify",), ("convert",)])
def test_s3_object_based_reads_each_byte_once(run, s3, tmp_path, argv):
    """The object graph (one string, read a part at a time after its lengths: issue 42) is
    fetched once too, with the variables: every byte of the data file, no byte twice."""
    fs, root, counter = s3
    tensors = {f"model/v{i:03d}/.ATTRIBUTES/VARIABLE_VALUE": np.full(100, i, np.float64) for i in range(300)}
    ckptool.write(f"{root}/o/ckpt-1", tensors)
    out = [str(tmp_path / "o.safetensors")] if argv == ("convert",) else []
    log = _requests_for(counter, lambda: run(*argv, f"{root}/o/ckpt-1", *out))
    data = sum(r["bytes"] for r in log if ".data-" in r["path"] and r["method"] == "GET")
    assert data == fs.size(f"{root}/o/ckpt-1.data-00000-of-00001".removeprefix("s3://")) > 300 * 800


def test_s3_prune_matches_local(run, s3, tmp_path):
    fs, root, counter = s3
    import shutil

    local = tmp_path / "m"
    shutil.copytree(DATA / "manager", local)
    upload(fs, DATA / "manager", f"{root}/m")
    run("prune", local, "--max-to-keep", "1", "--dry-run", "--json")
    lo, _ = run("prune", local, "--max-to-keep", "1", "--json")
    log = _requests_for(counter, lambda: run("prune", f"{root}/m", "--max-to-keep", "1", "--json"))
    ro = run.last_out
    # the 2 checkpoints go in 2 requests (S3's batch delete): both indexes, then both data files
    batches = [r for r in log if r["method"] == "POST" and "delete" in r["query"]]
    assert len(batches) == 2 and not [r for r in log if r["method"] == "DELETE" and "/ckpt-" in r["path"]], log
    assert normalized(json.loads(ro), f"{root}/m", str(local)) == normalized(json.loads(lo), "", "")
    assert remote.storage_for_url(root).listdir(f"{root}/m") == sorted(
        n for n in os.listdir(local) if not n.startswith(".ckptool"))
    same_output(run, str(local), f"{root}/m", "inspect", "{}", "--json")
    print(f"\nprune of 3 checkpoints on s3 (2 deleted): {len(log)} requests")


def test_s3_convert_round_trip(run, s3, tmp_path):
    fs, root, _ = s3
    upload(fs, DATA / "keras_adam", f"{root}/k")
    run("convert", DATA / "keras_adam", tmp_path / "local-ckpt")
    run("convert", f"{root}/k", f"{root}/conv/ckpt")
    same_output(run, str(tmp_path / "local-ckpt"), f"{root}/conv/ckpt", "list-variables", "{}")


# --------------------------------------------------------------------------- the other commands


def test_memory_diff_rewrite_names_state_du_match_local(run, mem, tmp_path):
    fs, root = mem
    import shutil

    local = tmp_path / "k"
    shutil.copytree(DATA / "manager", local)
    upload(fs, DATA / "manager", f"{root}/k")
    url = f"{root}/k"
    same_output(run, str(local), url, "diff", "{}/ckpt-4", "{}/ckpt-5", code=1)
    same_output(run, str(local), url, "diff", "{}/ckpt-5", "{}/ckpt-5")
    same_output(run, str(local), url, "state", "{}", "--json")
    run("state", url, "--rebuild", "--dry-run")  # (from mtimes: an upload's differ from the files')
    same_output(run, str(local), url, "du", "{}", "--json")
    # rewrite-names: a copy with renamed variables, read back the same
    run("rewrite-names", local / "ckpt-5", local / "renamed-5", "--rule", "/=scope/")
    run("rewrite-names", f"{url}/ckpt-5", f"{url}/renamed-5", "--rule", "/=scope/")
    same_output(run, str(local), url, "list-variables", "{}/renamed-5")
    same_output(run, str(local), url, "inspect", "{}/renamed-5", "--verify")
    assert not [n for n in remote.storage_for_url(url).listdir(url) if "tempstate" in n]


def test_s3_diff_and_rewrite_names_match_local(run, s3, tmp_path):
    fs, root, _ = s3
    import shutil

    local = tmp_path / "k"
    shutil.copytree(DATA / "manager", local)
    upload(fs, DATA / "manager", f"{root}/k")
    url = f"{root}/k"
    same_output(run, str(local), url, "diff", "{}/ckpt-4", "{}/ckpt-5", code=1)
    run("rewrite-names", local / "ckpt-5", local / "renamed-5", "--rule", "/=scope/")
    run("rewrite-names", f"{url}/ckpt-5", f"{url}/renamed-5", "--rule", "/=scope/")
    same_output(run, str(local), url, "list-variables", "{}/renamed-5", "--json")
    same_output(run, str(local), url, "inspect", "{}/renamed-5", "--verify")
    assert not [n for n in remote.storage_for_url(url).listdir(url) if "tempstate" in n]


def _cross_device(mp):
    """A local kept/ on another file system: os.link from DIR into kept/ fails (EXDEV): copied."""
    import errno

    from ckptool.io.layout import keptdir

    real = os.link

    def link(src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        if src_dir_fd != dst_dir_fd:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks)

    mp.setattr(keptdir.os, "link", link)


def test_s3_prune_keeps_a_pin_in_kept_as_locally(run, s3, tmp_path, monkeypatch):
    """Issue 36 on an object store (no hard links): the pinned checkpoint is copied into DIR/kept/ and
    its DIR objects deleted, through the same journal; the outcome is the local one with kept/ on
    another file system (a copy there too: "how": "copy" and the bytes copied, never "hard link")."""
    fs, root, _ = s3
    import shutil

    local = tmp_path / "m"
    shutil.copytree(DATA / "manager", local)
    upload(fs, DATA / "manager", f"{root}/pin")
    url = f"{root}/pin"
    _cross_device(monkeypatch)
    lo, _ = same_output(run, str(local), url, "prune", "{}", "--max-to-keep", "1", "--keep", "ckpt-3", "--json")
    (moved,) = json.loads(lo)["moved"]
    assert moved["how"] == "copy" and moved["bytes_copied"] == sum(
        f.stat().st_size for f in (local / "kept").glob("ckpt-3.*"))
    st = remote.storage_for_url(url)
    assert st.listdir(url) == local_names(local) and "ckpt-3.index" not in st.listdir(url)
    assert st.listdir(f"{url}/kept") == local_names(local / "kept")
    same_output(run, str(local), url, "verify", "{}")
    same_output(run, str(local), url, "inspect", "{}/kept/ckpt-3", "--verify")


def test_a_leftover_of_a_killed_copy_is_never_taken_for_a_resaved_checkpoint(run, store, tmp_path, monkeypatch):
    """Issue 49, item 1 on moto's S3 and the GCS emulator: a prune killed after ckpt-3's data
    reached kept/ but before its index; the trainer saves ckpt-3 again with other values (same
    sizes); the next prune must not pair the leftover data with the new index: kept/ckpt-3
    verifies and holds the new values before DIR's ckpt-3 goes."""
    fs, root = store
    from ckptool.io.control.state import CheckpointState
    from ckptool.io.layout import keptdir
    from ckptool.ops.retain import deletion

    class Killed(BaseException):
        pass

    url = f"{root}/resave"
    for s in range(1, 5):
        ckptool.write(f"{url}/ckpt-{s}", {"w": np.full(64, s, np.float32)})
    names = [f"ckpt-{s}" for s in range(1, 5)]
    def key(u):
        return u.split("://", 1)[1]

    fs.pipe_file(key(f"{url}/checkpoint"),
                 CheckpointState(names[-1], names, [1e9 + s for s in range(4)], 1e9 - 1).to_text().encode())
    real_place = keptdir.place_file

    def place(d, kept, name, kept_name, **kw):
        if kept_name == "ckpt-3.index":
            raise Killed
        return real_place(d, kept, name, kept_name, **kw)

    with monkeypatch.context() as mp:
        mp.setattr(deletion, "place_file", place)
        with pytest.raises(Killed):
            run("prune", url, "--max-to-keep", "1", "--keep", "ckpt-3")
    st = remote.storage_for_url(url)
    assert "ckpt-3.data-00000-of-00001" in st.listdir(f"{url}/kept") and "ckpt-3.index" not in st.listdir(
        f"{url}/kept")
    new = tmp_path / "new"
    ckptool.write(str(new / "ckpt-3"), {"w": np.full(64, 42.0, np.float32)})
    for f in sorted(new.iterdir(), key=lambda p: p.name.endswith(".index")):  # the trainer: data first
        assert fs.size(key(f"{url}/{f.name}")) == f.stat().st_size  # the same sizes
        fs.pipe_file(key(f"{url}/{f.name}"), f.read_bytes())
    out, err = run("prune", url, "--max-to-keep", "1", "--keep", "ckpt-3", "--json")
    (moved,) = json.loads(out)["moved"]
    assert moved["to"] == f"{url}/kept/ckpt-3" and moved["how"] == "copy" and moved["bytes_copied"] > 0
    run("verify", f"{url}/kept/ckpt-3")
    with ckptool.open(f"{url}/kept/ckpt-3") as ck:
        assert float(ck.read("w")[0]) == 42.0
    assert "ckpt-3.index" not in st.listdir(url)


def test_s3_recursive_prune_and_du_match_local(run, s3, tmp_path):
    fs, root, counter = s3
    import shutil

    local = tmp_path / "runs"
    for name in ("manager", "ckpt_save"):
        shutil.copytree(DATA / name, local / "exp" / name)
        upload(fs, DATA / name, f"{root}/runs/exp/{name}")
    url = f"{root}/runs"
    same_output(run, str(local), url, "du", "{}", "--json")
    same_output(run, str(local), url, "verify", "{}", "--recursive")  # Storage.walk_dirs, both ways
    same_output(run, str(local), url, "prune", "{}", "--recursive", "--max-to-keep", "1", "--json")
    st = remote.storage_for_url(url)
    for name in ("manager", "ckpt_save"):
        assert st.listdir(f"{url}/exp/{name}") == local_names(local / "exp" / name)


def test_s3_verify_streams_sequential_shards_with_few_requests(run, s3):
    fs, root, counter = s3
    tensors = {f"t{i:04d}": np.full(100, i, np.float32) for i in range(2000)}  # 400 B each, 800 KB
    ckptool.write(f"{root}/many/ckpt-1", tensors)
    log = _requests_for(counter, lambda: run("inspect", f"{root}/many/ckpt-1", "--verify"))
    data = [r for r in log if ".data-" in r["path"] and r["method"] == "GET"]
    fetched = sum(r["bytes"] for r in data)
    # every byte, about once (a tensor straddling a window's end is fetched again)
    assert 2000 * 400 <= fetched <= 2000 * 400 + len(data) * 400
    assert len(data) < 20, len(data)  # read-ahead: not one GET per tensor
    with ckptool.open(f"{root}/many/ckpt-1") as ck:  # still: a lone read is its own range
        counter.reset()
        assert ck.read("t1234")[0] == 1234
        got = [r for r in counter.snapshot() if ".data-" in r["path"] and r["method"] == "GET"]
        assert sum(r["bytes"] for r in got) == 400
    print(f"\nverify of 2000 tensors on s3: {len(log)} requests, {len(data)} ranged GETs of the shard")


def test_s3_errors_are_one_line(run, s3, tmp_path):
    fs, root, _ = s3
    npz = tmp_path / "w.npz"
    np.savez(npz, a=np.zeros(3))
    _, err = run("save", "s3://no-such-bucket-ckptool/run/ckpt", "--from", npz, code=1)
    assert err.count("\n") == 1 and "no such bucket" in err
    _, err = run("list-variables", f"{root}/nothing/ckpt-1", code=1)
    assert err.startswith("ckptool: error: ") and err.count("\n") == 1


def test_endpoint_passed_explicitly_to_an_old_botocore(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setattr(remote_files, "botocore_reads_endpoint_env", lambda: False)
    assert remote_files.default_options("s3")["client_kwargs"] == {"endpoint_url": "http://127.0.0.1:9"}
    monkeypatch.setattr(remote_files, "botocore_reads_endpoint_env", lambda: True)
    assert "client_kwargs" not in remote_files.default_options("s3")
    assert remote_files.default_options("s3")["use_listings_cache"] is False


# --------------------------------------------------------------------------- parallel ranged reads


@pytest.fixture
def slow_s3(s3):
    """s3 with 0.2 s before each ranged GET's answer, so that GETs in flight overlap."""
    fs, root, counter = s3
    counter.delay = 0.2
    try:
        yield s3
    finally:
        counter.delay = 0.0


def _data_gets(log) -> list[dict]:
    return [r for r in log if ".data-" in r["path"] and r["method"] == "GET"]


def _big(root: str) -> dict:
    """48 MiB in 24 float32 tensors of 2 MiB, in two shards."""
    rng = np.random.default_rng(7)
    tensors = {f"layer_{i:02d}/kernel": rng.standard_normal((512, 1024)).astype(np.float32) for i in range(24)}
    ckptool.write(f"{root}/big/ckpt-1", tensors, num_shards=2)
    return tensors


@pytest.mark.parametrize("argv", [("verify",), ("inspect", "--stats", "--json")], ids=["verify", "stats"])
def test_s3_streaming_reads_run_in_parallel_each_byte_once(run, slow_s3, argv):
    fs, root, counter = slow_s3
    tensors = _big(root)
    url = f"{root}/big/ckpt-1"
    counter.reset()
    out, _ = run(*argv[:1], url, *argv[1:])
    log = counter.snapshot()
    data = sum(t.nbytes for t in tensors.values())
    fetched = sum(r["bytes"] for r in _data_gets(log))
    assert data <= fetched <= 1.1 * data  # nothing twice
    assert counter.max_active >= 4, counter.max_active  # requests in flight at once
    st = remote.storage_for_url(url).last_prefetch
    assert st is not None and st.max_in_flight >= 4
    from ckptool.io.backends.prefetch import DEFAULT_JOBS, REQUEST_BYTES

    assert st.max_held <= DEFAULT_JOBS * REQUEST_BYTES  # memory: bounded by the bytes in flight
    assert st.bytes_fetched == fetched
    if argv[0] == "inspect":  # statistics exact, in order
        rows = json.loads(out)
        assert [r["name"] for r in rows] == sorted(tensors)
        for r in rows:
            a = tensors[r["name"]]
            assert r["min"] == float(a.min()) and r["max"] == float(a.max())
            assert r["mean"] == pytest.approx(float(a.astype(np.float64).mean()), rel=1e-12)


def test_s3_jobs_bounds_requests_in_flight(run, slow_s3):
    fs, root, counter = slow_s3
    _big(root)
    counter.reset()
    run("verify", "-j", "2", f"{root}/big/ckpt-1")
    assert counter.max_active <= 3  # the server sees a GET end just after its client does
    st = remote.storage_for_url(root).last_prefetch
    assert st.max_in_flight <= 2 and st.max_held <= 2 * (8 << 20) * 5 // 4


def test_s3_convert_diff_average_rewrite_read_in_parallel_values_exact(run, slow_s3, tmp_path):
    fs, root, counter = slow_s3
    tensors = _big(root)
    url = f"{root}/big/ckpt-1"
    data = sum(t.nbytes for t in tensors.values())
    for argv in (("convert", url, str(tmp_path / "c" / "ckpt")),
                 ("rewrite-names", url, str(tmp_path / "r" / "ckpt"), "--rule", r"re:layer_(.*)=block_\1",
                  "--compact"),
                 ("save", str(tmp_path / "s" / "ckpt"), "--from", url),
                 ("diff", url, url)):
        counter.reset()
        run(*argv)
        fetched = sum(r["bytes"] for r in _data_gets(counter.snapshot()))
        want = 2 * data if argv[0] == "diff" else data
        assert want <= fetched <= 1.1 * want, argv
        assert counter.max_active >= 4, (argv, counter.max_active)
    with ckptool.open(str(tmp_path / "c" / "ckpt")) as ck:
        for n, a in tensors.items():
            np.testing.assert_array_equal(ck.read(n), a)
    with ckptool.open(str(tmp_path / "r" / "ckpt")) as ck:
        for n, a in tensors.items():
            np.testing.assert_array_equal(ck.read(n.replace("layer_", "block_")), a)
    with ckptool.open(str(tmp_path / "s" / "ckpt")) as ck:
        assert sorted(ck.names()) == sorted(tensors)
    ckptool.write(f"{root}/big/ckpt-2", {n: a + 1 for n, a in tensors.items()}, num_shards=2)
    counter.reset()
    run("average", url, f"{root}/big/ckpt-2", "-o", str(tmp_path / "avg" / "ckpt"))
    fetched = sum(r["bytes"] for r in _data_gets(counter.snapshot()))
    assert 2 * data <= fetched <= 2.2 * data and counter.max_active >= 4
    with ckptool.open(str(tmp_path / "avg" / "ckpt")) as ck:
        for n, a in tensors.items():
            b = (a + 1).astype(np.float64)
            np.testing.assert_array_equal(ck.read(n), ((a.astype(np.float64) + b) / 2).astype(np.float32))


def test_memory_stats_of_many_small_tensors_match_local_each_byte_once(run, mem, tmp_path):
    fs, root = mem
    rng = np.random.default_rng(3)
    tensors = {f"v{i:04d}": rng.standard_normal(int(rng.integers(1, 300))).astype(np.float32) for i in range(1500)}
    tensors["big"] = rng.standard_normal(300_000)
    ckptool.write(str(tmp_path / "ckpt"), tensors, sync=False)
    ckptool.write(f"{root}/ckpt", tensors)
    local, _ = run("inspect", tmp_path / "ckpt", "--stats", "--json")
    there, _ = run("inspect", f"{root}/ckpt", "--stats", "--json", "-j", "3")
    assert json.loads(there) == json.loads(local)
    st = remote.storage_for_url(root).last_prefetch
    assert st.bytes_fetched == sum(a.nbytes for a in tensors.values()) and st.max_in_flight <= 3


# --------------------------------------------------------------------------- -j/--jobs of the streaming commands


@pytest.fixture
def counted_gets(monkeypatch):
    """Every Prefetcher built while open fetches in requests of 64 KiB (many requests from a
    small checkpoint), each GET held a moment so GETs overlap; records the ``jobs`` each
    prefetcher was given and the most GETs in flight at once over all of them."""
    import time

    from ckptool.io.backends import prefetch as prefetch_mod

    seen = {"jobs": [], "active": 0, "max": 0}
    lock = threading.Lock()

    class Counting(prefetch_mod.Prefetcher):
        def __init__(self, ranges, fetch, jobs=prefetch_mod.DEFAULT_JOBS, request_bytes=prefetch_mod.REQUEST_BYTES):
            def counted(r, start, end):
                with lock:
                    seen["active"] += 1
                    seen["max"] = max(seen["max"], seen["active"])
                try:
                    time.sleep(0.005)
                    return fetch(r, start, end)
                finally:
                    with lock:
                        seen["active"] -= 1

            if ranges:
                seen["jobs"].append(jobs)
            super().__init__(ranges, counted, jobs, 64 << 10)

    monkeypatch.setattr(prefetch_mod, "Prefetcher", Counting)

    def reset():
        seen.update(jobs=[], active=0, max=0)

    seen["reset"] = reset
    return seen


def _small(root: str, step: int = 1, add: float = 0.0) -> dict:
    """24 float32 tensors of 64 KiB."""
    rng = np.random.default_rng(11)
    tensors = {f"layer_{i:02d}/kernel": (rng.standard_normal((128, 128)) + add).astype(np.float32)
               for i in range(24)}
    ckptool.write(f"{root}/small/ckpt-{step}", tensors)
    return tensors


@pytest.mark.parametrize("jobs", [1, 3])
def test_memory_jobs_bounds_the_gets_in_flight_of_every_streaming_command(run, mem, tmp_path, counted_gets, jobs):
    fs, root = mem
    tensors = _small(root)
    tensors2 = _small(root, 2, 1.0)
    url, url2 = f"{root}/small/ckpt-1", f"{root}/small/ckpt-2"
    for argv in (("convert", url, str(tmp_path / "c" / "ckpt")),
                 ("convert", url, str(tmp_path / "c.npz")),
                 ("rewrite-names", url, str(tmp_path / "r" / "ckpt"), "--rule", r"re:layer_(.*)=block_\1",
                  "--compact"),
                 ("save", str(tmp_path / "s" / "ckpt"), "--from", url),
                 ("diff", url, url),
                 ("average", url, url2, "-o", str(tmp_path / "avg" / "ckpt"))):
        counted_gets["reset"]()
        run(*argv, "-j", str(jobs))
        assert counted_gets["jobs"], argv  # the reads were fetched ahead
        assert sum(counted_gets["jobs"]) <= max(jobs, len(counted_gets["jobs"])), (argv, counted_gets["jobs"])
        assert 1 <= counted_gets["max"] <= max(jobs, len(counted_gets["jobs"])), (argv, counted_gets["max"])
        if jobs > 1 and argv[0] not in ("diff", "average"):
            assert counted_gets["max"] == jobs, (argv, counted_gets["max"])  # -j N: N in flight
    for prefix, rename in (("c/ckpt", str), ("s/ckpt", str), ("r/ckpt", lambda n: n.replace("layer_", "block_"))):
        with ckptool.open(str(tmp_path / prefix)) as ck:
            for n, a in tensors.items():
                np.testing.assert_array_equal(ck.read(rename(n)), a)
    with np.load(tmp_path / "c.npz") as z:
        assert sorted(z.files) == sorted(tensors)
    with ckptool.open(str(tmp_path / "avg" / "ckpt")) as ck:
        for n, a in tensors.items():
            mean = (a.astype(np.float64) + tensors2[n].astype(np.float64)) / 2
            np.testing.assert_array_equal(ck.read(n), mean.astype(np.float32))


def test_memory_diff_and_average_share_the_default_gets(run, mem, tmp_path, counted_gets):
    fs, root = mem
    _small(root)
    _small(root, 2, 1.0)
    url, url2 = f"{root}/small/ckpt-1", f"{root}/small/ckpt-2"
    run("diff", url, url)
    assert counted_gets["jobs"] == [4, 4]  # 8 in all, as --help says
    counted_gets["reset"]()
    run("average", url, url2, "-o", str(tmp_path / "avg" / "ckpt"), "-j", "6")
    assert counted_gets["jobs"] == [3, 3]


@pytest.mark.parametrize("command", ["convert", "average", "diff", "save", "rewrite-names"])
def test_streaming_commands_say_what_jobs_means(run, command):
    out, _ = run(command, "--help")
    flat = " ".join(out.split())
    assert "-j, --jobs N" in flat
    assert "N ranged GETs" in flat and "N x 8 MiB" in flat and "No effect on local files" in flat


def test_s3_jobs_bounds_the_gets_of_convert_and_diff(run, slow_s3, tmp_path):
    fs, root, counter = slow_s3
    tensors = _big(root)
    url = f"{root}/big/ckpt-1"
    data = sum(t.nbytes for t in tensors.values())
    for argv, jobs, want in ((("convert", url, str(tmp_path / "c" / "ckpt")), 2, data),
                             (("diff", url, url), 4, 2 * data)):
        counter.reset()
        run(*argv, "-j", str(jobs))
        fetched = sum(r["bytes"] for r in _data_gets(counter.snapshot()))
        assert want <= fetched <= 1.1 * want, argv  # nothing twice
        assert 2 <= counter.max_active <= jobs + 1, (argv, counter.max_active)  # a GET ends just after
    with ckptool.open(str(tmp_path / "c" / "ckpt")) as ck:
        for n, a in tensors.items():
            np.testing.assert_array_equal(ck.read(n), a)
