#!/usr/bin/env python3
"""Fleets of runs: ``du``, ``prune --recursive --dry-run`` and ``prune --recursive`` (deleting) over
100, 1,000 and 10,000 runs, on a local disk and on the modelled object store (bench/s3server.py,
30 ms before every answer).

    python bench/fleet.py [--runs 100,1000,10000] [--latency 0.03] [--commands du,prune]
                          [--repo CHECKOUT] [--write-results TITLE]

Each run is 3 checkpoints of TensorFlow's CheckpointManager (tests/data/manager: a state file,
3 ``.index`` and 3 data files), runs 4 to a team directory, one ``.ckptool.toml`` at the root
(``max_to_keep = 2``). The store serves the very files of the local tree
(``ROOT/<bucket>/<key>``), so both sides answer about the same bytes: their ``--json``
outputs must be equal (the root spelled alike, the age dropped: it is measured at two
moments), and the row says so. ``prune`` deletes (every run 1 checkpoint of its 3): each of its
measurements gets a fresh copy of the built tree for each side (the store's in a bucket of its
own, ``fleetprune``, beside ``fleet``; the copying not timed), and its row also says whether the
two trees are left alike, and the deletion requests (DeleteObject, DeleteObjects) apart from the
rest. Each command is a ``ckptool`` process (start-up included), best of ``--repeat``. Requests
are the store's count for one command. ``--repo`` measures another checkout's ckptool (a
before/after: this bench and store, that package). ``--write-results TITLE`` puts the table in
bench/RESULTS.md as the subsection "### TITLE" of its "Fleet" section (replacing one of that title,
the rest left as it is). Timings from a loaded machine are not results: the table records the load
average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SOURCE = os.path.join(REPO, "tests", "data", "manager")
BUCKET = "fleet"
PRUNE_BUCKET = "fleetprune"  # the deleting prune's copies on the store, beside the built tree
COMMANDS = {"du": ["du", "{}", "--json"], "prune --dry-run": ["prune", "{}", "--recursive", "--dry-run", "--json"],
            "prune": ["prune", "{}", "--recursive", "--json"]}
DELETES = {"prune"}  # commands that change the tree: a fresh copy for each measurement


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


def ckptool(argv: list[str], env: dict) -> tuple[float, str, float]:
    """``(wall seconds, stdout, CPU seconds)`` of one ``ckptool`` process."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)  # the store, still running, is not counted
    t = time.perf_counter()  # run from the measured checkout (``-m`` puts the working directory first)
    p = subprocess.run([sys.executable, "-m", "ckptool", *argv], env=env, capture_output=True, text=True,
                       cwd=env["PYTHONPATH"].split(os.pathsep)[0])
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"ckptool {' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[:500]}")
    return dt, p.stdout, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime


def comparable(text: str, spelled: str, as_: str) -> object:
    def strip(o: object) -> object:
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "latest_age_seconds"}
        if isinstance(o, list):
            return [strip(v) for v in o]
        return o
    return strip(json.loads(text.replace(spelled, as_)))


def fresh(top: str, dst: str) -> str:
    """A copy of the built tree ``top`` at ``dst`` (modification times kept), for a command that deletes."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(top, dst)
    return dst


def tree(top: str) -> set[str]:
    """The files under ``top``, relative; the local lock file left out (a flock's file stays by design,
    where the store's lock object is deleted)."""
    return {os.path.relpath(os.path.join(d, f), top) for d, _, files in os.walk(top) for f in files
            if f != ".ckptool.lock"}


def measure(runs_list: list[int], latency: float, repeat: int, work: str, repo: str = REPO,
            commands: list[str] | None = None) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}
    for k in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(k, None)
    rows = []
    for n in runs_list:
        built = build(work, n)
        root = os.path.join(work, str(n))
        copies = {"local": os.path.join(work, "copies", str(n), "runs"),
                  "store": os.path.join(root, PRUNE_BUCKET, "runs")}
        store = Store(root, latency)
        env["AWS_ENDPOINT_URL"] = store.url
        try:
            for name in commands or list(COMMANDS):
                rows.append(measure_command(name, n, built, copies, store, env, repeat))
        finally:
            store.stop()
            for c in copies.values():
                shutil.rmtree(os.path.dirname(c), ignore_errors=True)
    return rows


def measure_command(name: str, n: int, built: str, copies: dict, store: Store, env: dict, repeat: int) -> dict:
    """One row: ``name`` over the fleet of ``n`` runs, on each side best of ``repeat``."""
    argv, deletes = COMMANDS[name], name in DELETES
    url = f"s3://{PRUNE_BUCKET if deletes else BUCKET}/runs"
    best_local = best_store = None
    for _ in range(repeat):
        local = fresh(built, copies["local"]) if deletes else built
        lt, lo, _ = ckptool([a.format(local) for a in argv], env)
        if best_local is None or lt < best_local[0]:
            best_local = (lt, lo, local, tree(local) if deletes else None)
        if deletes:
            fresh(built, copies["store"])
        store.stats("POST")
        rt, ro, rcpu = ckptool([a.format(url) for a in argv], env)
        st = store.stats()
        if best_store is None or rt < best_store[0]:
            best_store = (rt, ro, st, tree(copies["store"]) if deletes else None, rcpu)
    (lt, lo, local, ltree), (rt, ro, st, rtree, rcpu) = best_local, best_store
    same = comparable(ro, url, local) == comparable(lo, local, local)
    req, dels = st["requests"], st["deletes"]
    row = {"runs": n, "command": name, "local_s": lt, "store_s": rt, "requests": req, "requests_per_run": req / n,
           "store_cpu_s": rcpu, "deletes": dels, "gets": st["gets"], "puts": st["puts"], "deleted": st["deleted"],
           "same": same,
           "trees_same": None if ltree is None else ltree == rtree,
           "files_left": None if ltree is None else len(ltree)}
    print(f"{n:>6} runs  {name:<16} local {lt:7.2f} s   store {rt:7.2f} s (CPU {rcpu:.2f} s)   {req:>6} requests "
          f"({req / n:.2f} a run: {(req - dels) / n:.2f} + {dels / n:.2f} deletion requests; "
          f"GET {st['gets']}, PUT {st['puts']}, keys deleted {st['deleted']})   output {'equal' if same else 'DIFFERS'}"
          + ("" if ltree is None else f", trees {'alike' if ltree == rtree else 'DIFFER'} ({len(ltree)} files)"),
          flush=True)
    return row


def table(rows: list[dict], latency: float, load: str) -> str:
    out = [f"Modelled store: bench/s3server.py, {latency * 1000:.0f} ms before every answer "
           f"(`--every-request`, writes too); load average when measured: {load} (2 cores shared by other "
           "work: rerun idle for results). Each cell a whole `ckptool` process, best of its runs; a run's "
           "requests: the others + the deletion requests (DeleteObject, DeleteObjects).", "",
           "| runs | command | local disk | modelled store | requests | requests a run | of which deletion "
           "requests | local = store |",
           "|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        n, dels = r["runs"], r.get("deletes", 0)
        same = "yes" if r["same"] else "NO"
        if r.get("trees_same") is not None:
            same += ", trees too" if r["trees_same"] else ", trees DIFFER"
        out.append(f"| {n:,} | `{r['command']}` | {r['local_s']:.2f} s | {r['store_s']:.2f} s | "
                   f"{r['requests']:,} | {(r['requests'] - dels) / n:.2f} + {dels / n:.2f} | {dels:,} | {same} |")
    return "\n".join(out) + "\n"


def write_results(text: str, title: str) -> None:
    """The table as the subsection "### title" of RESULTS.md's "## Fleet" (replacing one of that
    title, else appended to the section; nothing else changed)."""
    path = os.path.join(HERE, "RESULTS.md")
    doc = open(path).read()
    head, sub = "## Fleet", f"### {title}"
    section = f"{sub}\n\n{text}\n"
    if head not in doc:
        doc = doc.rstrip("\n") + f"\n\n{head}\n\n"
    start = doc.index(head)
    end = doc.find("\n## ", start + len(head))
    end = len(doc) if end < 0 else end + 1
    body = doc[start:end]
    if f"\n{sub}\n" in body:
        s0 = body.index(f"\n{sub}\n") + 1
        s1 = body.find("\n### ", s0 + len(sub))
        body = body[:s0] + section + (body[s1 + 1:] if s1 >= 0 else "")
    else:
        body = body.rstrip("\n") + "\n\n" + section
    doc = doc[:start] + body.rstrip("\n") + "\n" + ("\n" + doc[end:] if end < len(doc) else "")
    with open(path, "w") as f:
        f.write(doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="100,1000,10000")
    ap.add_argument("--latency", type=float, default=0.03)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(HERE, "work", "fleet"))
    ap.add_argument("--commands", default=",".join(COMMANDS),
                    help=f"which rows, comma-separated, of: {', '.join(COMMANDS)} (default: all)")
    ap.add_argument("--write-results", metavar="TITLE",
                    help='put the table in bench/RESULTS.md as "### TITLE" under "## Fleet"')
    ap.add_argument("--repo", default=REPO, help="the ckptool to measure (another checkout: a before/after)")
    args = ap.parse_args(argv)
    runs = [int(x) for x in args.runs.split(",")]
    commands = [c.strip() for c in args.commands.split(",") if c.strip()]
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        ap.error(f"--commands: unknown {', '.join(unknown)} (known: {', '.join(COMMANDS)})")
    before = time.strftime("%H:%M", time.gmtime()), os.getloadavg()
    rows = measure(runs, args.latency, args.repeat, args.work, args.repo, commands)
    after = time.strftime("%H:%M", time.gmtime()), os.getloadavg()
    load = " -> ".join(" / ".join(f"{x:.1f}" for x in la) + f" ({t} UTC)" for t, la in (before, after))
    text = table(rows, args.latency, load)
    print(text)
    if args.write_results:
        write_results(text, args.write_results)
    return 0 if all(r["same"] and r.get("trees_same") is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
