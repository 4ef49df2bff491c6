"""The benchmark harness (bench/) at toy size, without TensorFlow: keeps it from rotting.

No timing assertions: only that the workloads are what the harness claims
they are, and that the harness runs its rows and prints its table.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

import numpy as np
import pytest

import ckptool
from ckptool.io.control.state import read_state

pytestmark = pytest.mark.slow  # about 30 s: the whole suite runs it, the quick tier does not

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def wl():
    return _load("workloads")


@pytest.fixture(scope="module")
def built(wl, tmp_path_factory):
    work = tmp_path_factory.mktemp("bench")
    return work, wl.build_all(str(work), wl.TOY)


def test_big_checkpoint_holds_the_generated_arrays(wl, built):
    _, w = built
    sizes = wl.TOY
    with ckptool.open(w["big"]) as ck:
        vs = ck.variables()
        assert [v.name for v in vs] == [wl.big_name(i) for i in range(sizes["big_tensors"])]
        for i, v in enumerate(vs):
            assert v.dtype == "float32"
            assert v.nbytes == sizes["big_elems"] * 4
            np.testing.assert_array_equal(ck.read(v.name), wl.big_array(i, sizes["big_elems"]))


def test_full_size_parameters_are_the_issue_s():
    wl = _load("workloads")
    f = wl.FULL
    assert f["big_tensors"] * f["big_elems"] * 4 == 1 << 30 and f["big_elems"] * 4 == 8 << 20
    assert (f["many"], f["dir_ckpts"], f["runs"], f["runs_ckpts"]) == (20_000, 10_000, 1_000, 20)


def test_many_small_variables(wl, built):
    _, w = built
    expected = dict(wl.many_spec(wl.TOY["many"]))
    with ckptool.open(w["many"]) as ck:
        assert ck.names() == sorted(expected, key=lambda n: n.encode())
        for name, value in expected.items():
            got = ck.read(name)
            assert got.dtype == value.dtype and got.shape == value.shape
            np.testing.assert_array_equal(got, value)


def test_checkpoint_directory_and_state_file(wl, built):
    _, w = built
    n = wl.TOY["dir_ckpts"]
    state = read_state(w["dir"])
    assert state.all_model_checkpoint_paths == [f"ckpt-{i}" for i in range(1, n + 1)]
    assert state.model_checkpoint_path == f"ckpt-{n}"
    assert state.all_model_checkpoint_timestamps == [wl.T0 + i * wl.STEP_SECONDS for i in range(1, n + 1)]
    for i in (1, n):
        prefix = os.path.join(w["dir"], f"ckpt-{i}")
        assert os.stat(prefix + ".index").st_mtime == wl.T0 + i * wl.STEP_SECONDS
        with ckptool.open(prefix) as ck:
            assert int(ck.read("global_step")) == 7


def test_run_directories(wl, built):
    _, w = built
    dirs = sorted(p for p, _, files in os.walk(w["runs"]) if "checkpoint" in files)
    assert len(dirs) == wl.TOY["runs"]
    for d in dirs:
        state = read_state(d)
        assert len(state.all_model_checkpoint_paths) == wl.TOY["runs_ckpts"]
        assert sum(n.endswith(".index") for n in os.listdir(d)) == wl.TOY["runs_ckpts"]


def test_builders_reuse_a_matching_workload(wl, built):
    work, w = built
    index = w["big"] + ".index"
    before = os.stat(index).st_mtime_ns
    assert wl.build_all(str(work), wl.TOY) == w
    assert os.stat(index).st_mtime_ns == before


def test_harness_runs_rows_without_tensorflow(built, capsys):
    work, _ = built
    run = _load("run")
    assert run.main(["--sizes", "toy", "--no-tf", "--repeat", "1", "--only", "read,list,write,listcli",
                     "--work", str(work / "harness")]) == 0
    out = capsys.readouterr().out
    assert "| operation | ckptool | TF |" in out
    for label in ("read all tensors", "list 50 variables", "write", "`list-variables` 50 variables"):
        assert label in out
    assert "failed" not in out


def test_growth_curves_run_without_tensorflow(tmp_path, capsys):
    """bench/growth.py at toy size: every operation measured at every point, the exponents printed."""
    growth = _load("growth")
    assert growth.main(["--sizes", "toy", "--no-tf", "--repeat", "1", "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for op in growth.VAR_OPS:
        for kind in ("names", "objects"):
            assert f"| {kind} | 200 | {op}" in out
            assert f"- {kind} {op}: " in out
    for op in growth.BYTE_OPS:
        assert f"| float32 | 256 KiB | {op}" in out
    assert "*" not in out.split("Growth exponent")[0].replace("**", "")  # no point failed (a note in italics)
    assert not (tmp_path / "growth-toy" / "out").exists()  # outputs removed


def test_growth_exponent_fit():
    growth = _load("growth")
    assert abs(growth.exponent([(1_000, 2.0), (10_000, 20.0), (100_000, 200.0)]) - 1.0) < 1e-9
    assert abs(growth.exponent([(10, 1.0), (20, 4.0)]) - 2.0) < 1e-9
    assert growth.exponent([(10, 1.0)]) is None


def test_s3server_write_side_for_prune(tmp_path):
    """bench/s3server.py's writes, as prune sends them: conditional PUTs refused with 412, the
    ETag new on every write (the same in PUT's answer, HEAD and the listing), DELETE at a version,
    DeleteObjects with a key's ETag as its condition; every write counted."""
    import http.client
    import threading
    import xml.etree.ElementTree as ET

    s3 = _load("s3server")
    (tmp_path / "bkt").mkdir()
    srv = s3.Server(str(tmp_path), 0, 0.0, float(1 << 30), every_request=True)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def ask(method, path, body=b"", **headers):
        conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheader("ETag"), r.read()
        finally:
            conn.close()

    try:
        code, e1, _ = ask("PUT", "/bkt/run/k", b"one", **{"If-None-Match": "*"})
        assert code == 200 and e1
        code, _, body = ask("PUT", "/bkt/run/k", b"two", **{"If-None-Match": "*"})
        assert code == 412 and b"PreconditionFailed" in body
        assert (tmp_path / "bkt" / "run" / "k").read_bytes() == b"one"
        assert ask("HEAD", "/bkt/run/k")[1] == e1
        listing = ask("GET", "/bkt?list-type=2&prefix=run/")[2]
        assert e1 in listing.decode().replace("&quot;", '"')
        code, e2, _ = ask("PUT", "/bkt/run/k", b"one", **{"If-Match": e1})  # the same bytes: a new ETag
        assert code == 200 and e2 != e1 and ask("GET", "/bkt/run/k")[1:] == (e2, b"one")
        assert ask("PUT", "/bkt/run/k", b"three", **{"If-Match": e1})[0] == 412
        assert ask("PUT", "/bkt/run/absent", b"x", **{"If-Match": e2})[0] == 412
        assert ask("DELETE", "/bkt/run/k", **{"If-Match": e1})[0] == 412
        assert ask("DELETE", "/bkt/run/k", **{"If-Match": e2})[0] == 204
        assert not (tmp_path / "bkt" / "run" / "k").exists()
        assert ask("DELETE", "/bkt/run/k")[0] == 204  # absent: S3 answers 204 too
        for k in ("p", "q"):
            assert ask("PUT", f"/bkt/run/{k}", b"x")[0] == 200
        doc = (b'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>run/p</Key></Object>'
               b'<Object><Key>run/q</Key><ETag>"0"</ETag></Object><Quiet>true</Quiet></Delete>')
        code, _, body = ask("POST", "/bkt?delete", doc)
        assert code == 200
        errors = [(e.findtext("{*}Key"), e.findtext("{*}Code")) for e in ET.fromstring(body).findall("{*}Error")]
        assert errors == [("run/q", "PreconditionFailed")]
        assert sorted(os.listdir(tmp_path / "bkt" / "run")) == ["q"]
        stats = srv.stats.doc()
        assert (stats["puts"], stats["deletes"], stats["deleted"], stats["requests"]) == (7, 4, 2, 14)  # 7 PUTs, 3 DELETEs, a POST, HEAD, listing, GET
    finally:
        srv.shutdown()
        srv.server_close()
