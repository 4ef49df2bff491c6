"""Descriptors are not damage (issue 39, item 4): verify reads shard by shard and closes each
once checked, so a 1000-shard checkpoint verifies under ``ulimit -n 64``; and running out of
descriptors (EMFILE) is an error of the run ("could not check", exit 1), never a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ckptool

resource = pytest.importorskip("resource")  # POSIX: RLIMIT_NOFILE

SHARDS = 1000


@pytest.fixture(scope="module")
def many_shards(tmp_path_factory):
    """An intact checkpoint of 1000 data shards (one small tensor each)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = SHARDS + 64  # the writer holds every shard open while it writes
    if soft < want and (hard == resource.RLIM_INFINITY or hard >= want):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    try:
        prefix = tmp_path_factory.mktemp("fds") / "ckpt-1"
        ckptool.write(str(prefix), {f"v{i:04d}": np.full(3, i, np.float32) for i in range(SHARDS)},
                      num_shards=SHARDS, sync=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return prefix


def _ckptool(limit: int, *args) -> subprocess.CompletedProcess:
    """``ckptool ARGS`` in a process whose RLIMIT_NOFILE is ``limit``."""
    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return subprocess.run([sys.executable, "-m", "ckptool", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=lower, timeout=120)


@pytest.mark.parametrize("argv", [("verify",), ("verify", "-j", "4"), ("inspect", "--verify")])
def test_a_thousand_shards_verify_under_ulimit_64(many_shards, argv):
    got = _ckptool(64, argv[0], many_shards, *argv[1:])
    assert got.returncode == 0, got.stderr
    assert "DAMAGED" not in got.stdout and "too many open files" not in got.stderr.lower()
    assert "1000 tensors" in got.stdout or "1,000 tensors" in got.stdout


def test_verify_json_under_ulimit_64(many_shards):
    got = _ckptool(64, "verify", many_shards, "--json")
    doc = json.loads(got.stdout)
    assert got.returncode == 0 and doc["ok"] and doc["results"][0]["tensors"] == SHARDS


_EXHAUSTED = textwrap.dedent("""
    import contextlib, io, os, sys
    from ckptool.cli.main import main
    path, args = sys.argv[1], sys.argv[2:]
    try:  # warm up: every module the command imports is imported now, not under EMFILE (its output dropped)
        with contextlib.redirect_stdout(io.StringIO()):
            main([a.replace("{}", path) for a in args] + ["-q"])
    except SystemExit:
        pass
    import ckptool
    held = []
    try:
        while True:  # every descriptor the process may have, taken
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        main([a.replace("{}", path) for a in args])
    except SystemExit as e:
        sys.exit(e.code)
""")


@pytest.mark.parametrize("argv", [("verify", "{}"), ("verify", "{}", "--json"), ("inspect", "{}", "--verify")])
def test_out_of_descriptors_is_could_not_check_not_damaged(many_shards, argv):
    got = subprocess.run([sys.executable, "-c", _EXHAUSTED, str(many_shards), *argv], capture_output=True,
                         text=True, timeout=120, )
    assert got.returncode == 1, (got.stdout, got.stderr)
    err = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "too many open files" in err[0], got.stderr
    if argv[0] == "verify":
        assert err[0].startswith("ckptool: error: could not check "), got.stderr
    assert "DAMAGED" not in got.stdout and "corrupt" not in got.stdout and "missing" not in got.stdout
    assert '"ok": false' not in got.stdout


def test_out_of_descriptors_in_the_library_is_a_resource_error(many_shards):
    code = textwrap.dedent("""
        import os, sys
        import ckptool
        from ckptool.errors import ResourceError
        from ckptool.ops.inspect.verify import verify
        ck = ckptool.open(sys.argv[1])
        ck.read("v0000")
        held = []
        try:
            while True:
                held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        try:
            verify(ck, workers=1)
        except ResourceError as e:
            print("ResourceError", e)
        else:
            print("no error")
        try:
            ck.read("v0999")
        except ResourceError as e:
            print("read", type(e).__name__)
    """)
    got = subprocess.run([sys.executable, "-c", code, str(many_shards)], capture_output=True, text=True, timeout=120)
    lines = got.stdout.splitlines()
    assert lines[0].startswith("ResourceError could not check ") and "too many open files" in lines[0], got
    assert lines[1] == "read ResourceError"


def test_verify_closes_each_shard_once_checked(many_shards):
    """Not more than a few shards open at a time, whatever the thread count."""
    from ckptool.ops.inspect.verify import verify

    opened = []
    with ckptool.open(str(many_shards)) as ck:
        real = ck.release_shard

        def spy(shard):
            opened.append(len(ck._readers))
            real(shard)

        ck.release_shard = spy
        report = verify(ck, workers=3)
    assert report.ok and report.tensors == SHARDS
    assert len(opened) == SHARDS and max(opened) <= 4
    assert os.path.exists(str(many_shards) + ".index")


@pytest.mark.parametrize("argv", [
    ("inspect", "{}", "--stats"), ("convert", "{}", "{out}/c"), ("convert", "{}", "{out}/c.npz"),
    ("average", "{}", "{}2", "-o", "{out}/avg"), ("diff", "{}", "{}2"),
    ("rewrite-names", "{}", "{out}/r", "--rule", "re:v(.*)=w\\1")])
def test_every_streaming_command_says_out_of_descriptors_never_damage(many_shards, tmp_path, argv):
    """The other commands that open shards: under ulimit -n 64 a 1000-shard checkpoint is either
    handled or refused in one line that says too many open files: never corrupt, missing or a
    traceback (diff: exit 2, "cannot be read")."""
    second = str(many_shards) + "2"
    if not os.path.exists(second + ".index"):
        for name in os.listdir(many_shards.parent):
            if name.startswith("ckpt-1."):
                os.link(many_shards.parent / name, many_shards.parent / name.replace("ckpt-1.", "ckpt-12.", 1))
    got = _ckptool(64, *[a.replace("{out}", str(tmp_path)).replace("{}", str(many_shards)) for a in argv])
    text = (got.stdout + got.stderr).lower()
    assert "traceback" not in text and "corrupt" not in text and "damaged" not in text and "missing" not in text
    if got.returncode:
        err = [ln for ln in got.stderr.splitlines() if ln.strip()]
        assert len(err) == 1 and "too many open files" in err[0], got.stderr
        assert got.returncode == (2 if argv[0] == "diff" else 1)
