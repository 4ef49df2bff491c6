"""Run operation-fuzz cases (fuzz/ops.py) on a pool of forked workers, minimize failures,
keep them as regression fixtures.

Workers are forked after every module is imported and the seeds are loaded,
so a case costs only its own work. Each worker caps its address space
(RLIMIT_AS: its mapping at start + ``mem_mb``) and arms a per-case SIGALRM
deadline; the parent also kills a worker whose case runs past four times the
deadline (a hang SIGALRM cannot break) and starts a fresh one.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import re
import resource
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait

from fuzz import engine, ops

FIXTURES = ops.ROOT / "tests" / "data" / "fuzz_regressions"


@dataclass
class Summary:
    cases: int = 0
    seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)  # outcome label -> count
    by_op: Counter = field(default_factory=Counter)  # (op, ok|error|FAIL) -> count
    failures: dict = field(default_factory=dict)  # key -> [case numbers]
    tracebacks: dict = field(default_factory=dict)  # key -> first traceback

    def add(self, number: int, outcome: str, key: str | None, tb: str | None) -> None:
        self.cases += 1
        op = ops.OPS[number % len(ops.OPS)]
        self.outcomes[outcome] += 1
        kind = "FAIL" if key else ("ok" if outcome == "exit 0" else "refused")
        self.by_op[(op, kind)] += 1
        if key:
            self.failures.setdefault(key, []).append(number)
            self.tracebacks.setdefault(key, tb or "")

    def report(self) -> str:
        n_fail = sum(len(v) for v in self.failures.values())
        ok = sum(v for (op, k), v in self.by_op.items() if k == "ok")
        refused = sum(v for (op, k), v in self.by_op.items() if k == "refused")
        lines = [f"fuzz: {self.cases} cases in {self.seconds:.1f}s: {ok} succeeded, {refused} refused with a "
                 f"ckptool error, {n_fail} failed in {len(self.failures)} classes"]
        per_op = []
        for op in ops.OPS:
            per_op.append(f"{op} {sum(v for (o, k), v in self.by_op.items() if o == op)}")
        lines.append("  per op: " + ", ".join(per_op))
        for key, nums in sorted(self.failures.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  FAIL {key}: {len(nums)} cases, e.g. --case {nums[0]}")
        return "\n".join(lines)


def preload() -> None:
    """Import everything a case may touch, load the seeds, and run one case of each op."""
    import importlib

    cli_main = importlib.import_module("ckptool.cli.main")

    for mod in cli_main.COMMANDS.values():
        try:
            importlib.import_module(f"ckptool.cli.commands.{mod}")
        except ImportError:
            pass
    for name in ("numpy", "ml_dtypes", "safetensors.numpy", "cramjam", "zipfile", "ckptool.ops.read.reader",
                 "ckptool.ops.write.writer", "ckptool.ops.transform.convert.run", "ckptool.ops.transform.rename.rewrite", "ckptool.ops.inspect.diff"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    ops.disk_seeds()
    for i in range(len(ops.OPS)):
        ops.replay(ops.make_case(i))


def _vm_size() -> int:
    return engine._vm_size()


def _worker(conn, seed: int, timeout: float, mem_mb: int) -> None:  # pragma: no cover - in a child
    base_root = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    base = pathlib.Path(tempfile.mkdtemp(prefix="ckptool-fuzzw-", dir=base_root))
    if mem_mb > 0 and _vm_size():
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = _vm_size() + (mem_mb << 20)
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        while True:
            number = conn.recv()
            if number is None:
                break
            try:
                case = ops.make_case(number, seed)
                outcome = ops.run_case(case, base, timeout)
                conn.send((number, outcome, None, None))
            except ops.Failure as f:
                tb = "".join(traceback.format_exception(f.__cause__ or f))[-3000:]
                conn.send((number, "FAIL " + f.key, f.key, tb))
            except BaseException as e:  # noqa: BLE001 - the harness itself, reported as such
                tb = "".join(traceback.format_exception(e))[-3000:]
                conn.send((number, "FAIL harness", f"harness-{type(e).__name__}", tb))
    finally:
        ops._rmtree(base)


def run(numbers, seed: int = 0, workers: int = 2, timeout: float = 3.0, mem_mb: int = 1024,
        progress=None) -> Summary:
    """Run the given case numbers; every case is one of (seed, number)."""
    ctx = multiprocessing.get_context("fork")
    preload()
    todo = list(numbers)[::-1]
    summary = Summary()
    t0 = time.monotonic()
    slots: list[list] = []  # [process, conn, number or None, started]

    def spawn():
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(child, seed, timeout, mem_mb), daemon=True)
        p.start()
        child.close()
        return [p, parent, None, 0.0]

    def feed(slot):
        if todo:
            slot[2] = todo.pop()
            slot[3] = time.monotonic()
            slot[1].send(slot[2])
        else:
            slot[2] = None

    try:
        for _ in range(max(1, workers)):
            slots.append(spawn())
            feed(slots[-1])
        while any(s[2] is not None for s in slots):
            ready = wait([s[1] for s in slots if s[2] is not None], timeout=0.5)
            now = time.monotonic()
            for s in slots:
                if s[2] is None:
                    continue
                if s[1] in ready:
                    try:
                        number, outcome, key, tb = s[1].recv()
                    except EOFError:  # the worker died (a crash of the interpreter, say)
                        number, outcome = s[2], "FAIL worker-died"
                        key, tb = f"worker-died@{ops.OPS[s[2] % len(ops.OPS)]}", f"exit code {s[0].exitcode}"
                        s[0].join(1)
                        s[:] = spawn()
                    summary.add(number, outcome, key, tb)
                    if progress:
                        progress(summary)
                    feed(s)
                elif now - s[3] > timeout * 4 + 10:
                    number = s[2]
                    s[0].kill()
                    s[0].join(5)
                    summary.add(number, "FAIL killed", f"killed-hang@{ops.OPS[number % len(ops.OPS)]}",
                                f"case {number} ran past {timeout * 4 + 10}s; SIGALRM did not stop it")
                    s[:] = spawn()
                    feed(s)
    finally:
        for s in slots:
            try:
                s[1].send(None)
            except (OSError, BrokenPipeError):
                pass
        for s in slots:
            s[0].join(5)
            if s[0].is_alive():
                s[0].kill()
                s[0].join(1)
    summary.seconds = time.monotonic() - t0
    return summary


# --------------------------------------------------------------------------- minimizing and keeping

def _fails_same(case: ops.Case, key: str, timeout: float) -> bool:
    with engine.memory_cap(1 << 30):
        _, f, _ = ops.replay(case, timeout)
    return f is not None and f.key == key


def minimize(case: ops.Case, key: str, timeout: float = 3.0, budget: int = 120) -> ops.Case:
    """Drop files, then argv options, then truncate byte files, while the case fails the same way."""
    tries = 0
    for rel in sorted(case.files):
        if tries >= budget:
            break
        trial = replace(case, files={k: v for k, v in case.files.items() if k != rel},
                        planted=[p for p in case.planted if p != rel])
        tries += 1
        if _fails_same(trial, key, timeout):
            case = trial
    i = 1
    while i < len(case.argv) and tries < budget:
        tok = case.argv[i]
        if tok.startswith("--") and tok != "--debug" and tok not in ops.OP_FLAGS.get(case.op, ()):
            for width in (2, 1):
                trial_argv = case.argv[:i] + case.argv[i + width:]
                tries += 1
                trial = replace(case, argv=trial_argv)
                if len(trial_argv) > 1 and _fails_same(trial, key, timeout):
                    case = trial
                    break
            else:
                i += 1
            continue
        i += 1
    for rel in sorted(case.files, key=lambda k: -len(case.files[k]) if isinstance(case.files[k], bytes) else 0):
        data = case.files[rel]
        if not isinstance(data, bytes) or len(data) < 64:
            continue
        for cut in (len(data) // 2, len(data) * 3 // 4):
            if tries >= budget:
                break
            for trial_data in (data[:cut],):
                files = dict(case.files)
                files[rel] = trial_data
                trial = replace(case, files=files)
                tries += 1
                if _fails_same(trial, key, timeout):
                    case = trial
                    data = trial_data
                    break
    return case


def slug(key: str, number: int) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", key.replace("@", "-").replace("/", ".")).strip("_")[:90] + f"-{number}"


def known_classes() -> dict[str, str]:
    """Failure keys of the kept fixtures still marked as failing -> their fixture file."""
    out = {}
    for p in sorted(FIXTURES.glob("*.json")) if FIXTURES.is_dir() else ():
        doc = json.loads(p.read_text())
        if doc.get("xfail"):
            out[doc["key"]] = p.name
    return out


def save_fixture(case: ops.Case, key: str, tb: str, directory: pathlib.Path = FIXTURES) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    top = key.split("@", 1)[1] if "@" in key else key
    path = directory / (slug(key, case.number) + ".json")
    doc = {"key": key, "top_frame": top, "op": case.op, "xfail": f"open crash class {key}",
           "replay": f"python -m fuzz.run --case {case.number}", "traceback": tb[-2000:], "case": case.to_json()}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def keep_failures(summary: Summary, seed: int = 0, timeout: float = 3.0, log=None) -> list[pathlib.Path]:
    """Minimize and save one fixture per failure class not already kept."""
    have = {json.loads(p.read_text())["key"] for p in FIXTURES.glob("*.json")} if FIXTURES.is_dir() else set()
    saved = []
    for key, nums in sorted(summary.failures.items()):
        if key in have:
            continue
        case = ops.make_case(nums[0], seed)
        if not _fails_same(case, key, timeout):  # flaky or only under the pool's conditions: keep as is
            small = case
        else:
            small = minimize(case, key, timeout)
        path = save_fixture(small, key, summary.tracebacks.get(key, ""))
        saved.append(path)
        if log:
            print(f"kept {key} -> {path.relative_to(ops.ROOT)}", file=log)
    return saved
