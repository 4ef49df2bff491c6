#!/usr/bin/env python3
"""ckptool vs TensorFlow, side by side in one run.

    python bench/run.py [--quick] [--repeat N] [--tf-python PATH | --no-tf]
                        [--only ROW,...] [--write-results] [--json FILE]

Run it with the python that has ckptool installed (e.g. ``/work/venv/bin/python
bench/run.py``). It builds the workloads under ``bench/work/`` (reused when
present; about 1.2 GiB), then runs every row ``--repeat`` times (default 5),
ckptool and TensorFlow alternately, each measured operation in its own process,
and prints a table of medians, ckptool/TF ratios, targets and peak RSS.
``--write-results`` also writes the table to ``bench/RESULTS.md``.

TensorFlow: ``--tf-python PATH`` (or ``CKPTOOL_BENCH_TF_PYTHON``) names a python
that has tensorflow; otherwise ``bench/work/tfvenv`` is used, created with
``python -m venv`` and ``pip install tensorflow-cpu==2.21.0`` when absent.

Workloads (``--quick``: about a tenth of each): 1 GiB as 128 float32 tensors of
8 MiB; 20,000 small variables; one directory of 10,000 checkpoints; 1,000 run
directories of 20 checkpoints each. Rows whose ckptool command or option does
not exist yet are skipped with a note.

Times: "in-process" rows time the operation inside the child after its imports
(what a script pays); "process" rows time the whole command, start-up included
(what a shell or cron job pays). Peak memory is the child's ru_maxrss.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import workloads  # noqa: E402

TF_PIN = "tensorflow-cpu==2.21.0"
CHILD = os.path.join(HERE, "child.py")
LAUNCH = os.path.join(HERE, "launch.py")


# -- running one measured process -------------------------------------------------


@dataclass
class Sample:
    wall: float  # seconds, the whole process
    op: float | None  # seconds, the operation as timed inside the child (None for CLI commands)
    peak_mb: float  # peak RSS of the process, MB (10^6 bytes)
    extra: dict = field(default_factory=dict)


class RunFailed(Exception):
    pass


def measure(argv: list[str], env: dict | None = None) -> Sample:
    """Run ``argv`` to completion in its own process (through bench/launch.py); its wall
    time, peak RSS, and the JSON report it prints last, if any."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as rep:
        subprocess.run([sys.executable, "-S", LAUNCH, rep.name, *argv], stdout=out, stderr=err,
                       stdin=subprocess.DEVNULL, env=env)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        try:
            with open(rep.name) as f:
                launched = json.load(f)
        except ValueError:
            launched = {"exit": "?"}
    if launched["exit"] != 0:
        lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise RunFailed(f"exit {launched['exit']}: {lines[-1] if lines else '(no stderr)'}")
    op, extra = None, {}
    last = stdout.rstrip().rsplit(b"\n", 1)[-1] if stdout.strip() else b""
    if last.startswith(b"{"):
        try:
            doc = json.loads(last)
            op = doc.pop("seconds", None)
            extra = doc
        except ValueError:
            pass
    scale = 1024 if sys.platform.startswith("linux") else 1  # ru_maxrss: KiB on Linux, bytes on macOS
    return Sample(launched["wall"], op, launched["maxrss_kb"] * scale / 1e6, extra)


# -- the tools ----------------------------------------------------------------------


class Tools:
    def __init__(self, tf_python: str | None):
        self.py = sys.executable
        script = os.path.join(os.path.dirname(sys.executable), "ckptool")
        self.ckptool = [script] if os.path.exists(script) else [self.py, "-m", "ckptool"]
        self.tf_python = tf_python
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
        self.ck_env = env
        tf_env = dict(os.environ)
        tf_env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        tf_env["CUDA_VISIBLE_DEVICES"] = ""
        tf_env.pop("PYTHONPATH", None)
        self.tf_env = tf_env
        self._help: dict[str, str | None] = {}
        self.workloads: dict[str, str] = {}

    def cli(self, *args: str) -> list[str]:
        return [*self.ckptool, *args]

    def child(self, op: str, *args: str) -> list[str]:
        return [self.py, CHILD, op, *args]

    def tf_child(self, op: str, *args: str) -> list[str]:
        return [self.tf_python, CHILD, op, *args]

    def help_text(self, command: str) -> str | None:
        """``ckptool COMMAND --help`` output, or None when the command does not exist."""
        if command not in self._help:
            r = subprocess.run(self.cli(command, "--help"), capture_output=True, text=True, env=self.ck_env)
            self._help[command] = r.stdout if r.returncode == 0 else None
        return self._help[command]

    def missing(self, needs: list[str]) -> str | None:
        """Why a row cannot run yet (a missing library function, command or option), else None."""
        for need in needs:
            if need.startswith("work:"):
                if not self.workloads.get(need[5:]):
                    return f"workload {need[5:]} not built (it needs TensorFlow)"
                continue
            if need == "tf":
                if not self.tf_python:
                    return "needs TensorFlow (--tf-python)"
                continue
            if need == "s3":
                r = subprocess.run([self.py, "-c", "import s3fs"], capture_output=True, env=self.ck_env)
                if r.returncode != 0:
                    return "s3fs not installed (pip install -e '.[s3]')"
                continue
            if need.startswith("lib:"):
                r = subprocess.run([self.py, "-c", f"import ckptool; ckptool.{need[4:]}"],
                                   capture_output=True, env=self.ck_env)
                if r.returncode != 0:
                    return f"ckptool.{need[4:]} not available yet"
                continue
            command, _, option = need.partition(" ")
            text = self.help_text(command)
            if text is None:
                return f"`ckptool {command}` not available yet"
            if option and option not in text:
                return f"`ckptool {command} {option}` not available yet"
        return None


def ensure_tf(args) -> str | None:
    if args.no_tf:
        return None
    if args.tf_python:
        return args.tf_python
    venv = os.path.join(args.work, "tfvenv")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"bench: installing {TF_PIN} into {venv} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        # crc32c: the listing rows import ckptool in TF's process
        subprocess.run([py, "-m", "pip", "install", "-q", TF_PIN, "crc32c"], check=True)
    return py


# -- rows -----------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    label: str
    ck: list[str]
    tf: list[str] | None
    metric: str  # "op": time inside the child; "wall": whole process
    target: str  # "ratio<=X", "wall<=X" (seconds), "mem<=X" (MB), "" (none)
    needs: list[str]
    setup: object = None  # callable run before every measurement (untimed)
    note: str = ""
    base_is_ck: bool = False  # the "TF" column is a ckptool baseline (e.g. one thread)
    best: bool = False  # report the best of at least BEST_RUNS runs of each side (see the write rows)
    probe: object = None  # callable after every measurement: a dict kept in the sample's extra
    data_bytes: int = 0  # bytes of tensor data the row reads (the object-store rows' bytes ratio)
    paired: bool = False  # ``ck`` runs both sides in one TF process (child.same_list): its TF time is the TF column


class S3Server:
    """bench/s3server.py on 127.0.0.1 serving the object-store workload (50 ms to first byte,
    90 MiB/s per connection, as S3 documents per request), started when a row needs it."""

    LATENCY, RATE_MIB = 0.05, 90

    def __init__(self, root: str):
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, tools: Tools) -> None:
        if self.proc is not None:
            return
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "s3server.py"), self.root,
                                      "--latency", str(self.LATENCY), "--rate-mib", str(self.RATE_MIB)],
                                     stdout=subprocess.PIPE, text=True)
        port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{port}"
        tools.ck_env.update(AWS_ENDPOINT_URL=self.url, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                            AWS_DEFAULT_REGION="us-east-1")
        for k in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            tools.ck_env.pop(k, None)

    def _call(self, method: str) -> dict:
        import urllib.request

        with urllib.request.urlopen(urllib.request.Request(self.url + "/__stats__", method=method,
                                                           data=b"" if method == "POST" else None)) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        self._call("POST")

    def stats(self) -> dict:
        doc = self._call("GET")
        return {"s3_max_in_flight": doc["max_in_flight"], "s3_bytes": doc["bytes"], "s3_gets": doc["gets"],
                "s3_requests": doc["requests"]}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


def size_text(nbytes: int) -> str:
    return next(f"{nbytes / 2**s:g} {u}" for s, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B"))
                if nbytes >= 2**s or s == 0)


def rows(t: Tools, w: dict, sizes: dict, out: str, s3: S3Server | None = None) -> list[Row]:
    big, many, cdir, runs = w["big"], w["many"], w["dir"], w["runs"]
    n, elems = str(sizes["big_tensors"]), str(sizes["big_elems"])
    nbytes = sizes["big_tensors"] * sizes["big_elems"] * 4
    size = size_text(nbytes)
    mapfile = os.path.join(os.path.dirname(out), "rename-map.json")
    with open(mapfile, "w") as f:
        json.dump({workloads.big_name(i): f"renamed_{i:03d}/kernel" for i in range(sizes["big_tensors"])}, f)

    def clean():
        if os.path.lexists(out):
            shutil.rmtree(out)
        os.makedirs(out)
        # No run pays for the one before: TF's write leaves its 1 GiB dirty in the page
        # cache, and a durable write's fsync would otherwise wait for that writeback too.
        os.sync()

    dir_copy = os.path.join(out, "run")

    def fresh_dir():
        clean()
        workloads.copy_tree(cdir, dir_copy)

    avg_in = [os.path.join(out, "in", f"ckpt-{k}") for k in range(1, 6)]

    def avg_inputs():  # five inputs of `big`, hard-linked (untimed)
        clean()
        os.makedirs(os.path.join(out, "in"))
        for p in avg_in:
            for f in (".index", ".data-00000-of-00001"):
                os.link(big + f, p + f)

    obj_map = os.path.join(os.path.dirname(out), "rename-map-obj.json")
    with open(obj_map, "w") as f:
        json.dump({f"layer_{i:03d}/.ATTRIBUTES/VARIABLE_VALUE": f"renamed_{i:03d}/.ATTRIBUTES/VARIABLE_VALUE"
                   for i in range(sizes["big_tensors"])}, f)
    s3_bytes = sizes["s3_tensors"] * sizes["s3_elems"] * 4
    s3_size = f"{s3_bytes / 2**20:g} MiB, {sizes['s3_tensors']} tensors"
    obj_many = w.get("obj_many", "")
    obj_big = w.get("obj_big", "")
    s3 = s3 or S3Server(w["s3_root"])

    def s3_reset():
        s3.reset()

    many_n = f"{sizes['many']:,}"
    ndir = f"{sizes['dir_ckpts']:,}"
    nruns = f"{sizes['runs']:,}×{sizes['runs_ckpts']}"
    return [
        Row("read", f"read all tensors of {size}, CRC on (in-process)",
            t.child("ck_read_all", big), t.tf_child("tf_read_all", big), "op", "ratio<=1.0",
            ["lib:open"], note="TF: load_checkpoint + get_tensor loop"),
        Row("list", f"list {many_n} variables, cold: first call in a fresh process (in-process)",
            t.child("ck_list", many), t.tf_child("tf_list", many), "op", "ratio<=1.0",
            ["lib:open"], note="TF: tf.train.list_variables, first call (pays TF's lazy set-up)"),
        *[Row(f"list-warm-{k}", f"list {k:,} variables, warm, in one process with TF: best of 15 each, "
                                f"interleaved, each opening afresh (in-process)",
              t.tf_child("same_list", w[f"many_{k}"], "15"), None, "op", "ratio<=0.7", ["lib:open", "tf"],
              paired=True, note="ckptool.open(p).variables() vs the faster of tf.train.list_variables and "
                                "load_checkpoint(p).get_variable_to_shape_map(), one process, interleaved")
          for k in sizes["list_sizes"]],
        *[Row(f"list-cold-{k}", f"list {k:,} variables, cold: first call in a fresh process (in-process)",
              t.child("ck_list", w[f"many_{k}"]), t.tf_child("tf_list", w[f"many_{k}"]), "op",
              "ratio<=1.0", ["lib:open"], note="first call after the imports, both sides")
          for k in sizes["list_sizes"] if k != sizes["many"]],  # that one is the "list" row
        *[Row(f"stats-{k}", f"`inspect --stats --json` {k:,} small variables (process) vs TF reading "
                            f"all {k:,} tensors (process, TF import included)",
              t.cli("inspect", w[f"many_{k}"], "--stats", "--json"), t.tf_child("tf_read_all", w[f"many_{k}"]),
              "wall", "ratio<=1.0", ["inspect --stats"], note="linear: time per variable flat across sizes")
          for k in sizes["stats_sizes"]],
        Row("verify-cores", f"verify {size} in {sizes['big_shards']} shards, one thread per core vs one "
                            f"thread (in-process; \"TF\" column: ckptool, 1 thread)",
            t.child("ck_verify", w["big_sharded"], "0"), t.child("ck_verify", w["big_sharded"], "1"), "op",
            "ratio<=0.6", ["lib:open"], base_is_ck=True,
            note="the TF column is ckptool's own verify on one thread"),
        Row("verify-cores-cli", f"`ckptool verify` {size} in {sizes['big_shards']} shards, default vs "
                                f"`-j 1` (process, start-up included)",
            t.cli("-q", "verify", w["big_sharded"]), t.cli("-q", "verify", "-j", "1", w["big_sharded"]), "wall",
            "", ["verify"], base_is_ck=True,
            note="for the record; both sides pay the same ~60 ms of start-up"),
        # The write rows report each side's best run: on this VM (Firecracker, free page
        # reporting) a run whose page cache lands on pages the host took back runs 5-10x
        # slower, for ckptool, TF and the raw floor alike; the best run is the machine.
        Row("write", f"write {size}, durable: fsync before the renames (in-process, best run)",
            t.child("ck_write", os.path.join(out, "w"), n, elems),
            t.tf_child("tf_write", os.path.join(out, "w"), n, elems), "op", "",
            ["lib:write"], clean, best=True,
            note="TF: tf.train.Checkpoint.write, warm (2nd) write (TF does not fsync); for the record"),
        Row("write-nosync", f"write {size}, no fsync, as TF (in-process, best run)",
            t.child("ck_write", os.path.join(out, "w"), n, elems, "nosync"),
            t.tf_child("tf_write", os.path.join(out, "w"), n, elems), "op", "",
            ["lib:write"], clean, best=True,
            note="ckptool: write(..., sync=False); TF as for write; for the record"),
        Row("write-floor", f"write {size}, no fsync, vs the same bytes raw to one fresh file "
                           f"(in-process, best run; \"TF\" column: the raw write)",
            t.child("ck_write", os.path.join(out, "w"), n, elems, "nosync"),
            t.child("raw_write", os.path.join(out, "w"), n, elems), "op", "ratio<=1.25",
            ["lib:write"], clean, base_is_ck=True, best=True,
            note="the machine's floor, file.write of each array's bytes, no fsync"),
        Row("rewrite", f"rewrite-names on {size} (process)",
            t.cli("rewrite-names", big, os.path.join(out, "r"), "--map", mapfile),
            t.tf_child("tf_rename", big, os.path.join(out, "r"), mapfile), "wall", "ratio<=0.03",
            ["rewrite-names --map"], clean, note="TF: load_checkpoint, get_tensor all, SaveV2 (process)"),
        Row("rewrite-obj", f"rewrite-names on {size} object-based, tf.train.Checkpoint (process)",
            t.cli("rewrite-names", obj_big, os.path.join(out, "r"), "--map", obj_map),
            t.tf_child("tf_rename", obj_big, os.path.join(out, "r"), obj_map), "wall", "ratio<=0.03",
            ["rewrite-names --map", "work:obj_big"], clean,
            note="object-based (the graph rewritten); TF: load_checkpoint, get_tensor all, SaveV2 (process)"),
        Row("stats-obj", f"`inspect --stats --json` {sizes['obj_many']:,} object-based variables, "
                         f"tf.train.Checkpoint (process) vs TF reading all of them (process, TF import included)",
            t.cli("inspect", obj_many, "--stats", "--json"), t.tf_child("tf_read_all", obj_many),
            "wall", "ratio<=1.0", ["inspect --stats", "work:obj_many"],
            note="object-based beside stats-20000 (name-based); TF: load_checkpoint + get_tensor loop"),
        Row("s3-verify", f"`ckptool verify` s3:// {s3_size} vs a raw parallel download of the same bytes "
                         "(process; local S3 server: 50 ms to first byte, 90 MiB/s per connection; "
                         "\"TF\" column: the raw download)",
            t.cli("-q", "verify", w["s3"]), t.child("raw_s3_get", w["s3"], "8", "8"), "wall", "ratio<=1.25",
            ["verify", "s3"], s3_reset, base_is_ck=True, probe=s3.stats, data_bytes=s3_bytes,
            note="raw: s3fs, 8 MiB ranged GETs, 8 in flight, imports included; targets also >= 4 GETs "
                 "in flight, <= 1.1x bytes"),
        Row("s3-stats", f"`inspect --stats` s3:// {s3_size} vs the raw parallel download (process; "
                        "as s3-verify)",
            t.cli("inspect", w["s3"], "--stats"), t.child("raw_s3_get", w["s3"], "8", "8"), "wall", "ratio<=2.0",
            ["inspect --stats", "s3"], s3_reset, base_is_ck=True, probe=s3.stats, data_bytes=s3_bytes,
            note="as s3-verify"),
        Row("s3-verify-big", f"`ckptool verify` s3:// {size_text(sizes['s3_big_bytes'])} in {sizes['s3_big_shards']} "
                             "shards vs a raw parallel download of the same bytes (process; as s3-verify; peak RSS "
                             "bounded by the GETs in flight)",
            t.cli("-q", "verify", w["s3_big"]), t.child("raw_s3_get", w["s3_big"], "8", "8"), "wall",
            "ratio<=1.25;mem<=200", ["verify", "s3"], s3_reset, base_is_ck=True, probe=s3.stats,
            data_bytes=sizes["s3_big_bytes"],
            note="sparse data files (zeros, each tensor's CRC32C right) served by bench/s3server.py; raw: s3fs, "
                 "8 MiB ranged GETs, 8 in flight; targets also >= 4 GETs in flight, <= 1.1x bytes"),
        Row("listcli", f"`list-variables` {many_n} variables (process)",
            t.cli("list-variables", many), [t.tf_python, "-m", "tensorflow.python.tools.inspect_checkpoint",
                                            f"--file_name={many}", "--all_tensor_names"] if t.tf_python else None,
            "wall", "ratio<=0.1", ["list-variables"], note="TF: inspect_checkpoint --all_tensor_names"),
        Row("version", "`ckptool --version` (process)", t.cli("--version"),
            t.tf_child("tf_import"), "wall", "wall<=0.25", [], note="TF column: python -c 'import tensorflow'"),
        Row("verify", f"`inspect --verify` {size}: peak RSS", t.cli("inspect", big, "--verify"),
            None, "wall", "mem<=300", ["inspect --verify"]),
        Row("stats", f"`inspect --stats` {size}: peak RSS", t.cli("inspect", big, "--stats"),
            None, "wall", "mem<=300", ["inspect --stats"]),
        Row("convert-tf", f"`convert` {size} to TF V2: peak RSS", t.cli("convert", big, os.path.join(out, "c")),
            None, "wall", "mem<=300", ["convert"], clean),
        Row("convert-st", f"`convert` {size} to .safetensors: peak RSS",
            t.cli("convert", big, os.path.join(out, "c.safetensors")), None, "wall", "mem<=300", ["convert"], clean),
        Row("convert-npz", f"`convert` {size} to .npz: peak RSS",
            t.cli("convert", big, os.path.join(out, "c.npz")), None, "wall", "mem<=300", ["convert"], clean),
        Row("average", f"`average` of five {size} checkpoints: time, peak RSS",
            t.cli("average", *avg_in, "-o", os.path.join(out, "avg")), None, "wall", "mem<=300",
            ["average"], avg_inputs, note="float64 accumulation, one tensor of one input at a time"),
        Row("prune", f"`prune --max-to-keep 5`, {ndir} checkpoints (process)",
            t.cli("prune", dir_copy, "--max-to-keep", "5"), t.tf_child("tf_prune", dir_copy, "5"), "wall",
            "wall<=5", ["prune --max-to-keep"], fresh_dir, note="TF: CheckpointManager(max_to_keep=5).save() sweep"),
        *[Row(f"retention-{k}", f"retention decisions, {k:,} checkpoints, max_to_keep 5 + every 1 h (in-process)",
              t.child("ck_retention", str(k)), None, "op", "wall<=1", ["lib:open"],
              note="linear: time per checkpoint flat across sizes (no disk: recover + plan)")
          for k in sizes["retention_sizes"]],
        Row("prune-dry", f"`prune --dry-run`, {ndir} checkpoints (process)",
            t.cli("prune", cdir, "--max-to-keep", "5", "--dry-run"), None, "wall", "wall<=5",
            ["prune --dry-run"]),
        Row("du", f"`du` over {nruns} checkpoints (process)", t.cli("du", runs), None, "wall", "wall<=5", ["du"]),
        Row("prune-rec", f"`prune --recursive --dry-run` over {nruns} (process)",
            t.cli("prune", runs, "--recursive", "--max-to-keep", "5", "--dry-run"), None, "wall", "wall<=5",
            ["prune --recursive"]),
    ]


# -- measuring and reporting ------------------------------------------------------------


@dataclass
class Result:
    row: Row
    ck: list[Sample] = field(default_factory=list)
    tf: list[Sample] = field(default_factory=list)
    skipped: str = ""
    failed: str = ""

    def seconds(self, samples: list[Sample]) -> list[float]:
        return [s.op if self.row.metric == "op" and s.op is not None else s.wall for s in samples]

    def reported(self, which: str) -> float | None:
        """The time the table reports for one side: the median run (the best for a ``best`` row)."""
        xs = self.seconds(getattr(self, which))
        return (min(xs) if self.row.best else statistics.median(xs)) if xs else None

    def peak(self, which: str) -> float | None:
        xs = [s.peak_mb for s in getattr(self, which)]
        return max(xs) if xs else None

    def spread(self, which: str) -> float | None:
        xs = self.seconds(getattr(self, which))
        if len(xs) < 2:
            return None
        return (max(xs) - min(xs)) / statistics.median(xs)

    def ratio(self) -> float | None:
        c, t = self.reported("ck"), self.reported("tf")
        return c / t if c is not None and t else None

    def verdict(self) -> str:
        if self.skipped or self.failed or not self.ck or not self.row.target:
            return ""
        verdicts = []
        for target in self.row.target.split(";"):  # every target must be met
            kind, _, value = target.partition("<=")
            got = {"ratio": self.ratio(), "wall": self.reported("ck"), "mem": self.peak("ck")}[kind]
            verdicts.append("n/a" if got is None else "yes" if got <= float(value) else "**NO**")
        return next((v for v in verdicts if v != "yes"), "yes")


#: Runs of each side of a ``best`` row at the least: its runs are bimodal (fast, or 5-10x
#: slower), and three runs of one side can all be slow (seen: 0.74 s vs the floor's 0.21 s).
BEST_RUNS = 7


def run_row(res: Result, repeat: int, tools: Tools, progress) -> None:
    row = res.row
    if row.best:
        repeat = max(repeat, BEST_RUNS)
    if row.paired:  # one process (TF's python, ckptool on its path) times both sides
        env = dict(tools.tf_env, PYTHONPATH=ROOT)
        for i in range(repeat):
            try:
                s = measure(row.ck, env)
            except RunFailed as exc:
                res.failed = f"ckptool and TF: {exc}"
                return
            res.ck.append(s)
            res.tf.append(Sample(s.wall, s.extra.get("tf_seconds"), s.peak_mb, s.extra))
            progress(f"  {row.key} #{i + 1}: ckptool {s.op:.4f} s, TF {s.extra.get('tf_seconds', 0):.4f} s")
        return
    sides = [("ck", row.ck, tools.ck_env)]
    if row.tf is not None and row.base_is_ck:
        sides.append(("tf", row.tf, tools.ck_env))
    elif row.tf is not None and tools.tf_python:
        sides.append(("tf", row.tf, tools.tf_env))
    for i in range(repeat):
        order = sides if i % 2 == 0 else sides[::-1]  # alternate who goes first
        for which, argv, env in order:
            if row.setup:
                row.setup()
            try:
                s = measure(argv, env)
            except RunFailed as exc:
                res.failed = f"{'ckptool' if which == 'ck' else 'TF'}: {exc}"
                return
            if row.probe:
                s.extra.update(row.probe())
            getattr(res, which).append(s)
            progress(f"  {row.key} {which} #{i + 1}: {res.seconds([s])[0]:.3f} s, {s.peak_mb:.0f} MB")


def requests_line(res: Result) -> str:
    """The object-store counts of a row's runs: most GETs in flight, bytes over the data."""
    parts = []
    for which, name in (("ck", "ckptool"), ("tf", "raw")):
        xs = [s.extra for s in getattr(res, which) if "s3_bytes" in s.extra]
        if not xs:
            continue
        flight = [x["s3_max_in_flight"] for x in xs]
        ratio = [x["s3_bytes"] / res.row.data_bytes for x in xs]
        gets = [x["s3_gets"] for x in xs]
        met = min(flight) >= 4 and max(ratio) <= 1.1
        parts.append(f"{name}: {min(flight)}-{max(flight)} GETs in flight, {min(gets)}-{max(gets)} GETs, "
                     f"{max(ratio):.3f}x bytes" + (f" (met: {'yes' if met else 'NO'})" if which == "ck" else ""))
    return "; ".join(parts) or "no counts"


def fmt_s(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def fmt_mb(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f} MB"


def fmt_target(t: str) -> str:
    out = []
    for one in filter(None, t.split(";")):
        kind, _, v = one.partition("<=")
        out.append({"ratio": f"ratio ≤ {v}", "wall": f"≤ {v} s", "mem": f"peak ≤ {v} MB"}.get(kind, ""))
    return ", ".join(out)


def table(results: list[Result]) -> str:
    head = ["operation", "ckptool", "TF", "ckptool/TF", "target", "met", "ckptool peak", "TF peak", "spread ck/TF"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        if r.skipped or (r.failed and not r.ck):
            why = r.skipped or f"failed: {r.failed}"
            lines.append(f"| {r.row.label} | *{why}* |  |  | {fmt_target(r.row.target)} |  |  |  |  |")
            continue
        ratio = r.ratio()
        sp = "/".join("—" if r.spread(w) is None else f"{r.spread(w):.0%}" for w in ("ck", "tf"))
        lines.append("| " + " | ".join([
            r.row.label, fmt_s(r.reported("ck")), fmt_s(r.reported("tf")),
            "—" if ratio is None else f"{ratio:.3f}", fmt_target(r.row.target),
            r.verdict() + (f" (failed: {r.failed})" if r.failed else ""),
            fmt_mb(r.peak("ck")), fmt_mb(r.peak("tf")), sp]) + " |")
    return "\n".join(lines)


def merge_results(old: str, all_rows: list[Row], results: list[Result], header: str) -> str:
    """RESULTS.md with the rows of ``results`` re-measured: their table lines replaced (or
    added, in the harness's row order), the others kept with the run that measured them."""
    lines = old.splitlines()
    table_rows = {ln.split(" | ", 1)[0][2:]: ln for ln in lines if ln.startswith("| ") and " | " in ln}
    head_end = next(i for i, ln in enumerate(lines) if ln.startswith("| operation"))
    old_head = [ln for ln in lines[2:head_end] if ln.strip()]
    fresh = {r.row.label: line for r, line in zip(results, table(results).splitlines()[2:])}
    body = [line for row in all_rows
            for line in ([fresh[row.label]] if row.label in fresh else
                         [table_rows[row.label]] if row.label in table_rows else [])]
    keys = ", ".join(r.row.key for r in results)
    ran = {r.row.key for r in results}

    def stale(line: str) -> bool:  # an earlier re-measurement of only rows measured again now
        return line.startswith("Re-measured rows (") and set(line[18:].split(")", 1)[0].split(", ")) <= ran

    head = [ln for ln in old_head if not stale(ln)] + [f"Re-measured rows ({keys}): " + header.replace("\n", "; ")]
    notes_old = {ln[2:].split(":", 1)[0]: ln for ln in lines if ln.startswith("- ") and ":" in ln
                 and not ln.startswith("- s3-")}
    notes = [f"- {row.key}: {row.note}" if row.label in fresh and row.note else notes_old.get(row.key, "")
             for row in all_rows if row.label in fresh or row.label in table_rows]
    s3_lines = [f"- {r.row.key}: {requests_line(r)}" for r in results if r.row.probe and r.ck]
    s3_old = [ln for ln in lines if ln.startswith("- s3-") and ln.split(":", 1)[0][2:] not in
              {r.row.key for r in results}]
    out = ["# Benchmark results", "", *head, "", "| " + " | ".join(table([]).splitlines()[0][2:-2].split(" | "))
           + " |", table([]).splitlines()[1], *body]
    if s3_lines or s3_old:
        out += ["", "Object-store rows, as the server counted them (every run; targets: >= 4 GETs in flight, "
                "<= 1.1x the data's bytes):", *s3_old, *s3_lines]
    out += ["", "Baselines:", *[n for n in notes if n]]
    return "\n".join(out) + "\n"


def sync_readme(results_md: str) -> None:
    """The README's benchmark table (from its ``Date:`` line to the table's end) as in RESULTS.md."""
    path = os.path.join(ROOT, "README.md")
    try:
        with open(path) as f:
            readme = f.read().splitlines()
    except OSError:
        return
    res = results_md.splitlines()
    start_r = next((i for i, ln in enumerate(res) if ln.startswith("Date:")), None)
    end_r = next((i for i, ln in enumerate(res) if ln.startswith("| ") and i + 1 < len(res)
                  and not res[i + 1].startswith("|")), None)
    start = next((i for i, ln in enumerate(readme) if ln.startswith("Date:")), None)
    if start_r is None or end_r is None or start is None:
        return
    end = next(i for i in range(start, len(readme)) if readme[i].startswith("| ")
               and (i + 1 == len(readme) or not readme[i + 1].startswith("|")))
    block = res[start_r:end_r + 1]
    extra = next((i for i in range(end_r + 1, len(res)) if res[i].startswith("Object-store rows")), None)
    if extra is not None:  # the object-store counts follow the table
        stop = next((i for i in range(extra, len(res)) if not res[i].strip()), len(res))
        block += [""] + res[extra:stop]
        while end + 1 < len(readme) and (not readme[end + 1].strip() and end + 2 < len(readme)
                                         and readme[end + 2].startswith("Object-store rows")
                                         or readme[end + 1].startswith(("Object-store rows", "- s3-"))):
            end += 1
    with open(path, "w") as f:
        f.write("\n".join(readme[:start] + block + readme[end + 1:]) + "\n")


def machine() -> dict:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {"os": f"{platform.system()} {platform.release()}", "cpu": cpu, "cores": os.cpu_count(), "ram": mem,
            "python": platform.python_version()}


def git_commit() -> str:
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def warm(path_prefix: str) -> None:
    """Read a checkpoint's files once so every timed read starts from a warm page cache."""
    d = os.path.dirname(path_prefix)
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            while f.read(64 << 20):
                pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="about a tenth of each workload (128 MiB, ...)")
    ap.add_argument("--repeat", type=int, default=5, help="measurements per tool and row (default 5)")
    ap.add_argument("--tf-python", default=os.environ.get("CKPTOOL_BENCH_TF_PYTHON"),
                    help="a python with tensorflow (default: bench/work/tfvenv, created when absent)")
    ap.add_argument("--no-tf", action="store_true", help="ckptool only (no TensorFlow columns)")
    ap.add_argument("--only", default="", help="comma-separated row keys (read,list,write,rewrite,listcli,...)")
    ap.add_argument("--work", default=os.path.join(HERE, "work"), help="workload directory (default bench/work)")
    ap.add_argument("--sizes", default="", help=argparse.SUPPRESS)  # "toy" for the smoke test
    ap.add_argument("--write-results", action="store_true", help="write the table to bench/RESULTS.md")
    ap.add_argument("--json", metavar="FILE", help="also write every sample as JSON")
    args = ap.parse_args(argv)

    sizes = workloads.TOY if args.sizes == "toy" else workloads.QUICK if args.quick else workloads.FULL
    work = os.path.join(args.work, "toy" if args.sizes == "toy" else "quick" if args.quick else "full")
    tools = Tools(ensure_tf(args))
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    log(f"bench: building workloads under {work} (reused when present)")
    w = workloads.build_all(work, sizes, tools.tf_python)
    tools.workloads = w
    log(f"bench: workloads ready in {time.perf_counter() - t0:.1f} s")
    for key in ("big", "many", "big_sharded"):
        warm(w[key])
    for key in w:
        if key.startswith("many_"):
            warm(w[key])
    # Bytecode for ckptool, as pip writes it on install (TF's is there): a source checkout
    # under PYTHONDONTWRITEBYTECODE would otherwise compile every module on every start.
    compileall.compile_dir(os.path.join(ROOT, "ckptool"), quiet=1)
    out = os.path.join(work, "out")
    s3 = S3Server(w["s3_root"])
    all_rows = rows(tools, w, sizes, out, s3)
    only = {k for k in args.only.split(",") if k}
    unknown = only - {r.key for r in all_rows}
    if unknown:
        ap.error(f"unknown rows: {', '.join(sorted(unknown))}")
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    results = []
    for row in all_rows:
        if only and row.key not in only:
            continue
        res = Result(row)
        res.skipped = tools.missing(row.needs) or ""
        if res.skipped:
            log(f"bench: {row.key}: skipped ({res.skipped})")
        else:
            log(f"bench: {row.key}: {row.label}")
            if row.probe:
                s3.start(tools)
            try:
                run_row(res, args.repeat, tools, log)
            finally:
                if row.probe:
                    log(f"  {row.key}: {requests_line(res)}")
            if res.failed:
                log(f"bench: {row.key}: FAILED: {res.failed}")
        results.append(res)
    s3.stop()
    if os.path.lexists(out):
        shutil.rmtree(out)
    load_after = os.getloadavg()
    m = machine()
    tf_version = "—"
    if tools.tf_python:
        r = subprocess.run([tools.tf_python, "-c", "import tensorflow as tf; print(tf.__version__)"],
                           capture_output=True, text=True, env=tools.tf_env)
        tf_version = r.stdout.strip() or "?"
    header = (
        f"Date: {started:%Y-%m-%d %H:%M} UTC; ckptool {git_commit()}; TensorFlow {tf_version}; "
        f"python {m['python']}\n"
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram']} RAM, {m['os']}\n"
        f"Command: `python bench/run.py{' --quick' if args.quick else ''} --repeat {args.repeat}`; "
        f"medians of {args.repeat} (where the row says best run: the best of at least {BEST_RUNS}); "
        f"load average before/after: "
        f"{load_before[0]:.2f}/{load_after[0]:.2f}; spread = (max-min)/median"
    )
    text = header + "\n\n" + table(results) + "\n"
    s3_lines = [f"- {r.row.key}: {requests_line(r)}" for r in results if r.row.probe and r.ck]
    if s3_lines:
        text += ("\nObject-store rows, as the server counted them (every run; targets: >= 4 GETs in flight, "
                 "<= 1.1x the data's bytes):\n" + "\n".join(s3_lines) + "\n")
    print(text)
    if args.write_results:
        path = os.path.join(HERE, "RESULTS.md")
        if only and os.path.exists(path):  # some rows re-measured: the others kept as they were
            with open(path) as f:
                doc = merge_results(f.read(), all_rows, results, header)
        else:
            notes = "\n".join(f"- {r.row.key}: {r.row.note}" for r in results if r.row.note)
            doc = "# Benchmark results\n\n" + text + "\nBaselines:\n" + notes + "\n"
        with open(path, "w") as f:
            f.write(doc)
        sync_readme(doc)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": [
                {"key": r.row.key, "label": r.row.label, "target": r.row.target, "skipped": r.skipped,
                 "failed": r.failed, "verdict": r.verdict(), "ratio": r.ratio(),
                 "ck": [s.__dict__ for s in r.ck], "tf": [s.__dict__ for s in r.tf]} for r in results]},
                f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
