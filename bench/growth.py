#!/usr/bin/env python3
"""How cost grows with the checkpoint: ckptool, TensorFlow and the raw floor, point by point.

    python bench/growth.py [--quick] [--repeat N] [--tf-python PATH | --no-tf]
                           [--only variables,bytes] [--write-results] [--json FILE]

Two families of points, each measured ``--repeat`` times (default 3), best run reported:

* variables: 1k, 10k, 100k and 300k small variables (the values of workloads.many_spec),
  name-based and object-based (workloads.obj_spec: thousands of objects under one parent);
  operations: list (ckptool and TF in one process, interleaved: bench/child.py same_list),
  ``inspect --stats --json``, ``verify``, ``convert`` to .safetensors and ``rewrite-names``
  (name-based: a map renaming every variable; object-based: the scope rule ``model/=net/``);
* bytes: 64 MiB, 1 GiB and 4 GiB of float32 tensors of 8 MiB; operations: read every tensor
  (in-process), ``verify``, ``inspect --stats``, ``convert`` to .safetensors and to a TF V2
  prefix.

For each point and operation it prints ckptool's time (a ``ckptool`` command: the whole
process, start-up included; in-process where the row says), TF's (in-process, import
excluded: reading every tensor with tf.train.load_checkpoint + get_tensor, listing, or
rename as read + SaveV2; "—" where TF has no such operation), the raw floor (in-process:
every byte of the files read as cat would; for listing, the index), the ratios, and
ckptool's peak RSS with its memory per variable (or per GiB). Then, per operation, the
fitted growth exponent k of time ~ size^k for each side (1.0: linear), and of ckptool's
peak RSS. ``--write-results`` puts the table in bench/RESULTS.md (its "Growth" section).
Workloads are built under bench/work/growth/ (about 11 GiB at full size; outputs are
removed after each run). Timings from a loaded machine are not results: run it idle.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run as harness  # noqa: E402
import workloads  # noqa: E402

FULL = {"variables": (1_000, 10_000, 100_000, 300_000), "bytes": (64 << 20, 1 << 30, 4 << 30), "tensor": 8 << 20}
QUICK = {"variables": (1_000, 10_000, 30_000), "bytes": (16 << 20, 128 << 20, 512 << 20), "tensor": 8 << 20}
TOY = {"variables": (50, 200), "bytes": (64 << 10, 256 << 10), "tensor": 32 << 10}

VAR_OPS = ("list", "stats", "verify", "convert-st", "rename")
BYTE_OPS = ("read", "verify", "stats", "convert-st", "convert-tf")


def size_text(n: int) -> str:
    return next(f"{n / 2**s:g} {u}" for s, u in ((30, "GiB"), (20, "MiB"), (10, "KiB"), (0, "B")) if n >= 2**s or not s)


class Point:
    """One measured operation at one size: the best of each side's runs."""

    def __init__(self, family: str, kind: str, size: int, op: str):
        self.family, self.kind, self.size, self.op = family, kind, size, op
        self.ck: float | None = None
        self.tf: float | None = None
        self.raw: float | None = None
        self.peak_mb: float | None = None
        self.note = ""

    def take(self, side: str, seconds: float | None, peak_mb: float | None = None) -> None:
        if seconds is None:
            return
        best = getattr(self, side)
        setattr(self, side, seconds if best is None else min(best, seconds))
        if peak_mb is not None:
            self.peak_mb = peak_mb if self.peak_mb is None else max(self.peak_mb, peak_mb)


def _seconds(s: harness.Sample, in_process: bool) -> float:
    return s.op if in_process and s.op is not None else s.wall


#: The TF and raw-floor runs of a workload serve each operation that compares with them (TF
#: reading every tensor is the baseline of stats, verify and convert alike): measured once.
_MEASURED: dict[tuple[str, ...], list[harness.Sample]] = {}


def measure_point(p: Point, sides: dict, repeat: int, log) -> None:
    """``sides``: side -> (argv, env, in_process, setup or None); alternating who goes first."""
    order = list(sides.items())
    for i in range(repeat):
        for side, (argv, env, in_process, setup) in (order if i % 2 == 0 else order[::-1]):
            known = _MEASURED.get(tuple(argv), []) if side in ("tf", "raw") and not setup else []
            if i < len(known):
                p.take(side, _seconds(known[i], in_process))
                continue
            if setup:
                setup()
            try:
                s = harness.measure(argv, env)
                if side in ("tf", "raw") and not setup:
                    _MEASURED.setdefault(tuple(argv), []).append(s)
            except harness.RunFailed as exc:
                p.note = f"{side}: {exc}"
                log(f"  {p.kind} {size_text(p.size) if p.family == 'bytes' else p.size} {p.op} {side}: FAILED {exc}")
                continue
            if side == "pair":  # one TF process timed both (listing); its peak is TF's
                p.take("ck", s.op)
                p.take("tf", s.extra.get("tf_seconds"))
            else:
                p.take(side, _seconds(s, in_process), s.peak_mb if side == "ck" else None)
            log(f"  {p.kind} {p.size:,} {p.op} {side} #{i + 1}: {_seconds(s, in_process):.4f} s, {s.peak_mb:.0f} MB")


def variable_points(tools, w: dict, sizes: dict, out: str, repeat: int, log) -> list[Point]:
    points = []
    for kind in ("names", "objects"):
        for n in sizes["variables"]:
            prefix = w[f"{kind}_{n}"]
            d = os.path.dirname(prefix)
            dst = os.path.join(out, "r", "ckpt")
            mapfile = os.path.join(out, "map.json")

            def clean():
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)

            def with_map(prefix=prefix, mapfile=mapfile):
                clean()
                import ckptool

                with ckptool.open(prefix) as ck:
                    names = ck.names()
                with open(mapfile, "w") as f:  # every variable renamed (TF's side renames by this map)
                    json.dump({nm: nm.replace("model/", "net/", 1) for nm in names}, f)

            rule = ["--rule", "model/=net/"] if kind == "objects" else ["--map", mapfile]
            raw = [tools.py, harness.CHILD, "raw_read", d]
            tf_read = tools.tf_child("tf_read_all", prefix) if tools.tf_python else None
            pair_env = dict(tools.tf_env, PYTHONPATH=harness.ROOT)
            listing = ({"pair": (tools.tf_child("same_list", prefix, "9"), pair_env, True, None)} if tools.tf_python
                       else {"ck": (tools.child("ck_list_warm", prefix), tools.ck_env, True, None)})
            ops = {
                "list": listing | {"raw": ([tools.py, harness.CHILD, "raw_read", prefix + ".index"], tools.ck_env,
                                           True, None)},
                "stats": {"ck": (tools.cli("inspect", prefix, "--stats", "--json"), tools.ck_env, False, None)},
                "verify": {"ck": (tools.cli("-q", "verify", prefix), tools.ck_env, False, None)},
                "convert-st": {"ck": (tools.cli("-q", "convert", prefix, os.path.join(out, "c.safetensors")),
                                      tools.ck_env, False, clean)},
                "rename": {"ck": (tools.cli("-q", "rewrite-names", prefix, dst, *rule), tools.ck_env, False,
                                  with_map)},
            }
            for op, sides in ops.items():
                p = Point("variables", kind, n, op)
                if op != "list":
                    sides["raw"] = (raw, tools.ck_env, True, None)
                    if tf_read and op != "rename":
                        sides["tf"] = (tf_read, tools.tf_env, True, None)
                    elif tf_read:
                        sides["tf"] = (tools.tf_child("tf_rename", prefix, os.path.join(out, "t"), mapfile),
                                       tools.tf_env, True, with_map)
                measure_point(p, sides, repeat, log)
                points.append(p)
            shutil.rmtree(out, ignore_errors=True)
    return points


def byte_points(tools, w: dict, sizes: dict, out: str, repeat: int, log) -> list[Point]:
    points = []
    for nbytes in sizes["bytes"]:
        prefix = w[f"bytes_{nbytes}"]

        def clean():
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)

        tf_read = (tools.tf_child("tf_read_all", prefix), tools.tf_env, True, None) if tools.tf_python else None
        raw = ([tools.py, harness.CHILD, "raw_read", os.path.dirname(prefix)], tools.ck_env, True, None)
        ops = {
            "read": {"ck": (tools.child("ck_read_all", prefix), tools.ck_env, True, None)},
            "verify": {"ck": (tools.cli("-q", "verify", prefix), tools.ck_env, False, None)},
            "stats": {"ck": (tools.cli("inspect", prefix, "--stats", "--json"), tools.ck_env, False, None)},
            "convert-st": {"ck": (tools.cli("-q", "convert", prefix, os.path.join(out, "c.safetensors")),
                                  tools.ck_env, False, clean)},
            "convert-tf": {"ck": (tools.cli("-q", "convert", prefix, os.path.join(out, "c", "ckpt")),
                                  tools.ck_env, False, clean)},
        }
        for op, sides in ops.items():
            p = Point("bytes", "float32", nbytes, op)
            sides["raw"] = raw
            if tf_read and op in ("read", "verify", "stats"):
                sides["tf"] = tf_read
            measure_point(p, sides, repeat, log)
            points.append(p)
        shutil.rmtree(out, ignore_errors=True)
    return points


def exponent(pairs: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of log(value) on log(size): value ~ size^k."""
    pts = [(math.log(s), math.log(v)) for s, v in pairs if v and v > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def _t(x: float | None) -> str:
    return harness.fmt_s(x)


def _r(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "—"


def tables(points: list[Point], startup: float) -> str:
    """The table, then the fitted exponents. ckptool's process times are fitted less its
    start-up (``startup``: ``ckptool --version``), which does not grow with the checkpoint;
    memory is shown as what each variable (or GiB) adds over the smallest point."""
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        groups.setdefault((p.family, p.kind, p.op), []).append(p)
    head = "| workload | size | operation | ckptool | TF (in-process) | raw floor | ckptool/TF | ckptool/raw " \
           "| ckptool peak | memory added |"
    lines = [head, "|" + "---|" * 10]
    for p in points:
        first = groups[(p.family, p.kind, p.op)][0]
        added = "—"
        if p is not first and p.peak_mb is not None and first.peak_mb is not None:
            grown = (p.peak_mb - first.peak_mb) * 1e6
            added = (f"{grown / ((p.size - first.size) / 2**30) / 1e6:.0f} MB/GiB" if p.family == "bytes"
                     else f"{grown / (p.size - first.size):.0f} B/var")
        size = size_text(p.size) if p.family == "bytes" else f"{p.size:,}"
        where = " (in-process)" if p.op in ("list", "read") else ""
        lines.append(f"| {p.kind} | {size} | {p.op}{where} | {_t(p.ck)} | {_t(p.tf)} | {_t(p.raw)} | "
                     f"{_r(p.ck, p.tf)} | {_r(p.ck, p.raw)} | {harness.fmt_mb(p.peak_mb)} | {added} |"
                     + (f" *{p.note}*" if p.note else ""))
    lines += ["", f"Growth exponent k (time ~ size^k; 1.0 is linear), ckptool / TF / raw floor: fitted over every "
              f"point (ckptool's command times less its start-up, {startup * 1000:.0f} ms of `ckptool --version`), "
              f"then between the two largest points alone (where fixed costs no longer count):"]
    for (_, kind, op), ps in groups.items():
        base = 0.0 if op in ("list", "read") else startup
        fits, tops = [], []
        for side in ("ck", "tf", "raw"):
            pairs = [(p.size, getattr(p, side) - (base if side == "ck" else 0.0)) for p in ps
                     if getattr(p, side) is not None]
            fits.append(exponent(pairs))
            top = [(p.size, getattr(p, side)) for p in ps[-2:] if getattr(p, side) is not None]
            tops.append(exponent(top) if len(ps) > 2 else None)
        text = " / ".join("—" if k is None else f"{k:.2f}" for k in fits)
        text2 = " / ".join("—" if k is None else f"{k:.2f}" for k in tops)
        lines.append(f"- {kind} {op}: {text}; two largest: {text2}")
    return "\n".join(lines)


def write_results(text: str, header: str) -> None:
    path = os.path.join(HERE, "RESULTS.md")
    with open(path) as f:
        doc = f.read()
    start = doc.find("\n## Growth")
    if start >= 0:
        end = doc.find("\n## ", start + 1)
        doc = doc[:start] + (doc[end:] if end >= 0 else "\n")
    doc = doc.rstrip("\n") + f"\n\n## Growth\n\n{header}\n\n{text}\n"
    with open(path, "w") as f:
        f.write(doc)


def build(work: str, sizes: dict) -> dict[str, str]:
    w = {}
    for n in sizes["variables"]:
        w[f"names_{n}"] = workloads.build_many(os.path.join(work, f"names_{n}"), n)
        w[f"objects_{n}"] = workloads.build_obj_keys(os.path.join(work, f"objects_{n}"), n)
    for nbytes in sizes["bytes"]:
        elems = sizes["tensor"] // 4
        w[f"bytes_{nbytes}"] = workloads.build_big(os.path.join(work, f"bytes_{nbytes}"), nbytes // sizes["tensor"],
                                                   elems)
    return w


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller points (1k-30k variables, 16-512 MiB)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per side and point; the best is reported (default 3)")
    ap.add_argument("--tf-python", default=os.environ.get("CKPTOOL_BENCH_TF_PYTHON"),
                    help="a python with tensorflow (default: bench/work/tfvenv, created when absent)")
    ap.add_argument("--no-tf", action="store_true", help="ckptool and the raw floor only")
    ap.add_argument("--only", default="variables,bytes", help="variables, bytes or both (default)")
    ap.add_argument("--work", default=os.path.join(HERE, "work"), help="workload directory (default bench/work)")
    ap.add_argument("--sizes", default="", help=argparse.SUPPRESS)  # "toy" for the smoke test
    ap.add_argument("--write-results", action="store_true", help="put the table in bench/RESULTS.md")
    ap.add_argument("--json", metavar="FILE", help="also write every point as JSON")
    args = ap.parse_args(argv)
    sizes = TOY if args.sizes == "toy" else QUICK if args.quick else FULL
    work = os.path.join(args.work, "growth-toy" if args.sizes == "toy" else "growth-quick" if args.quick else "growth")
    only = set(args.only.split(","))
    if not only <= {"variables", "bytes"}:
        ap.error(f"--only: variables, bytes; not {args.only}")
    tools = harness.Tools(harness.ensure_tf(args))
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    log(f"growth: building workloads under {work} (reused when present)")
    if "variables" not in only:
        sizes = dict(sizes, variables=())
    if "bytes" not in only:
        sizes = dict(sizes, bytes=())
    w = build(work, sizes)
    out = os.path.join(work, "out")
    load_before = os.getloadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    startup = min(harness.measure(tools.cli("--version"), tools.ck_env).wall for _ in range(max(3, args.repeat)))
    points = variable_points(tools, w, sizes, out, args.repeat, log)
    points += byte_points(tools, w, sizes, out, args.repeat, log)
    shutil.rmtree(out, ignore_errors=True)
    m = harness.machine()
    header = (f"Date: {started:%Y-%m-%d %H:%M} UTC; ckptool {harness.git_commit()}; python {m['python']}; "
              f"TensorFlow in-process: {'yes' if tools.tf_python else 'no'}\n"
              f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram']} RAM, {m['os']}\n"
              f"Command: `python bench/growth.py{' --quick' if args.quick else ''} --repeat {args.repeat}`; best of "
              f"{args.repeat} per side; load average before/after: {load_before[0]:.2f}/{os.getloadavg()[0]:.2f}")
    text = tables(points, startup)
    print(header + "\n\n" + text)
    if args.write_results:
        write_results(text, header)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "points": [vars(p) for p in points]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
