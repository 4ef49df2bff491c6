#!/usr/bin/env python3
"""Fleets of runs: ``du`` and ``prune --recursive --dry-run`` over 100, 1,000 and 10,000 runs, on
a local disk and on the modelled object store (bench/s3server.py, 30 ms before every answer).

    python bench/fleet.py [--runs 100,1000,10000] [--latency 0.03] [--write-results]

Each run is 3 checkpoints of TensorFlow's CheckpointManager (tests/data/manager: a state file,
3 ``.index`` and 3 data files), runs 4 to a team directory, one ``.ckptool.toml`` at the root
(``max_to_keep = 2``). The store serves the very files of the local tree
(``ROOT/<bucket>/<key>``), so both sides answer about the same bytes: their ``--json``
outputs must be equal (the root spelled alike, the age dropped: it is measured at two
moments), and the row says so. Each command is a ``ckptool`` process (start-up included),
best of ``--repeat``. Requests are the store's count for one command. ``--write-results``
puts the table in bench/RESULTS.md (its "Fleet" section). Timings from a loaded machine are
not results: the table records the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SOURCE = os.path.join(REPO, "tests", "data", "manager")
BUCKET = "fleet"
COMMANDS = {"du": ["du", "{}", "--json"], "prune --dry-run": ["prune", "{}", "--recursive", "--dry-run", "--json"]}


def build(root: str, runs: int) -> str:
    """ROOT/<N>/fleet/runs/team<i>/run<j>: ``runs`` copies of the manager fixture (ROOT/<N> is
    the store's root for that fleet: its listings walk that fleet alone)."""
    top = os.path.join(root, str(runs), BUCKET, "runs")
    if os.path.isfile(os.path.join(top, ".done")):
        return top
    shutil.rmtree(top, ignore_errors=True)
    os.makedirs(top)
    files = {n: open(os.path.join(SOURCE, n), "rb").read() for n in os.listdir(SOURCE) if not n.endswith(".json")}
    for i in range(runs):
        d = os.path.join(top, f"team{i % 4}", f"run{i:05d}")
        os.makedirs(d)
        for n, data in files.items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(data)
    with open(os.path.join(top, ".ckptool.toml"), "w") as f:
        f.write("max_to_keep = 2\n")
    open(os.path.join(top, ".done"), "w").close()
    return top


class Store:
    def __init__(self, root: str, latency: float):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "s3server.py"), root, "--latency",
                                      str(latency), "--every-request"], stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}"

    def stats(self, method: str = "GET") -> dict:
        req = urllib.request.Request(self.url + "/__stats__", method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def ckptool(argv: list[str], env: dict) -> tuple[float, str]:
    t = time.perf_counter()  # run from the measured checkout (``-m`` puts the working directory first)
    p = subprocess.run([sys.executable, "-m", "ckptool", *argv], env=env, capture_output=True, text=True,
                       cwd=env["PYTHONPATH"].split(os.pathsep)[0])
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"ckptool {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[:500]}")
    return dt, p.stdout


def comparable(text: str, spelled: str, as_: str) -> object:
    def strip(o: object) -> object:
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "latest_age_seconds"}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o
    return strip(json.loads(text.replace(spelled, as_)))


def measure(runs_list: list[int], latency: float, repeat: int, work: str, repo: str = REPO) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    for k in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(k, None)
    rows = []
    for n in runs_list:
        local = build(work, n)
        store = Store(os.path.join(work, str(n)), latency)
        env["AWS_ENDPOINT_URL"] = store.url
        url = f"s3://{BUCKET}/runs"
        try:
            for name, argv in COMMANDS.items():
                lt, lo = min((ckptool([a.format(local) for a in argv], env) for _ in range(repeat)),
                             key=lambda x: x[0])
                best = None
                for _ in range(repeat):
                    store.stats("POST")
                    rt, ro = ckptool([a.format(url) for a in argv], env)
                    req = store.stats()["requests"]
                    if best is None or rt < best[0]:
                        best = (rt, ro, req)
                rt, ro, req = best
                same = comparable(ro, url, local) == comparable(lo, local, local)
                rows.append({"runs": n, "command": name, "local_s": lt, "store_s": rt, "requests": req,
                             "requests_per_run": req / n, "same": same})
                print(f"{n:>6} runs  {name:<16} local {lt:7.2f} s   store {rt:7.2f} s   {req:>6} requests "
                      f"({req / n:.2f} a run)   output {'equal' if same else 'DIFFERS'}", flush=True)
        finally:
            store.stop()
    return rows


def table(rows: list[dict], latency: float, load: str) -> str:
    out = [f"Modelled store: bench/s3server.py, {latency * 1000:.0f} ms before every answer "
           f"(`--every-request`); load average when measured: {load} (2 cores shared by other work: "
           "rerun idle for results). Each cell a whole `ckptool` process, best of its runs.", "",
           "| runs | command | local disk | modelled store | requests | requests a run | output local = store |",
           "|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['runs']:,} | `{r['command']}` | {r['local_s']:.2f} s | {r['store_s']:.2f} s | "
                   f"{r['requests']:,} | {r['requests_per_run']:.2f} | {'yes' if r['same'] else 'NO'} |")
    return "\n".join(out) + "\n"


def write_results(text: str) -> None:
    path = os.path.join(HERE, "RESULTS.md")
    doc = open(path).read()
    head = "## Fleet"
    section = f"{head}\n\n{text}\n"
    if head in doc:
        start = doc.index(head)
        nxt = doc.find("\n## ", start + len(head))
        doc = doc[:start] + section + (doc[nxt + 1:] if nxt >= 0 else "")
    else:
        doc = doc.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="100,1000,10000")
    ap.add_argument("--latency", type=float, default=0.03)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(HERE, "work", "fleet"))
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--repo", default=REPO, help="the ckptool to measure (another checkout: a before/after)")
    args = ap.parse_args(argv)
    runs = [int(x) for x in args.runs.split(",")]
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = measure(runs, args.latency, args.repeat, args.work, args.repo)
    text = table(rows, args.latency, load)
    print(text)
    if args.write_results:
        write_results(text)
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
