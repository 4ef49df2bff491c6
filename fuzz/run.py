"""Run fuzz cases: every command on mutated trees (the default), or one parser-level target.

    python -m fuzz.run --cases 20000 [--workers 2] [--seed 0] [--timeout 3] [--mem-mb 1024] [--keep]
    python -m fuzz.run --case 4711          # rebuild and replay case 4711, print its traceback
    python -m fuzz.run --case 4711 --dump   # print the case (files, argv) as JSON
    python -m fuzz.run --target read --cases 100000   # the parser-level targets below

The default target, ``ops`` (fuzz/ops.py): each case builds a directory tree
(mutated TF-written checkpoints, state file, .ckptool.toml, files that are
not ours, symlinks, FIFOs) and runs one command in-process (list-variables,
inspect, --tensor, --stats, --verify, --tree, diff, convert to tf, npz and
safetensors, rewrite-names, prune, state, du, save, prune --keep-best, average,
rm, prune --clean-temp, or the library). Case N
is a pure function of (seed, N). ``--keep`` minimizes one case of each new
failure class and saves it under tests/data/fuzz_regressions/, where
tests/robustness/test_fuzz_regressions.py replays it.

Targets: open (open + variables), read (every tensor, CRC on and off), verify
(Checkpoint.verify and, for some cases, the CLI's inspect --verify /
list-variables), state (hostile and mutated state files: read_state, locate),
prune (hostile state files and corrupt checkpoints: ckptool.ops.retain.prune.prune never
touches anything outside the directory). Exit 1 if any case let a
non-ckptool exception escape, ran past its deadline, or hit the memory cap.
With atheris installed, ``--atheris`` drives the byte mutations of the index
from libFuzzer instead of the built-in mutators.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from fuzz import engine  # noqa: E402


def _atheris(target: str) -> None:  # pragma: no cover - optional
    import random

    import atheris

    scratch = engine.Scratch()
    seeds = engine.load_seeds(scratch.root)
    fn = engine.CHECKPOINT_TARGETS[target]

    def one(data: bytes) -> None:
        s = seeds[len(data) % len(seeds)]
        d = scratch.reset()
        files = dict(s.files)
        files[s.table_files()[0]] = data
        engine._write_files(d, files)
        try:
            with engine.deadline(10), engine.memory_cap(1 << 30):
                fn(str(d / s.prefix), random.Random(0))
        except engine.CkptError:
            pass

    atheris.Setup(sys.argv[:1], one)
    atheris.Fuzz()


def _ops(args) -> int:
    import json

    from fuzz import ops, pool

    timeout = args.timeout or 3.0
    if args.case is not None:
        case = ops.make_case(args.case, args.seed)
        if args.dump:
            print(json.dumps(case.to_json(), indent=1))
            return 0
        print(f"case {args.case}: {case.desc}")
        print("argv: ckptool " + " ".join(case.argv))
        with engine.memory_cap(args.mem_mb << 20):
            outcome, failure, tb = ops.replay(case, timeout)
        print(f"outcome: {outcome}")
        if failure:
            print(tb, file=sys.stderr)
        return 1 if failure else 0

    def progress(s):
        if args.verbose and s.cases % 1000 == 0:
            print(f"  {s.cases} cases, {sum(len(v) for v in s.failures.values())} failures", file=sys.stderr)

    summary = pool.run(range(args.start, args.start + args.cases), seed=args.seed, workers=args.workers,
                       timeout=timeout, mem_mb=args.mem_mb, progress=progress)
    print(summary.report(), flush=True)
    for key, tb in list(summary.tracebacks.items())[:3] if args.verbose else ():
        print(f"--- {key}\n{tb}", file=sys.stderr)
    if args.keep:
        pool.keep_failures(summary, args.seed, timeout, log=sys.stdout)
    return 1 if summary.failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--target", choices=("ops",) + engine.TARGETS + ("all",), default="ops")
    ap.add_argument("--case", type=int, default=None, help="replay one ops case in-process")
    ap.add_argument("--dump", action="store_true", help="with --case: print the case as JSON")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="save a minimized fixture per new failure class")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first case number (replay)")
    ap.add_argument("--timeout", type=float, default=None, help="per-case deadline, seconds (3; 10 for targets)")
    ap.add_argument("--mem-mb", type=int, default=1024, help="address space allowed above the baseline")
    ap.add_argument("--atheris", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.atheris:
        _atheris("read" if args.target == "all" else args.target)
        return 0
    if args.case is not None or args.target == "ops":
        return _ops(args)
    args.timeout = args.timeout or 10.0
    targets = engine.TARGETS if args.target == "all" else (args.target,)
    failed = 0
    for t in targets:
        t0 = time.perf_counter()
        stats = engine.run(t, args.cases, seed=args.seed, timeout=args.timeout, mem_cap=args.mem_mb << 20,
                           start=args.start, log=sys.stderr if args.verbose else None)
        print(f"{stats.line()} in {time.perf_counter() - t0:.1f}s", flush=True)
        for i, desc, tb in stats.failures[:3]:
            print(f"--- case {i}: {desc}\n{tb}", file=sys.stderr)
        failed += len(stats.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
