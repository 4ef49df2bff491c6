"""A fleet of runs on an object store (issue 54): ``du``, ``prune --recursive`` and ``verify
--recursive`` list ROOT once and read each small file once, in parallel, so the requests a run
stay a few whatever the depth of the tree; the answers are those of the same tree on a local disk.

moto's S3 server counts every request (conftest.Counter). Per run of 3 checkpoints: its state
file, and for prune the indexes of what it keeps (whether each ``.index`` parses decides which
checkpoints are whole; du needs none: the listing gives the sizes), and for a prune that deletes
the lock's PUT, the state's conditional PUT and 2 deletion requests (the lock released in the
second); the ``.ckptool.toml`` files once for the fleet (those above ROOT looked up once per
command: policy files are read up to the bucket's root), one listing per 1,000 objects.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time

import pytest
from test_remote import DATA, normalized, same_output, upload

from ckptool.io.backends import remote

RUNS = 20


def _fleet(tmp_path, fs, root):
    """RUNS runs of 3 checkpoints in groups, a policy at the root and one group's own."""
    local = tmp_path / "fleet"
    local.mkdir()
    (local / ".ckptool.toml").write_text("max_to_keep = 2\n")
    for i in range(RUNS):
        shutil.copytree(DATA / "manager", local / f"team{i % 4}" / f"run{i:02d}",
                        ignore=shutil.ignore_patterns("*.json"))
    (local / "team1" / ".ckptool.toml").write_text("max_to_keep = 1\n")
    upload(fs, local, root)
    return local


def _one_run(fs, root, tmp_path, policy="max_to_keep = 1\n"):
    """A fleet of one run of 3 checkpoints (ROOT/run) under ``policy`` at ROOT, local and uploaded:
    ``(local ROOT, its URL)``."""
    local = tmp_path / "one"
    shutil.copytree(DATA / "manager", local / "run", ignore=shutil.ignore_patterns("*.json"))
    (local / ".ckptool.toml").write_text(policy)
    url = f"{root}/one"
    upload(fs, local, url)
    return local, url


def _key(r: dict) -> str:
    """The object (or, for a listing, the prefix) a request is about, as /bucket/key."""
    if "list-type=2" in r["query"]:
        from urllib.parse import parse_qs

        return r["path"].rstrip("/") + "/" + (parse_qs(r["query"]).get("prefix") or [""])[0]
    return r["path"]


def _outside(log, url) -> list[dict]:
    """The requests for paths above ROOT (the .ckptool.toml files up to the bucket's root)."""
    top = "/" + url.split("://", 1)[1].rstrip("/") + "/"
    return [r for r in log if not _key(r).startswith(top) and r not in _deletions(log)]


def _requests(counter, run, *argv) -> tuple[list[dict], str]:
    remote.clear_cache()  # a fresh process's storage: nothing known before the command
    counter.reset()
    out, _ = run(*argv)
    return counter.snapshot(), out


@pytest.fixture
def fleet(s3, tmp_path):
    fs, root, counter = s3
    return _fleet(tmp_path, fs, f"{root}/fleet"), f"{root}/fleet", counter


@pytest.mark.parametrize("argv", [("du", "{}", "--json"),
                                  ("prune", "{}", "--recursive", "--dry-run"),
                                  ("prune", "{}", "--recursive", "--dry-run", "--json")])
def test_fleet_reads_list_once_and_match_local(run, fleet, argv):
    local, url, counter = fleet
    if "--json" in argv:
        same_output(run, str(local), url, *argv)
    else:  # a table: its columns are as wide as the paths
        lo, _ = run(*[a.format(local) for a in argv])
        ro, _ = run(*[a.format(url) for a in argv])
        assert ro.replace(url, str(local)).split() == lo.split() and len(lo.splitlines()) > RUNS
    log, _ = _requests(counter, run, *[a.format(url) for a in argv])
    outside = _outside(log, url)  # above ROOT: each .ckptool.toml looked up once for the fleet, one listing
    assert len(outside) <= 2 and all(_key(r).rstrip("/").endswith("/.ckptool.toml") for r in outside), outside
    lists = [r for r in log if "list-type=2" in r["query"] and r not in outside]
    assert len(lists) == 1 and "delimiter=&" in lists[0]["query"] + "&"  # one flat listing
    assert not [r for r in log if r["method"] == "HEAD" and r not in outside]  # the listing answered
    gets = [r["path"] for r in log if r["method"] == "GET" and r not in lists and r not in outside]
    assert len(gets) == len(set(gets))  # each file read once (the root's policy too)
    # issue 54: du at most 2 requests a run (its state file: no index is read), prune --dry-run 6 (its
    # state file and the indexes of what it keeps: 2 a run, 1 in team1; never those of what it deletes)
    indexes = [r for r in log if r["path"].endswith(".index")]
    if argv[0] == "du":
        assert not indexes and len(log) <= 2 * RUNS, len(log)
    else:
        assert len(indexes) == 2 * RUNS - RUNS // 4 and len(log) <= 6 * RUNS, len(log)


def test_the_files_beside_a_runs_checkpoints_are_not_read(run, s3, tmp_path):
    """A run's TensorBoard event file, graph, JSON and text files are no V1 checkpoint by their names:
    du, prune --dry-run and verify read none of them (a request a file a run on an object store), and
    answer as locally; a file of another name is still read for a V1 table's footer."""
    fs, root, counter = s3
    local = tmp_path / "fleet"
    for i in range(4):
        run_dir = local / f"run{i}"
        shutil.copytree(DATA / "manager", run_dir, ignore=shutil.ignore_patterns("*.json"))
        (run_dir / "events.out.tfevents.1733480000.host.123.0.v2").write_bytes(b"\0" * 64)
        (run_dir / "graph.pbtxt").write_text("node {}\n")
        (run_dir / "config.json").write_text("{}")
        (run_dir / "flags.txt").write_text("--lr=0.1\n")
    (local / "run0" / "stray").write_bytes(b"\0" * 64)  # no name TF gives: looked at
    (local / ".ckptool.toml").write_text("max_to_keep = 2\n")
    url = f"{root}/fleet"
    upload(fs, local, url)
    for argv in (("du", "{}", "--json"), ("prune", "{}", "--recursive", "--dry-run", "--json"),
                 ("verify", "{}", "--recursive", "--json")):
        same_output(run, str(local), url, *argv)
        log, _ = _requests(counter, run, *[a.format(url) for a in argv])
        read = sorted({r["path"].rsplit("/", 1)[1] for r in log if r["method"] == "GET" and "list-type" not in r["query"]})
        assert not [n for n in read if n.startswith("events.") or n.endswith((".pbtxt", ".json", ".txt"))], read
        assert "stray" in read, read


def test_fleet_verify_recursive_matches_local(run, fleet):
    local, url, counter = fleet
    same_output(run, str(local), url, "verify", "{}", "--recursive")
    same_output(run, str(local), url, "verify", "{}", "--recursive", "--json")
    log, _ = _requests(counter, run, "verify", url, "--recursive")
    inside = [r for r in log if r not in _outside(log, url)]
    assert sum("list-type=2" in r["query"] for r in inside) == 1 and not [r for r in inside if r["method"] == "HEAD"]
    # beyond the du reads, each run's 3 data files: the bytes verify checks
    assert len(log) <= 8 * RUNS


def test_fleet_verify_recursive_reports_damage_in_order_as_locally(run, s3, tmp_path):
    """Small checkpoints are checked many at once on an object store; the report is the local one,
    line for line: a flipped byte, a truncated data file and a missing index, each where it is."""
    fs, root, _ = s3
    local = _fleet(tmp_path, fs, f"{root}/clean")
    for rel, how in (("team1/run05/ckpt-4.data-00000-of-00001", "flip"), ("team2/run10/ckpt-5.data-00000-of-00001",
                                                                          "cut"), ("team3/run15/ckpt-3.index", "rm")):
        p = local / rel
        if how == "rm":
            p.unlink()
        else:
            b = bytearray(p.read_bytes())
            b[-1 if how == "flip" else 0] ^= 1
            p.write_bytes(bytes(b[: len(b) // 2] if how == "cut" else b))
    url = f"{root}/damaged"
    upload(fs, local, url)
    lo, ro = same_output(run, str(local), url, "verify", "{}", "--recursive", "--json", code=1)
    doc = json.loads(lo)
    assert doc["damaged"] == 2 and [r["prefix"] for r in doc["results"]] == sorted(r["prefix"] for r in doc["results"])
    same_output(run, str(local), url, "verify", "{}", "--recursive", code=1)


def _deletions(log: list[dict]) -> list[dict]:
    """The requests that delete checkpoint files: a DELETE, or S3's batch (a POST ``?delete``)."""
    return [r for r in log if (r["method"] == "DELETE" and ".ckptool" not in r["path"])
            or (r["method"] == "POST" and "delete" in r["query"])]


def test_fleet_prune_deletes_as_locally_in_few_requests_a_run(run, fleet):
    local, url, counter = fleet
    lo, _ = run("prune", str(local), "--recursive", "--json")
    log, ro = _requests(counter, run, "prune", url, "--recursive", "--json")
    assert normalized(json.loads(ro), url, str(local)) == normalized(json.loads(lo), str(local), str(local))
    doc = json.loads(ro)
    assert all(len(d["deleted"]) == (2 if "/team1/" in d["directory"] else 1) for d in doc["directories"])
    # a run's deletions in 2 requests, however many checkpoints go: their indexes (one DELETE, or a batch),
    # then every other file of theirs at once, the lock object (its journal) released in that same batch
    deletes = _deletions(log)
    assert len(deletes) == 2 * RUNS and sum(r["method"] == "POST" for r in deletes) == RUNS + RUNS // 4
    assert not [r for r in log if r["method"] == "DELETE" and ".ckptool" in r["path"]]  # no lock DELETE of its own
    others = len(log) - len(deletes)
    kinds = {m: sum(r["method"] == m for r in log) for m in ("GET", "PUT", "DELETE", "HEAD", "POST")}
    print(f"prune: {len(log)} requests, {len(deletes)} deletions, {others / RUNS:.2f} other requests a run {kinds}")
    # issue 54, at most 6 a run beside its deletions, the command's own requests included: a run's state file
    # (read once, with the listing's version, which the compare-and-swap writes at), the indexes of what it
    # keeps (2, or 1 in team1: never those of what it deletes), the lock object's PUT carrying the journal,
    # the state's conditional PUT; no journal object. Once a process: the store's conditions checked (2 PUTs),
    # the listing, the policies (those above ROOT looked up once)
    assert len(_outside(log, url)) <= 2 and sum(r["path"].endswith("/checkpoint") and r["method"] == "GET"
                                                for r in log) == RUNS
    assert not [r for r in log if r["path"].endswith(".ckptool-prune-pending")]
    kept = sum(len(d["kept"]) for d in doc["directories"])
    assert sum(r["path"].endswith(".index") and r["method"] == "GET" for r in log) == kept
    once = [r for r in log if r in _outside(log, url) or "list-type=2" in r["query"]
            or r["path"].endswith("/.ckptool.toml")]  # the listing and the policies, once a command
    checks = sum(r["method"] == "PUT" and r["path"].endswith("/.ckptool.lock") for r in log) - RUNS  # conditions
    assert len(once) <= 5 and checks == 2, (once, checks)
    assert others - len(once) - checks == 3 * RUNS + kept, others
    assert others <= 6 * RUNS, others
    st = remote.storage_for_url(url)
    for p in sorted(local.rglob("checkpoint")):  # the lock objects gone too
        rel = p.parent.relative_to(local).as_posix()
        assert st.listdir(f"{url}/{rel}") == sorted(n for n in (x.name for x in p.parent.iterdir())
                                                      if n != ".ckptool.lock")


def test_sharded_checkpoints_go_indexes_first_then_their_data_in_one_batch(run, s3, tmp_path, monkeypatch):
    """S3's DeleteObjects: two checkpoints of 5 data shards each cost 2 deletions (both indexes at
    once, first, then the 10 data files at once), where one by one they cost 12; local and remote
    agree."""
    from ckptool.io.backends import remote_cas

    batches = []
    real = remote_cas.delete_many
    monkeypatch.setattr(remote_cas, "delete_many",
                        lambda st, paths, versions=None: batches.append(paths) or real(st, paths, versions))
    fs, root, counter = s3
    local = tmp_path / "run"
    local.mkdir()
    for step in (1, 2, 3):
        for f in (DATA / "dtensor").glob("ckpt-1.*"):
            shutil.copy(f, local / f.name.replace("ckpt-1", f"ckpt-{step}"))
    (local / "checkpoint").write_text("".join(f'all_model_checkpoint_paths: "ckpt-{s}"\n' for s in (1, 2, 3))
                                      + 'model_checkpoint_path: "ckpt-3"\n')
    url = f"{root}/run"
    upload(fs, local, url)
    lo, _ = run("prune", str(local), "--max-to-keep", "1", "--json")
    log, ro = _requests(counter, run, "prune", url, "--max-to-keep", "1", "--json")
    assert normalized(json.loads(ro), url, str(local)) == normalized(json.loads(lo), str(local), str(local))
    gone = [r for r in log if (r["method"] == "DELETE" and ".ckptool" not in r["path"])
            or (r["method"] == "POST" and "delete" in r["query"])]
    assert [r["method"] for r in gone] == ["POST", "POST"], gone
    assert [sorted(p.rsplit("/", 1)[1] for p in b) for b in batches] == [
        ["ckpt-1.index", "ckpt-2.index"], sorted(f"ckpt-{s}.data-0000{i}-of-00005" for s in (1, 2) for i in range(5))]
    st = remote.storage_for_url(url)
    assert st.listdir(url) == sorted(p.name for p in local.iterdir() if p.name != ".ckptool.lock")


@pytest.mark.parametrize("recursive", [False, True])
def test_a_data_file_the_batch_could_not_delete_is_reported_and_journaled(run, s3, tmp_path, monkeypatch, recursive):
    """One key of the batch refused by the store: that file is reported, its checkpoint is not
    called deleted and stays in the journal (the next prune finishes it); the other keys went.
    ``--recursive`` (planned first): the lock object went in that batch with the journal it carried;
    the lock is taken again to write the journal, and released."""
    from ckptool.io.backends import remote_cas

    fs, root, counter = s3
    local = tmp_path / "run"
    shutil.copytree(DATA / "dtensor", local)
    for f in list(local.glob("ckpt-1.*")):
        shutil.copy(f, local / f.name.replace("ckpt-1", "ckpt-2"))
    (local / "checkpoint").write_text('all_model_checkpoint_paths: "ckpt-1"\nall_model_checkpoint_paths: "ckpt-2"\n'
                                      'model_checkpoint_path: "ckpt-2"\n')
    url = f"{root}/run"
    upload(fs, local, url)
    real = remote_cas.delete_many

    def refusing(st, paths, versions=None):
        if not remote_cas.batches(st, paths):
            return None
        stuck = [p for p in paths if p.endswith("data-00003-of-00005")]
        got = real(st, [p for p in paths if p not in stuck], versions)
        return {**(got or {}), **{p: "AccessDenied: refused" for p in stuck}}

    monkeypatch.setattr(remote_cas, "delete_many", refusing)
    counter.reset()
    out, err = run("prune", url, "--max-to-keep", "1", "--json", *(["--recursive"] if recursive else []), code=1)
    doc = json.loads(out)
    if recursive:
        doc = doc["directories"][0]
        locks = [r["method"] for r in counter.snapshot() if r["path"].endswith("/.ckptool.lock")]
        assert len(locks) >= 3 and locks[-2:] == ["PUT", "DELETE"] and locks.count("DELETE") == 1, locks  # taken
        # (and the store's conditions proven, once a process); gone with the batch; taken again; released
    assert doc["deleted"] == [] and [f["path"] for f in doc["failed"]] == [f"{url}/ckpt-1.data-00003-of-00005"]
    st = remote.storage_for_url(url)
    assert ".ckptool.lock" not in st.listdir(url)
    assert [n for n in st.listdir(url) if n.startswith("ckpt-1")] == ["ckpt-1.data-00003-of-00005"]
    assert json.loads(st.read_bytes(f"{url}/.ckptool-prune-pending")) == ["ckpt-1"]
    monkeypatch.setattr(remote_cas, "delete_many", real)
    run("prune", url, "--max-to-keep", "1")  # the journal finished: the last file goes, the journal too
    assert st.listdir(url) == sorted(p.name for p in local.iterdir() if not p.name.startswith("ckpt-1."))


def test_fleet_on_gcs_lists_once_and_matches_local(run, gs, gcs_server, tmp_path, monkeypatch):
    """The same on GCS (gcp-storage-emulator): requests counted as the emulator parses them."""
    fs, root = gs
    local = _fleet(tmp_path, fs, f"{root}/fleet")
    url = f"{root}/fleet"
    from gcp_storage_emulator import server as gse

    seen: list[str] = []
    handler = gse.RequestHandler
    parse = handler.parse_request

    def counted(self):
        ok = parse(self)
        seen.append(f"{self.command} {self.path}")
        return ok

    monkeypatch.setattr(handler, "parse_request", counted)
    for argv in (("du", "{}", "--json"), ("prune", "{}", "--recursive", "--dry-run", "--json"),
                 ("prune", "{}", "--recursive", "--json")):
        deleting = "--dry-run" not in argv and argv[0] == "prune"
        if not deleting:
            same_output(run, str(local), url, *argv)
        remote.clear_cache()
        seen.clear()
        ro, _ = run(*[a.format(url) for a in argv])
        if deleting:
            lo, _ = run(*[a.format(local) for a in argv])
            assert normalized(json.loads(ro), url, str(local)) == normalized(json.loads(lo), str(local), str(local))
        top = url.split("/", 3)[3] + "/"  # the fleet's prefix in its bucket
        lists = [s for s in seen if "/o?" in s and f"prefix={top}" in s.replace("%2F", "/")]
        assert len(lists) == 1 and not re.search(r"delimiter=[^&]", lists[0]), seen[:5]  # one flat listing
        assert not [s for s in seen if s.startswith("GET") and "/o?" in s and s not in lists
                    and ".ckptool.toml" not in s], seen
        if not deleting:
            assert len(seen) <= (2 if argv[0] == "du" else 6) * RUNS, len(seen)
            continue
        # prune: 6 a run beside its deletions (no batch delete on GCS: a request a file) and what a
        # command asks once (the listing, the policies, the lookups above ROOT, the conditions' check)
        dels = [s for s in seen if s.startswith("DELETE") and ".ckptool" not in s]
        assert len(dels) == 50 and not [s for s in seen if ".ckptool-prune-pending" in s], seen
        print(f"gcs prune: {len(seen)} requests, {len(dels)} deletions, {(len(seen) - len(dels)) / RUNS:.2f} a run")
        assert len(seen) - len(dels) <= 6 * RUNS + 10, len(seen)


def test_listing_answers_then_hands_back_what_the_command_changes(monkeypatch):
    """memory:// with the filesystem's calls counted: below a listing, lookups and the named
    reads cost nothing; what the command writes or deletes is asked of the store again; the
    lock's bytes always are; a listing nested in another is the outer one."""
    import uuid

    fsspec = pytest.importorskip("fsspec")
    fs, root = fsspec.filesystem("memory"), f"memory://fleet{uuid.uuid4().hex[:12]}"
    for rel, data in {"a/checkpoint": b"state", "a/x.index": b"idx", "a/.ckptool.lock": b"{}",
                      "b/c/.ckptool.toml": b"max_to_keep = 1\n"}.items():
        fs.pipe_file(f"{root}/{rel}", data)
    st = remote.storage_for_url(root)
    calls: list[str] = []
    for name in ("info", "ls", "cat_file", "find", "isdir"):
        real = getattr(fs, name)
        monkeypatch.setattr(fs, name, lambda *a, _n=name, _r=real, **k: (calls.append(_n), _r(*a, **k))[1])
    with st.listed(root, ("checkpoint", ".ckptool.toml")):
        assert sorted(calls) == ["cat_file", "cat_file", "find"]  # one listing, the 2 named reads
        calls.clear()
        with st.listed(f"{root}/a"):  # nested: the outer listing serves
            assert st.listdir(root) == ["a", "b"] and st.listdir(f"{root}/a") == [".ckptool.lock", "checkpoint",
                                                                                  "x.index"]
            assert st.isdir(f"{root}/b/c") and not st.isdir(f"{root}/a/x.index") and not st.exists(f"{root}/zz")
            assert st.size(f"{root}/a/x.index") == 3 and st.read_bytes(f"{root}/a/checkpoint") == b"state"
            assert st.read_if_exists(f"{root}/b/c/.ckptool.toml") == b"max_to_keep = 1\n"
            assert st.read_if_exists(f"{root}/b/none") is None
        assert calls == []
        assert st.read_if_exists(f"{root}/a/.ckptool.lock") == b"{}" and calls  # the lock: asked
        st.write_bytes_atomic(f"{root}/a/new", b"n")
        st.remove(f"{root}/a/x.index")
        calls.clear()
        assert st.listdir(f"{root}/a") == [".ckptool.lock", "checkpoint", "new"] and calls  # the store's
    calls.clear()
    assert st.listdir(f"{root}/b") == ["c"] and calls  # the listing ended with the command


class Killed(BaseException):
    """kill -9 at a step: nothing after it runs, the lock object is left as it is."""


def _save_ckpt6(fs, run_url: str, src) -> None:
    """A trainer saves ckpt-6 into the run at ``run_url`` as TF does (no lock): its files (copies of
    ``src``'s ckpt-5), then the state file naming it, with its timestamp."""
    for n in ("index", "data-00000-of-00001"):
        fs.pipe_file(f"{run_url}/ckpt-6.{n}", (src / f"ckpt-5.{n}").read_bytes())
    text = (src / "checkpoint").read_text().replace('model_checkpoint_path: "ckpt-5"', 'model_checkpoint_path: "ckpt-6"')
    text = text.replace('all_model_checkpoint_paths: "ckpt-5"\n',
                        'all_model_checkpoint_paths: "ckpt-5"\nall_model_checkpoint_paths: "ckpt-6"\n')
    text = text.replace("last_preserved", f"all_model_checkpoint_timestamps: {time.time()}\nlast_preserved")
    fs.pipe_file(f"{run_url}/checkpoint", text.encode())


def _kill_at(monkeypatch, where: str) -> None:
    """Make ``prune --recursive`` die at ``where``: before the state file's write (the lock object
    written, carrying the journal), before the deletions (the state written), or between the
    request deleting the indexes and the one deleting the rest with the lock; the lock object
    left behind."""
    from ckptool.io.backends import remote_lock
    from ckptool.ops.retain import prune as P

    monkeypatch.setattr(remote_lock.RemoteLock, "release", lambda self: self._stop.set())  # dead: no DELETE

    def die(*a, **k):
        raise Killed
    if where == "state":
        monkeypatch.setattr(P, "update_state", die)
    elif where == "deletions":
        monkeypatch.setattr(P, "delete_checkpoints", die)
    else:
        real = remote.RemoteStorage.remove_many
        calls = []

        def second(self, *a, **k):
            if calls:
                raise Killed
            calls.append(a)
            return real(self, *a, **k)
        monkeypatch.setattr(remote.RemoteStorage, "remove_many", second)


@pytest.mark.parametrize("where", ["state", "deletions", "mid-deletions"])
def test_a_prune_killed_at_each_step_is_finished_by_the_next(run, store, tmp_path, monkeypatch, where):
    """The planned-first protocol (issue 54): the lock object carries the journal. Killed after
    the lock's PUT, after the state's, or between two checkpoints' deletions, the next prune takes
    the expired lock over, finishes what the journal names that the state file no longer lists, and
    ends as a prune that was never killed: what is kept is all there, the state lists it, no lock
    object and no journal left."""
    from ckptool.io.backends import remote_lock
    from ckptool.ops.retain.fleet import prune_tree

    fs, root = store
    local, url = _one_run(fs, root, tmp_path)
    lo, _ = run("prune", str(local), "--recursive", "--json")
    with monkeypatch.context() as m:
        _kill_at(m, where)
        remote.clear_cache()
        with pytest.raises(Killed):
            prune_tree(url)
    st = remote.storage_for_url(url)
    lock = json.loads(st.read_bytes(f"{url}/run/.ckptool.lock"))
    assert lock["note"] == ["ckpt-3", "ckpt-4"]  # the journal, in the lock object only
    assert ".ckptool-prune-pending" not in st.listdir(f"{url}/run")
    state = st.read_bytes(f"{url}/run/checkpoint").decode()
    assert ("ckpt-3" in state) == (where == "state")  # killed before its write: the state lists them still
    assert {"ckpt-5.index", "ckpt-5.data-00000-of-00001"} <= set(st.listdir(f"{url}/run"))
    run("prune", url, "--recursive", code=1)  # its holder is dead, but its lock has not expired yet
    lock["expires"] = time.time() - 1  # TTL seconds later
    fs.pipe_file(f"{url}/run/.ckptool.lock", json.dumps(lock).encode())
    remote.clear_cache()
    remote_lock._held.clear()
    out, _ = run("prune", url, "--recursive", "--json")
    assert json.loads(out)["total"]["kept"] == 1
    names = st.listdir(f"{url}/run")
    assert names == sorted(n for n in os.listdir(local / "run") if n != ".ckptool.lock"), names
    state = st.read_bytes(f"{url}/run/checkpoint").decode()
    assert "ckpt-5" in state and "ckpt-3" not in state and "ckpt-4" not in state
    assert json.loads(lo)["total"]["kept"] == 1


def test_a_run_with_nothing_to_delete_takes_no_lock_and_writes_nothing(run, fleet):
    """issue 54: a run whose policy deletes nothing costs its state file and the indexes it keeps:
    no lock object, no journal, no write, no delete."""
    local, url, counter = fleet
    run("prune", url, "--recursive")  # pruned once: nothing left to delete
    log, out = _requests(counter, run, "prune", url, "--recursive", "--json")
    assert json.loads(out)["total"]["deleted"] == 0
    assert not [r for r in log if r["method"] in ("PUT", "DELETE", "POST")], log
    assert len(log) <= 3 * RUNS + 10, len(log)


def test_a_trainer_saving_during_a_fleet_prune_keeps_its_checkpoint_and_entry(run, store, tmp_path, monkeypatch):
    """A trainer saves ckpt-6 (files, then a plain write of the state file) after the fleet's listing
    read the state file, before prune's conditional write: the store refuses that write (the version
    the plan read is gone), the run is planned again under its lock from the directory as it is now:
    ckpt-6 keeps its entry and its files, and the policy applies to the new list."""
    from ckptool.io.backends import remote_cas

    fs, root = store
    local, url = _one_run(fs, root, tmp_path, "max_to_keep = 2\n")
    real_put = remote_cas.put
    saved = []

    def trainer_saves_first(st, path, data, token):
        if path.endswith("/run/checkpoint") and not saved:
            saved.append(path)
            _save_ckpt6(fs, f"{url}/run", local / "run")
        return real_put(st, path, data, token)

    monkeypatch.setattr(remote_cas, "put", trainer_saves_first)
    remote.clear_cache()
    out, err = run("prune", url, "--recursive", "--json")
    assert saved
    doc = json.loads(out)["directories"][0]
    assert [p.rsplit("/", 1)[1] for p in doc["kept"]] == ["ckpt-5", "ckpt-6"] and not doc["damaged"], (doc, err)
    st = remote.storage_for_url(url)
    state = st.read_bytes(f"{url}/run/checkpoint").decode()
    assert 'model_checkpoint_path: "ckpt-6"' in state and '"ckpt-5"' in state and '"ckpt-4"' not in state
    assert st.listdir(f"{url}/run") == ["checkpoint", "ckpt-5.data-00000-of-00001", "ckpt-5.index",
                                        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]


def test_a_taken_over_journal_no_command_finished_stays_in_the_lock(store):
    """The lock object of a killed prune carries its journal: whoever takes the expired lock over
    finds it (``inherited``) and carries it on; a command that finishes no journal leaves the lock
    to expire with it rather than deleting it (the next deleting command finishes it)."""
    from ckptool.io.backends import remote_lock

    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/run"
    fs.pipe_file(f"{d}/checkpoint", b'model_checkpoint_path: "ckpt-5"\n')
    dead = {"tool": "ckptool", "pid": 1, "host": "gone", "command": "ckptool prune", "expires": time.time() - 1,
            "note": ["ckpt-3"]}
    fs.pipe_file(f"{d}/.ckptool.lock", json.dumps(dead).encode())
    with st.lock(d, timeout=0.0) as held:
        assert held.contended and held.inherited == ["ckpt-3"]
        assert json.loads(st.read_bytes(f"{d}/.ckptool.lock"))["note"] == ["ckpt-3"]  # carried on
    left = json.loads(st.read_bytes(f"{d}/.ckptool.lock"))
    assert left["note"] == ["ckpt-3"] and left["pid"] == os.getpid()  # not deleted: it expires with it
    del left["note"]
    left["expires"] = time.time() - 1
    fs.pipe_file(f"{d}/.ckptool.lock", json.dumps(left).encode())
    with st.lock(d, timeout=0.0) as mine:  # an expired lock without a journal: taken over, released as ever
        assert mine.contended and mine.inherited is None
    assert remote_lock.held(st, d) is None and ".ckptool.lock" not in st.listdir(d)


def test_a_lock_released_along_a_batch_goes_only_at_our_version(store):
    """``release_along``: the files and the lock object in one batch where the store has one (S3),
    the lock object deleted only at the version we wrote; one another holder has written since (ours
    taken over while we stalled) stays, with its journal. Without a batch delete (GCS) nothing is
    deleted and the lock stays held, released as ever when its ``with`` ends."""
    from ckptool.io.backends import remote_lock

    fs, root = store
    st = remote.storage_for_url(root)
    d = f"{root}/run"
    for name in ("a", "b", "c", "d"):
        fs.pipe_file(f"{d}/{name}", b"x")
    batch = st.protocol.startswith("s3")
    with st.lock(d, timeout=0.0) as held:
        got = st.remove_many([f"{d}/a", f"{d}/b"], release=held)
        assert got == {f"{d}/a": None, f"{d}/b": None}
        assert (".ckptool.lock" in st.listdir(d)) != batch and (remote_lock.held(st, d) is None) == batch
    assert st.listdir(d) == ["c", "d"]
    with st.lock(d, timeout=0.0) as held:
        other = {"tool": "ckptool", "pid": 1, "host": "other", "command": "ckptool prune",
                 "expires": time.time() + 100, "note": ["ckpt-9"]}
        fs.pipe_file(f"{d}/.ckptool.lock", json.dumps(other).encode())  # taken over while we stalled
        st.remove_many([f"{d}/c", f"{d}/d"], release=held)
    assert st.listdir(d) == [".ckptool.lock"] and json.loads(st.read_bytes(f"{d}/.ckptool.lock")) == other


def test_a_policy_above_root_is_found_in_one_listing_request(run, s3, tmp_path):
    """The .ckptool.toml files above ROOT are looked up once each, by one listing of the names that
    begin so in the parent (a HEAD and a listing when absent, before): found and applied as locally,
    and a directory of that name refused as locally."""
    fs, root, counter = s3
    up = tmp_path / "up"
    shutil.copytree(DATA / "manager", up / "fleet" / "run", ignore=shutil.ignore_patterns("*.json"))
    (up / ".ckptool.toml").write_text("max_to_keep = 1\n")
    (up / ".ckptool.toml.bak").write_text("max_to_keep = 9\n")  # a sibling of the same beginning
    url = f"{root}/up"
    upload(fs, up, url)
    lo, _ = run("prune", str(up / "fleet"), "--recursive", "--dry-run", "--json")
    ro, _ = run("prune", f"{url}/fleet", "--recursive", "--dry-run", "--json")
    assert normalized(json.loads(ro), url, str(up)) == normalized(json.loads(lo), str(up), str(up))
    assert json.loads(lo)["total"]["kept"] == 1 and f"{url}/.ckptool.toml" in ro  # the policy above ROOT applied
    log, _ = _requests(counter, run, "prune", f"{url}/fleet", "--recursive", "--dry-run", "--json")
    outside = _outside(log, f"{url}/fleet")
    # one listing for each level above ROOT (up/, the test's prefix, the bucket's root), and the one file
    # found there read by one GET (its size known: no HEAD)
    assert [r["method"] for r in outside] == ["GET"] * 4 and sum("list-type=2" in r["query"] for r in outside) == 3
    (up / ".ckptool.toml").unlink()
    (up / ".ckptool.toml").mkdir()
    (up / ".ckptool.toml" / "x").write_text("")
    fs.rm(f"{url}/.ckptool.toml")
    fs.pipe_file(f"{url}/.ckptool.toml/x", b"")
    remote.clear_cache()
    _, le = run("prune", str(up / "fleet"), "--recursive", "--dry-run", code=1)
    _, re_ = run("prune", f"{url}/fleet", "--recursive", "--dry-run", code=1)
    assert re_.replace(url, str(up)) == le and "not a regular file" in le, (le, re_)


# --------------------------------------------------------------------------- review (issue 54): failures mid-way


@pytest.mark.parametrize("batch", ["indexes", "rest"])
@pytest.mark.parametrize("applied", [False, True])
def test_a_batch_that_raises_leaves_a_journal_the_next_prune_finishes(run, s3, tmp_path, monkeypatch, applied,
                                                                     batch):
    """The request deleting the indexes, or the one deleting the rest with the lock object, fails on
    the wire (before the store applied it, or after: a connection reset on the answer). Planned first, the journal is in the lock object only: it
    must not go with the lock while files it names are left, and the state file no longer lists
    them, so without it nothing would ever delete them. The next prune ends as a clean one."""
    from ckptool.io.backends import remote_cas
    from ckptool.io.backends.remote_files import RemoteError

    fs, root, _ = s3
    local, url = _one_run(fs, root, tmp_path)
    real = remote_cas.delete_many
    calls = []

    def reset_on_first(st, paths, versions=None):
        calls.append(paths)
        if len(calls) == (1 if batch == "indexes" else 2) and remote_cas.batches(st, paths):
            if applied:
                real(st, paths, versions)
            raise RemoteError(f"{paths[0]}: cannot delete: ConnectionResetError: reset by peer")
        return real(st, paths, versions)

    monkeypatch.setattr(remote_cas, "delete_many", reset_on_first)
    remote.clear_cache()
    out, err = run("prune", url, "--recursive", "--json", code=1)
    assert calls and "reset by peer" in err, err
    monkeypatch.setattr(remote_cas, "delete_many", real)
    st = remote.storage_for_url(url)
    names = st.listdir(f"{url}/run")
    state = st.read_bytes(f"{url}/run/checkpoint").decode()
    assert "ckpt-3" not in state and "ckpt-4" not in state  # the state was written before the deletions
    if ".ckptool.lock" in names:  # left to expire with its journal: taken over TTL seconds later
        lock = json.loads(st.read_bytes(f"{url}/run/.ckptool.lock"))
        assert lock["note"] == ["ckpt-3", "ckpt-4"]
        lock["expires"] = time.time() - 1
        fs.pipe_file(f"{url}/run/.ckptool.lock", json.dumps(lock).encode())
    elif any(n.startswith(("ckpt-3", "ckpt-4")) for n in names):  # else a journal file names what is left
        assert json.loads(st.read_bytes(f"{url}/run/.ckptool-prune-pending")) == ["ckpt-3", "ckpt-4"], names
    remote.clear_cache()
    run("prune", url, "--recursive")
    assert st.listdir(f"{url}/run") == ["checkpoint", "ckpt-5.data-00000-of-00001", "ckpt-5.index"]


def test_an_interrupted_fleet_prune_starts_no_more_runs(s3, tmp_path, monkeypatch):
    """Ctrl-C (KeyboardInterrupt in the main thread) while runs are pruned RUN_JOBS at a time: the
    runs already started finish, the others are not started (they were queued in the pool, which
    ran every one of them before the interrupt was let through)."""
    from ckptool.ops.retain import fleet as F

    fs, root, _ = s3
    _fleet(tmp_path, fs, f"{root}/fleet")
    url = f"{root}/fleet"
    monkeypatch.setattr(F, "RUN_JOBS", 2)
    started = []
    real = F.prune_open

    def slow(storage, d, *a, **k):
        started.append(d.path)
        time.sleep(0.2)
        return real(storage, d, *a, **k)

    monkeypatch.setattr(F, "prune_open", slow)

    def interrupt(i, n, path):
        raise KeyboardInterrupt

    remote.clear_cache()
    with pytest.raises(KeyboardInterrupt):
        F.prune_tree(url, progress=interrupt)
    time.sleep(0.5)
    assert 0 < len(started) <= 3, started
    st = remote.storage_for_url(url)
    pruned = [p for p in st.find(url, "ckpt-3.index")]
    assert len(pruned) >= RUNS - 3, pruned  # the others untouched


@pytest.mark.parametrize("dry_run", [True, False])
def test_fleet_prune_warns_of_damage_in_walk_order_as_locally(run, s3, tmp_path, monkeypatch, dry_run):
    """Runs pruned at once on an object store warn (a damaged checkpoint kept) from their threads:
    stderr is the local one, line for line, whichever run finishes first (the first run in walk
    order made the slowest here)."""
    from ckptool.ops.retain import fleet as F

    fs, root, _ = s3
    local = _fleet(tmp_path, fs, f"{root}/clean")
    for rel in ("team0/run00", "team0/run04", "team2/run02"):
        p = local / rel / "ckpt-5.index"
        b = bytearray(p.read_bytes())
        b[-1] ^= 1  # the footer's magic: an index that does not parse
        p.write_bytes(bytes(b))
    url = f"{root}/damaged"
    upload(fs, local, url)
    real = F.prune_open

    def first_slowest(storage, d, *a, **k):
        if d.path.endswith("team0/run00"):
            time.sleep(0.6)
        return real(storage, d, *a, **k)

    monkeypatch.setattr(F, "prune_open", first_slowest)
    argv = ("prune", "{}", "--recursive", "--json", *(["--dry-run"] if dry_run else []))
    lo, le = run(*[a.format(local) for a in argv], code=1)
    ro, re_ = run(*[a.format(url) for a in argv], code=1)
    assert le.count("damaged") >= 3 and re_.replace(url, str(local)) == le, (le, re_)
    assert normalized(json.loads(ro), url, str(local)) == normalized(json.loads(lo), str(local), str(local))


def test_an_interrupted_fleet_verify_starts_no_more_checks(s3, tmp_path, monkeypatch):
    """Ctrl-C during ``verify --recursive`` on an object store: the small checkpoints queued to be
    checked at once are not all checked first (thousands of them: the interrupt waited for all)."""
    from ckptool.ops.inspect import verify_tree as V

    fs, root, _ = s3
    _fleet(tmp_path, fs, f"{root}/fleet")
    url = f"{root}/fleet"
    monkeypatch.setattr(V, "AT_ONCE", 2)
    real_small, real_check = V._small, V._check
    first: list[str] = []
    started = []

    def all_but_first(storage, todo):
        first.append(todo[0])
        return real_small(storage, todo) - {todo[0]}  # the first checked in the caller's thread

    def check(target, seen, progress, workers):
        if target == first[0]:
            time.sleep(0.1)
            raise KeyboardInterrupt
        started.append(target)
        time.sleep(0.1)
        return real_check(target, seen, progress, workers)

    monkeypatch.setattr(V, "_small", all_but_first)
    monkeypatch.setattr(V, "_check", check)
    remote.clear_cache()
    with pytest.raises(KeyboardInterrupt):
        V.verify_paths([url], recursive=True)
    assert 0 < len(started) <= 4, len(started)


def test_forgetting_a_runs_reads_while_other_runs_write_their_state_files(monkeypatch):
    """Runs pruned at once share the listing: one planned again (``forget_reads``: its state file
    changed since the listing) walks the versions the listing keeps while the others' state
    writes take theirs out of it. It raised 'dictionary changed size during iteration'."""
    import sys
    import threading
    import uuid

    from ckptool.io.backends.remote_listing import Listing

    pytest.importorskip("fsspec")
    root = f"memory://race{uuid.uuid4().hex[:12]}"
    st = remote.storage_for_url(root)
    snap = Listing(root, {})
    n = 100_000
    snap.versions = {f"{root}/r{i}/checkpoint": (b"", i) for i in range(n)}
    monkeypatch.setattr(st, "_snap", snap)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []
    stop = threading.Event()

    def writes():
        for i in range(n - 1, 0, -1):
            if stop.is_set():
                return
            snap.versions.pop(f"{root}/r{i}/checkpoint", None)  # as write_bytes_atomic / _versioned take it
            if i % 50 == 0:
                st.write_bytes_atomic(f"{root}/r{i}/checkpoint", b"x")

    writer = threading.Thread(target=writes)
    writer.start()
    try:
        for _ in range(30):
            try:
                st.forget_reads(f"{root}/r0")
            except RuntimeError as exc:
                errors.append(exc)
                break
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(interval)
    assert not errors, errors


def test_fleet_prune_on_memory_matches_local_and_leaves_no_lock(run, tmp_path):
    """memory:// (conditional writes, no batch delete): the runs pruned at once as on a local disk,
    each lock object released after its run's files."""
    import uuid

    fsspec = pytest.importorskip("fsspec")
    fs, url = fsspec.filesystem("memory"), f"memory://fleet{uuid.uuid4().hex[:12]}"
    local = _fleet(tmp_path, fs, url)
    try:
        same_output(run, str(local), url, "prune", "{}", "--recursive", "--json")
        st = remote.storage_for_url(url)
        for p in sorted(local.rglob("checkpoint")):
            rel = p.parent.relative_to(local).as_posix()
            assert st.listdir(f"{url}/{rel}") == sorted(x.name for x in p.parent.iterdir() if x.name != ".ckptool.lock")
    finally:
        fs.rm(url, recursive=True)


def test_trainers_saving_during_a_parallel_fleet_prune_keep_their_checkpoints(run, s3, tmp_path, monkeypatch):
    """Trainers of several runs save ckpt-6 (files, then a plain write of the state file) while the
    runs are pruned at once, between the listing's read of their state file and prune's write: each
    of those runs is planned again under its lock and keeps ckpt-6; no state file names a deleted
    checkpoint; the other runs end as the local prune leaves them."""
    from ckptool.io.backends import remote_cas
    from ckptool.io.control.state import read_state

    fs, root, _ = s3
    local = _fleet(tmp_path, fs, f"{root}/fleet")
    url = f"{root}/fleet"
    training = {"team0/run00", "team1/run05", "team2/run10", "team3/run15"}
    real_put = remote_cas.put
    saved = []

    def trainer_saves_first(st, path, data, token):
        rel = path[len(url) + 1:].rsplit("/", 1)[0]
        if path.endswith("/checkpoint") and rel in training and rel not in saved:
            saved.append(rel)
            _save_ckpt6(fs, f"{url}/{rel}", local / rel)
        return real_put(st, path, data, token)

    monkeypatch.setattr(remote_cas, "put", trainer_saves_first)
    remote.clear_cache()
    run("prune", url, "--recursive")
    assert sorted(saved) == sorted(training)
    run("prune", str(local), "--recursive")
    st = remote.storage_for_url(url)
    remote.clear_cache()
    for p in sorted(local.rglob("checkpoint")):
        rel = p.parent.relative_to(local).as_posix()
        state = read_state(f"{url}/{rel}", st)
        names = [x.rsplit("/", 1)[-1] for x in state.all_model_checkpoint_paths]
        files = st.listdir(f"{url}/{rel}")
        assert all(n + ".index" in files for n in names), (rel, names, files)
        if rel in training:
            assert names[-1] == "ckpt-6" and "ckpt-6.data-00000-of-00001" in files, (rel, names)
            assert len(names) == (1 if rel.startswith("team1") else 2), (rel, names)
        else:
            assert files == sorted(x.name for x in p.parent.iterdir() if x.name != ".ckptool.lock"), rel


def test_ordered_says_warnings_and_raises_in_the_order_asked(recwarn):
    """``ops.read.ordered.Ordered``: tasks finishing in reverse order; their warnings said, and the
    failing one's exception raised, in submission order, each warning once; the hook put back."""
    import threading
    import warnings

    from ckptool.errors import CkptWarning
    from ckptool.ops.read.ordered import Ordered

    before = warnings.showwarning
    gates = [threading.Event() for _ in range(4)]

    def task(i):
        if i < 3:
            gates[i + 1].wait(5)  # task i finishes after task i + 1
        warnings.warn(f"task {i}", CkptWarning, stacklevel=2)
        gates[i].set()
        if i == 2:
            raise ValueError("task 2 failed")
        return i

    got = []
    with pytest.raises(ValueError, match="task 2 failed"):
        with Ordered(4) as pool:
            tasks = [pool.submit(task, i) for i in range(4)]
            warnings.warn("caller", CkptWarning, stacklevel=2)  # the caller's own: said at once
            for t in tasks:
                got.append(t.result())
    assert got == [0, 1]
    assert [str(w.message) for w in recwarn.list] == ["caller", "task 0", "task 1", "task 2"]
    assert warnings.showwarning is before


@pytest.mark.parametrize("what", ["no index", "no files", "only indexes"])
def test_fleet_prune_of_checkpoints_without_an_index_or_any_file_matches_local(run, store, tmp_path, what):
    """The checkpoints a run deletes have no index (a data file left), no file at all (a state
    entry only), or only their index: deleted (or reported) as locally, the lock object released
    whichever request is the last, no journal left."""
    fs, root = store
    local = tmp_path / "fleet"
    shutil.copytree(DATA / "manager", local / "run", ignore=shutil.ignore_patterns("*.json"))
    (local / ".ckptool.toml").write_text("max_to_keep = 1\n")
    for base in ("ckpt-3", "ckpt-4"):
        for f in (local / "run").glob(f"{base}.*"):
            if what == "no files" or (what == "no index") == f.name.endswith(".index"):
                f.unlink()
    url = f"{root}/fleet"
    upload(fs, local, url)
    remote.clear_cache()
    same_output(run, str(local), url, "prune", "{}", "--recursive", "--json")
    st = remote.storage_for_url(url)
    assert st.listdir(f"{url}/run") == sorted(p.name for p in (local / "run").iterdir() if p.name != ".ckptool.lock")
    assert st.listdir(f"{url}/run") == ["checkpoint", "ckpt-5.data-00000-of-00001", "ckpt-5.index"]


def test_a_journal_that_cannot_be_written_for_a_refused_key_is_reported_with_it(run, s3, tmp_path, monkeypatch):
    """Planned first, the lock object (the journal) went in the batch but a data key was refused;
    before the lock is taken again to write the journal file, another holder takes it and keeps it
    past the wait. The run is still reported: the file that could not be deleted, and the journal
    that could not be written (it was an error line about the lock alone, the file unnamed)."""
    from ckptool.io.backends import remote_cas
    from ckptool.ops.retain import prune as P

    fs, root, _ = s3
    local, url = _one_run(fs, root, tmp_path)
    real = remote_cas.delete_many
    other = {"tool": "ckptool", "pid": 1, "host": "elsewhere", "command": "ckptool save", "expires": time.time() + 60}

    def refusing_then_taken(st, paths, versions=None):
        if not versions:
            return real(st, paths, versions)
        stuck = [p for p in paths if p.endswith("ckpt-3.data-00000-of-00001")]
        got = real(st, [p for p in paths if p not in stuck], versions)
        fs.pipe_file(f"{url}/run/.ckptool.lock", json.dumps(other).encode())  # a trainer's save takes it
        return {**(got or {}), **{p: "AccessDenied: refused" for p in stuck}}

    monkeypatch.setattr(remote_cas, "delete_many", refusing_then_taken)
    monkeypatch.setattr(P, "DEFAULT_TIMEOUT", 0.3)
    remote.clear_cache()
    out, err = run("prune", url, "--recursive", "--json", code=1)
    doc = json.loads(out)
    assert [d["error"] for d in doc["directories"]] == [None], doc
    failed = {f["path"]: f.get("action", "delete") for f in doc["directories"][0]["failed"]}
    assert failed == {f"{url}/run/ckpt-3.data-00000-of-00001": "delete", f"{url}/run/.ckptool-prune-pending": "write"}
    assert "ckpt-3.data-00000-of-00001: cannot delete" in err and ".ckptool-prune-pending: cannot write" in err, err
    st = remote.storage_for_url(url)
    assert json.loads(st.read_bytes(f"{url}/run/.ckptool.lock")) == other  # the other holder's, untouched


def test_a_botocore_that_cannot_send_a_keys_version_releases_the_lock_on_its_own(run, fleet, monkeypatch):
    """An older botocore refuses ``ETag`` in DeleteObjects: the lock object is then not put in the
    batch (the request would fail, leaving the lock to expire), but released by its own conditional
    DELETE after the files; the data files still go in one batch; the answers are as locally."""
    from ckptool.io.backends import remote_cas

    local, url, counter = fleet
    monkeypatch.setattr(remote_cas, "batch_versions_known", lambda st: False)
    lo, _ = run("prune", str(local), "--recursive", "--json")
    log, ro = _requests(counter, run, "prune", url, "--recursive", "--json")
    assert normalized(json.loads(ro), url, str(local)) == normalized(json.loads(lo), str(local), str(local))
    assert sum(r["method"] == "DELETE" and r["path"].endswith("/.ckptool.lock") for r in log) == RUNS
    assert len(_deletions(log)) == 2 * RUNS
    st = remote.storage_for_url(url)
    assert not [p for p in st.fs.find(url) if p.endswith(".ckptool.lock")]
