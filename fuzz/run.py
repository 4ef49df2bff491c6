"""Run as many fuzz cases as asked against one target (or all).

    python fuzz/run.py --cases 100000 --target read [--seed 0] [--timeout 10] [--mem-mb 1024]
    python fuzz/run.py --cases 1 --start 4711 --target verify -v   # replay case 4711

Targets: open (open + variables), read (every tensor, CRC on and off), verify
(Checkpoint.verify and, for some cases, the CLI's inspect --verify /
list-variables), state (hostile and mutated state files: read_state, locate),
prune (hostile state files and corrupt checkpoints: ckptool.ops.prune.prune never
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
    import atheris
    import random

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--target", choices=engine.TARGETS + ("all",), default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first case number (replay)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-case deadline, seconds")
    ap.add_argument("--mem-mb", type=int, default=1024, help="address space allowed above the baseline")
    ap.add_argument("--atheris", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.atheris:
        _atheris("read" if args.target == "all" else args.target)
        return 0
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
