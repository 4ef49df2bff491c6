"""Crash safety: `ckptool save`, `prune`, `rewrite-names` and `convert` killed with SIGKILL at
every point where they change the disk, and (save, convert) at random moments.

tests/faultinject/faults.py (installed in the child by tests/faultinject/sitecustomize.py,
on its PYTHONPATH; nothing in ckptool/ knows) wraps every call that changes the disk (open for writing,
fsync, rename/replace, remove/unlink, link) in the child; ``CKPTOOL_CRASH_AT=fs:N``
kills it just before the N-th such event and ``fs+:N`` just after. A first,
clean run counts the events; then every event is killed before and after.
After each kill:

- every checkpoint whose ``.index`` exists opens and verifies (all CRCs);
- the checkpoints that were there before are untouched (same values);
- the state file, when there is one, parses and names only complete checkpoints;
- a rerun of the same command (``--force`` when the index made it) succeeds and
  the new checkpoint holds exactly the saved values.

Every run but those killed at random moments (a fresh interpreter there, its start-up among
the moments) is a child forked from a fork server (``faults.run_armed``): the same injection at
a fraction of the cost. convert (V2 -> V2 resharded, V1 -> V2, -> .npz, -> .safetensors; fresh
and ``--force`` over an old DST) has its checks in :class:`_Convert`.
"""

import multiprocessing
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

import ckptool
from ckptool.io.control.state import read_state, resolve
from clirun import run as run_cli

FAULTS = pathlib.Path(__file__).resolve().parents[1] / "faultinject"
ROOT = FAULTS.parents[1]
sys.path.insert(0, str(FAULTS))
import faults as _faults  # noqa: E402

pytestmark = pytest.mark.slow
VALUES = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([b"x", b""], dtype=object),
          "step": np.int64(3)}
KILLS = {"event": 0, "random": 0, "by_command": {}}  # by_command: name -> [at events, at random]


@pytest.fixture
def tmp_path(tmp_path_factory):
    """This module's scratch trees in memory where the machine has a tmpfs (as fuzz/ does): the
    commands run exactly as on a disk, fsyncs included (every one an injection point), but a
    fsync costs nothing there, and the hundreds of runs here otherwise wait on the disk."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        import tempfile

        d = pathlib.Path(tempfile.mkdtemp(prefix="ckptool-crash-", dir="/dev/shm"))
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("crash")


def _killed(command, kind="event"):
    KILLS[kind] += 1
    KILLS["by_command"].setdefault(command, [0, 0])[kind == "random"] += 1


def _run(args, env_extra=None, wait=True):
    """``ckptool ARGS`` with ``env_extra``'s CKPTOOL_CRASH_AT / CKPTOOL_FAULT_LOG, as a
    CompletedProcess (stderr: the output). Waited for: in a child of the fork server (the same
    injection, no interpreter start per run); not waited for (a kill at a random moment, start-up
    included): a fresh interpreter."""
    if wait:
        extra = env_extra or {}
        code, text = _forked(args, _scratch(), spec=extra.get("CKPTOOL_CRASH_AT", ""),
                             log=extra.get("CKPTOOL_FAULT_LOG", ""))
        return subprocess.CompletedProcess(args, code, text, text)
    env = dict(os.environ)
    env.pop("CKPTOOL_CRASH_AT", None)
    env.pop("CKPTOOL_FAULT_LOG", None)
    env.update(env_extra or {})
    env["PYTHONPATH"] = os.pathsep.join([str(FAULTS), str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "ckptool", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


_SCRATCH: list[pathlib.Path] = []


def _scratch() -> pathlib.Path:
    """A directory for the forked children's output files (removed at exit)."""
    if not _SCRATCH:
        import atexit
        import tempfile

        d = pathlib.Path(tempfile.mkdtemp(prefix="ckptool-crash-"))
        atexit.register(shutil.rmtree, d, True)
        _SCRATCH.append(d)
    return _SCRATCH[0]


def _setup(d):
    d.mkdir()
    for s in (1, 2):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
    src = d.parent / f"{d.name}-src.npz"
    np.savez(src, w=VALUES["w"], b=np.array([b"x", b""]), step=VALUES["step"])
    return src


def _save_args(d, src):
    args = ["save", str(d / "ckpt"), "--from", str(src), "--global-step", "3", "--shards", "2"]
    return args + ["--max-to-keep", "5"]


def _check_dir(d):
    """The invariants that must hold after any kill."""
    for index in sorted(d.glob("*.index")):
        prefix = str(index)[: -len(".index")]
        with ckptool.open(prefix) as ck:
            bad = [(n, e) for n, e in ck.verify() if e]
            assert not bad, f"{index.name} exists but the checkpoint does not verify: {bad}"
    for s in (1, 2):
        with ckptool.open(str(d / f"ckpt-{s}")) as ck:
            assert ck.read("w").tolist() == [float(s)] * 3
    st = read_state(str(d)) if (d / "checkpoint").exists() else None
    if st is not None:
        for p in [st.model_checkpoint_path, *st.all_model_checkpoint_paths]:
            assert os.path.isfile(resolve(str(d), p) + ".index"), f"state names incomplete {p}"


def _check_saved(d):
    with ckptool.open(str(d / "ckpt-3")) as ck:
        assert ck.read("w").tobytes() == VALUES["w"].tobytes()
        assert list(ck.read("b")) == [b"x", b""]
        assert ck.read("step") == 3
        assert all(e is None for _, e in ck.verify())


def _rerun(d, args):
    extra = ["--force"] if (d / "ckpt-3.index").exists() else []
    r = _run(args + extra)
    assert r.returncode == 0, r.stderr
    _check_saved(d)
    _check_dir(d)


def _count_events(tmp_path, args_for):
    d = tmp_path / "count"
    src = _setup(d)
    log = tmp_path / "events.log"
    r = _run(args_for(d, src), {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    _check_saved(d)
    events = [line for line in log.read_text().splitlines() if " fs " in line]
    return events


def test_save_killed_at_every_disk_event(tmp_path):
    events = _count_events(tmp_path, _save_args)
    assert len(events) >= 8, events  # 2 shards + index: open, fsync, rename each
    for k in range(1, len(events) + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"kill-{mode.replace('+', 'p')}-{k}"
            src = _setup(d)
            args = _save_args(d, src)
            r = _run(args, {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, (mode, k, r.returncode, r.stderr)
            _killed("save")
            _check_dir(d)
            _rerun(d, args)
    assert KILLS["by_command"]["save"][0] == 2 * len(events)


def test_save_killed_at_random_moments(tmp_path):
    d0 = tmp_path / "timing"
    src = _setup(d0)
    t0 = time.perf_counter()
    assert _run(_save_args(d0, src)).returncode == 0
    span = time.perf_counter() - t0
    rng = random.Random(11)
    for i in range(8):
        d = tmp_path / f"rand-{i}"
        src = _setup(d)
        args = _save_args(d, src)
        p = _run(args, wait=False)
        time.sleep(rng.uniform(0.3, 1.0) * span)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
        _killed("save", "random")
        _check_dir(d)
        _rerun(d, args)


def test_prune_killed_at_every_disk_event(tmp_path):
    def setup(d):
        d.mkdir()
        for s in range(1, 7):
            ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
        from ckptool.io.control.state import CheckpointState, write_state

        write_state(str(d), CheckpointState("ckpt-6", [f"ckpt-{s}" for s in range(1, 7)]))

    d = tmp_path / "count"
    setup(d)
    log = tmp_path / "prune.log"
    r = _run(["prune", str(d), "--max-to-keep", "2"], {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"p-{mode.replace('+', 'p')}-{k}"
            setup(d)
            r = _run(["prune", str(d), "--max-to-keep", "2"], {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, r.stderr
            _killed("prune")
            for index in d.glob("*.index"):
                with ckptool.open(str(index)[:-6]) as ck:
                    assert all(e is None for _, e in ck.verify()), index
            for keep in ("ckpt-5", "ckpt-6"):
                assert (d / f"{keep}.index").exists(), f"kept {keep} is gone after kill {mode}:{k}"
            st = read_state(str(d))
            for p in st.all_model_checkpoint_paths:
                assert os.path.isfile(resolve(str(d), p) + ".index"), p
            r = _run(["prune", str(d), "--max-to-keep", "2"])
            assert r.returncode == 0, r.stderr
            assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-5.index", "ckpt-6.index"]


def test_prune_moving_into_kept_killed_at_every_disk_event(tmp_path):
    """Issue 36: a prune that moves what it keeps beyond max_to_keep into DIR/kept/ (a pin, steps-every
    beyond and within the window), killed before and after each disk event: no kept checkpoint is ever
    lost (it is whole in DIR or in DIR/kept/), and a rerun ends exactly as an uninterrupted run."""
    argv = ["--max-to-keep", "2", "--keep", "ckpt-2", "--keep-steps-every", "4"]

    def setup(d):
        d.mkdir()
        for s in range(1, 9):
            ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(3, s, np.float32)}, sync=False)
        from ckptool.io.control.state import CheckpointState, write_state

        write_state(str(d), CheckpointState("ckpt-8", [f"ckpt-{s}" for s in range(1, 9)],
                                            [1.7e9 + s for s in range(1, 9)], 1.7e9))

    def whole(prefix):
        try:
            with ckptool.open(str(prefix)) as ck:
                return all(e is None for _, e in ck.verify()) and float(ck.read("w")[0]) == float(prefix.name[5:])
        except ckptool.errors.CkptError:
            return False

    d = tmp_path / "count"
    setup(d)
    log = tmp_path / "prune.log"
    r = _run(["prune", str(d), *argv], {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    assert n >= 10
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"k-{mode.replace('+', 'p')}-{k}"
            setup(d)
            r = _run(["prune", str(d), *argv], {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, r.stderr
            _killed("prune")
            for name in ("ckpt-2", "ckpt-4", "ckpt-7", "ckpt-8"):
                assert whole(d / name) or whole(d / "kept" / name), f"{name} lost after kill {mode}:{k}"
            r = _run(["prune", str(d), *argv])
            assert r.returncode == 0, r.stderr
            assert sorted(p.name for p in d.glob("*.index")) == ["ckpt-7.index", "ckpt-8.index"], (mode, k)
            assert sorted(p.name for p in d.glob("kept/*.index")) == ["ckpt-2.index", "ckpt-4.index", "ckpt-8.index"]
            assert read_state(str(d / "kept")).all_model_checkpoint_paths == ["ckpt-2", "ckpt-4", "ckpt-8"]
            assert not (d / ".ckptool-prune-pending").exists()


def _rename_setup(d):
    d.mkdir()
    src = d / "src" / "ckpt-3"
    ckptool.write(str(src), VALUES, num_shards=2, sync=False)
    return src


def _check_renamed(dst):
    with ckptool.open(str(dst)) as ck:
        assert ck.names() == ["b", "step", "weights"]
        assert ck.read("weights").tobytes() == VALUES["w"].tobytes()
        assert all(e is None for _, e in ck.verify())


@pytest.mark.parametrize("compact", [False, True], ids=["linked", "compact"])
def test_rewrite_names_killed_at_every_disk_event(tmp_path, compact):
    """After any kill: SRC is intact; DST has no index, or is complete and verifies; a rerun
    (with --force when the index made it) finishes the job."""
    def args(d):
        return ["rewrite-names", str(d / "src" / "ckpt-3"), str(d / "dst" / "ckpt-3"), "--rule", "w=weights",
                *(["--compact"] if compact else [])]

    d = tmp_path / "count"
    _rename_setup(d)
    log = tmp_path / "events.log"
    r = _run(args(d), {"CKPTOOL_FAULT_LOG": str(log)})
    assert r.returncode == 0, r.stderr
    _check_renamed(d / "dst" / "ckpt-3")
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    assert n >= 3
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            d = tmp_path / f"r-{mode.replace('+', 'p')}-{k}"
            src = _rename_setup(d)
            before = {p.name: p.read_bytes() for p in src.parent.iterdir()}
            r = _run(args(d), {"CKPTOOL_CRASH_AT": f"{mode}:{k}"})
            assert r.returncode == -signal.SIGKILL, (mode, k, r.stderr)
            _killed("rewrite-names")
            assert {p.name: p.read_bytes() for p in src.parent.iterdir()} == before, "SRC changed"
            dst = d / "dst" / "ckpt-3"
            if (d / "dst" / "ckpt-3.index").exists():
                _check_renamed(dst)
            r = _run(args(d) + (["--force"] if (d / "dst" / "ckpt-3.index").exists() else []))
            assert r.returncode == 0, r.stderr
            _check_renamed(dst)


# -- convert ------------------------------------------------------------------------------------
#
# The same injection points (fs:N / fs+:N, counted by a clean run), but each run is a child
# forked from a multiprocessing fork server that has ckptool imported
# (ckptool._faults.run_armed): ~30 ms a kill instead of an interpreter start (~0.4 s), so every
# event of every target is killed, before and after, in a few seconds.

_FORK_PRELOAD = ["faults", "ckptool.cli.main", "ckptool.cli.commands.convert", "ckptool.ops.transform.convert.run",
                 "ckptool.cli.commands.save", "ckptool.ops.transform.save", "ckptool.cli.commands.prune",
                 "ckptool.ops.retain.prune", "ckptool.cli.commands.rewrite_names", "ckptool.ops.transform.rename.rewrite",
                 "numpy", "ckptool.ops.retain.prune_plan", "ckptool.ops.retain.retention", "ckptool.io.control.lock",
                 "ckptool.ops.read.source", "ckptool.ops.read.reader", "ckptool.ops.write.writer", "zipfile"]
_CTX = []


def _forked(args, tmp, spec="", log="", wait=True):
    """``ckptool ARGS`` in a forked child with ``CKPTOOL_CRASH_AT=spec``: (exit code, output),
    or the started process when not ``wait``."""
    if not _CTX:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_FORK_PRELOAD)
        _CTX.append(ctx)
    out = tmp / f"child-{uuid.uuid4().hex[:8]}.out"
    p = _CTX[0].Process(target=_faults.run_armed, args=([str(a) for a in args], spec, str(log or ""), str(out)))
    p.start()
    if not wait:
        return p
    p.join(60)
    text = out.read_text(errors="replace") if out.exists() else ""
    out.unlink(missing_ok=True)
    return p.exitcode, text


CONVERT_VALUES = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.linspace(0, 1, 5).astype(np.float16),
                  "flag": np.array([True, False]), "step": np.int64(7),
                  "s": np.array([b"x", b"", b"long string"], dtype=object)}
# case: (source, DST relative to its directory, extra args)
CONVERT_CASES = {
    "v2-reshard": ("v2", "ckpt-1", ["--shards", "2"]),
    "v1-to-v2": ("v1", "ckpt-1", ["--shards", "2"]),
    "npz": ("v2", "values.npz", []),
    "safetensors": ("v2", "values.safetensors", ["--exclude", "s"]),
}
V1_FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "data" / "v1" / "sharded"


def _convert_source(tmp, kind, values=CONVERT_VALUES):
    """A source checkpoint (its prefix) in its own directory: V2 in 3 data files, or a copy of
    the V1 fixture (3 files, written by TF)."""
    d = tmp / f"src-{kind}-{uuid.uuid4().hex[:6]}"
    if kind == "v1":
        shutil.copytree(V1_FIXTURE, d)
        return str(d / "v1sharded-?????-of-00003"), d
    d.mkdir()
    ckptool.write(str(d / "ckpt-3"), values, num_shards=3, sync=False)
    return str(d / "ckpt-3"), d


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _fmt(dst_name):
    return "npz" if dst_name.endswith(".npz") else "safetensors" if dst_name.endswith(".safetensors") else "tf"


def _finals(out, dst_name):
    """DST's files in ``out`` (temporaries left out)."""
    if not out.exists():
        return []
    names = [p.name for p in out.iterdir() if ".tempstate" not in p.name]
    if _fmt(dst_name) == "tf":
        return sorted(n for n in names if n == dst_name + ".index" or n.startswith(dst_name + ".data-"))
    return [n for n in names if n == dst_name]


def _outcome(out, dst_name):
    """What DST holds, comparable between runs: the bytes of its files (TF: the index and the
    data files it names; .safetensors; both deterministic), or for .npz (zip timestamps
    differ) the arrays it loads."""
    fmt = _fmt(dst_name)
    if fmt == "npz":
        with np.load(out / dst_name, allow_pickle=False) as z:
            return {k: (z[k].dtype.str, z[k].shape, z[k].tobytes()) for k in z.files}
    if fmt == "tf":
        with ckptool.open(str(out / dst_name)) as ck:
            files = [out / (dst_name + ".index"), *map(pathlib.Path, ck.shard_paths())]
        return {p.name: p.read_bytes() for p in files}
    return {dst_name: (out / dst_name).read_bytes()}


def _complete(out, dst_name):
    """Whether DST exists (for TF: its .index does)."""
    if _fmt(dst_name) == "tf":
        return (out / (dst_name + ".index")).exists()
    return (out / dst_name).exists()


def _source_values(src):
    with ckptool.open(src) as ck:
        return {n: ck.read(n) for n in ck.names()}


def _check_equals_source(out, dst_name, src, args):
    """A complete DST holds the source's tensors exactly (what an uninterrupted run must give)."""
    want = _source_values(src)
    if "--exclude" in args:
        want.pop(args[args.index("--exclude") + 1])
    fmt = _fmt(dst_name)
    if fmt == "tf":
        with ckptool.open(str(out / dst_name)) as ck:
            got = {n: ck.read(n) for n in ck.names()}
            assert all(e is None for _, e in ck.verify())
    elif fmt == "npz":
        with np.load(out / dst_name, allow_pickle=False) as z:
            got = {k: z[k] for k in z.files}
    else:
        from safetensors.numpy import load_file

        got = load_file(str(out / dst_name))
    assert sorted(got) == sorted(want)
    for n, v in want.items():
        g = np.asarray(got[n])
        if v.dtype == object:
            assert g.tolist() == v.tolist(), n
        else:
            assert g.dtype == v.dtype and g.shape == v.shape and g.tobytes() == v.tobytes(), n


def _check_after_kill(capsys, out, dst_name, allowed):
    """DST is absent, or complete and one of the ``allowed`` outcomes; only temporaries beside it."""
    if not out.exists():
        return
    stray = [p.name for p in out.iterdir() if ".tempstate" not in p.name and p.name not in _finals(out, dst_name)]
    assert not stray, f"unexpected files after the kill: {stray}"
    if not _complete(out, dst_name):
        return
    if _fmt(dst_name) == "tf":
        code, _, err = run_cli(capsys, "inspect", out / dst_name, "--verify")
        assert code == 0, f"{dst_name}.index exists but inspect --verify fails: {err}"
    got = _outcome(out, dst_name)
    assert any(got == a for a in allowed), f"{dst_name} is complete but neither the old nor the new result"


class _Convert:
    """One convert case: its source, DST directories, the clean run's result, the checks."""

    def __init__(self, tmp_path, capsys, case, values=CONVERT_VALUES, old=None, old_args=None):
        self.tmp, self.capsys, self.case = tmp_path, capsys, case
        kind, self.dst_name, self.extra = CONVERT_CASES[case]
        self.src, self.src_dir = _convert_source(tmp_path, kind, values)
        self.before = _snapshot(self.src_dir)
        self.old_src = _convert_source(tmp_path, "v2", old)[0] if old is not None else None
        self.old_args = self.extra if old_args is None else old_args
        self.ref = self.setup("ref", old is not None)
        self.old = [_outcome(self.ref, self.dst_name)] if old is not None else []
        self.log = tmp_path / "events.log"
        code, text = _forked(self.args(self.ref, old is not None), tmp_path, log=self.log)
        assert code == 0, text
        _check_equals_source(self.ref, self.dst_name, self.src, self.extra)
        self.want = _outcome(self.ref, self.dst_name)

    def events(self) -> int:
        return sum(1 for line in self.log.read_text().splitlines() if " fs " in line)

    def setup(self, name, with_old):
        """A fresh DST directory; with the old DST in it when ``with_old``."""
        out = self.tmp / name / "out"
        out.mkdir(parents=True)
        if with_old:
            code, _, err = run_cli(self.capsys, "convert", self.old_src, out / self.dst_name, *self.old_args)
            assert code == 0, err
        return out

    def args(self, out, force):
        return ["convert", self.src, str(out / self.dst_name), *self.extra, *(["--force"] if force else [])]

    def check_and_rerun(self, out, what, forced):
        """The invariants after a kill, then a rerun (--force when DST exists or the killed run
        was forced) that must give the clean run's result."""
        assert _snapshot(self.src_dir) == self.before, f"the source changed ({what})"
        _check_after_kill(self.capsys, out, self.dst_name, [self.want, *self.old])
        code, _, err = run_cli(self.capsys, *self.args(out, forced or _complete(out, self.dst_name)))
        assert code == 0, (what, err)
        assert _outcome(out, self.dst_name) == self.want, f"the rerun after {what} differs from a clean run"
        assert _finals(out, self.dst_name) == _finals(self.ref, self.dst_name), what


def _convert_kills(tmp_path, capsys, case, old=None, old_args=None):
    """Kill ``ckptool convert`` of ``case`` at every disk event, before and after; ``old``: the
    values of a DST that exists already (converted from them with ``old_args``, default the
    case's) and is replaced with --force."""
    c = _Convert(tmp_path, capsys, case, old=old, old_args=old_args)
    n = c.events()
    assert n >= 3, c.log.read_text()
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            out = c.setup(f"{mode.replace('+', 'p')}-{k}", old is not None)
            code, text = _forked(c.args(out, old is not None), tmp_path, spec=f"{mode}:{k}")
            assert code == -signal.SIGKILL, (case, mode, k, code, text)
            _killed("convert")
            c.check_and_rerun(out, f"{mode}:{k}", old is not None)
    return n


@pytest.mark.parametrize("case", list(CONVERT_CASES))
def test_convert_killed_at_every_disk_event(tmp_path, capsys, case):
    """After any kill: SRC is byte-identical; DST is absent or complete (a V2 .index only over
    complete data: inspect --verify passes) and equal to a clean run's; only .tempstate
    temporaries beside it; a rerun (--force when DST exists) gives the clean run's result."""
    _convert_kills(tmp_path, capsys, case)


OLD_VALUES = {"w": -np.arange(12, dtype=np.float32).reshape(3, 4), "h": np.zeros(5, np.float16),
              "flag": np.array([False, False]), "step": np.int64(1), "s": np.array([b"old", b"", b"o"], dtype=object)}


@pytest.mark.parametrize("case, old_args", [("v2-reshard", None), ("v2-reshard", ["--shards", "4"]),
                                            ("npz", None), ("safetensors", None)],
                         ids=["v2-same-names", "v2-from-4-shards", "npz", "safetensors"])
def test_convert_force_killed_at_every_disk_event(tmp_path, capsys, case, old_args):
    """``convert --force`` over an existing DST (other values; the same file names, or for V2
    also 4 data files that become stale) killed at every event: DST is the old one, the new
    one, or absent, never new data under the old index; the rerun leaves no stale data file."""
    _convert_kills(tmp_path, capsys, case, old=OLD_VALUES, old_args=old_args)


@pytest.mark.parametrize("case", list(CONVERT_CASES))
def test_convert_fsyncs_before_publishing(tmp_path, case):
    """Every file convert renames into place was fsynced before, and the directory after the
    last rename. (A SIGKILL cannot tell; a power cut can: a renamed-in file with no data.)"""
    kind, dst_name, extra = CONVERT_CASES[case]
    src, _ = _convert_source(tmp_path, kind)
    log = tmp_path / "events.log"
    code, text = _forked(["convert", src, tmp_path / "out" / dst_name, *extra], tmp_path, log=log)
    assert code == 0, text
    events = [line.split(" ", 3)[2:] for line in log.read_text().splitlines() if " fs " in line]
    renames = 0
    for i, (what, _detail) in enumerate(events):
        if what in ("replace", "rename"):
            renames += 1
            synced = sum(1 for w, _ in events[:i] if w == "fsync")
            assert synced >= renames, f"{_detail}: renamed into place before it was fsynced: {events[:i + 1]}"
    assert renames and events[-1][0] == "fsync", f"the directory is not fsynced after the last rename: {events}"


@pytest.mark.parametrize("case", ["v2-reshard", "npz", "safetensors"])
def test_convert_killed_at_random_moments(tmp_path, capsys, case):
    """SIGKILL at a random moment of a conversion with a 2 MB tensor (every other run with
    --force over an old DST); the same checks as at disk events."""
    values = dict(CONVERT_VALUES, big=np.arange(1 << 19, dtype=np.float32))
    old = dict(OLD_VALUES, big=np.zeros(1 << 19, np.float32))
    c = _Convert(tmp_path, capsys, case, values=values, old=old)
    spans = []
    for i in range(2):
        out = c.setup(f"timing-{i}", False)
        t0 = time.perf_counter()
        code, text = _forked(c.args(out, False), tmp_path)
        spans.append(time.perf_counter() - t0)
        assert code == 0, text
    span = min(spans)
    rng = random.Random(f"convert-{case}")
    for i in range(4):
        forced = i % 2 == 1
        out = c.setup(f"rand-{i}", forced)
        p = _forked(c.args(out, forced), tmp_path, wait=False)
        time.sleep(rng.uniform(0.1, 1.0) * span)
        p.kill()
        p.join(60)
        if p.exitcode == -signal.SIGKILL:  # else it had finished: nothing to count
            _killed("convert", "random")
        c.check_and_rerun(out, f"random kill {i}", forced)


def _force_args(case, src, out):
    if case == "save":
        return ["save", out / "ckpt-3", "--from", src, "--shards", "2", "--no-state", "--force"]
    return ["rewrite-names", src, out / "ckpt-3", "--rule", "w=weights", "--force",
            *(["--compact"] if case == "rewrite-names-compact" else [])]


@pytest.mark.parametrize("case", ["save", "rewrite-names", "rewrite-names-compact"])
def test_force_over_same_file_names_killed_at_every_disk_event(tmp_path, capsys, case):
    """``save --force`` and ``rewrite-names --force`` over a checkpoint with the same data file
    names, killed at every event: DST is the old checkpoint, the new one, or absent; never the
    old index over new data (which fails verification)."""
    if case == "save":
        src = tmp_path / "values.npz"
        np.savez(src, w=VALUES["w"], b=np.array([b"x", b""]), step=VALUES["step"])
    else:
        src = _rename_setup(tmp_path / "src")

    def setup(name):
        out = tmp_path / name
        ckptool.write(str(out / "ckpt-3"), {"weights": np.zeros(2, np.float32), "x": np.int64(1)},
                      num_shards=2, sync=False)
        return out

    old = _outcome(setup("old"), "ckpt-3")
    ref, log = setup("ref"), tmp_path / "events.log"
    code, text = _forked(_force_args(case, src, ref), tmp_path, log=log)
    assert code == 0, text
    want = _outcome(ref, "ckpt-3")
    n = sum(1 for line in log.read_text().splitlines() if " fs " in line)
    assert n >= 3
    for k in range(1, n + 1):
        for mode in ("fs", "fs+"):
            out = setup(f"{mode.replace('+', 'p')}-{k}")
            code, text = _forked(_force_args(case, src, out), tmp_path, spec=f"{mode}:{k}")
            assert code == -signal.SIGKILL, (case, mode, k, code, text)
            _killed(case.split("-compact")[0])
            _check_after_kill(capsys, out, "ckpt-3", [want, old])
            code, text = _forked(_force_args(case, src, out), tmp_path)
            assert code == 0, text
            assert _outcome(out, "ckpt-3") == want
