"""A small mutation run over the rules a wrong line would make dangerous.

Each mutant changes one line of one named function (the io rules: which files are a
checkpoint's, temporaries, the atomic publish; the rename matcher; retention; the integrity
check and the moves into kept/; the reader cache of ckptool.compat). The
script copies the tracked tree to a temporary directory, applies one mutant at a
time there (the working tree is never touched), runs the fast tests chosen to kill
it, and prints which were killed and the score. A mutant survives when those tests
still pass.

    python bench/mutate.py            # every mutant
    python bench/mutate.py -k publish # those whose name contains "publish"

Exit status: 0 when every mutant was killed, 1 otherwise (2: the unmutated tree
fails its tests, or a mutant no longer applies: the list needs updating).
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAYOUT_TESTS = ("tests/io/test_layout_rules.py",)
ATOMIC_TESTS = ("tests/io/test_atomic.py",)
RENAME_TESTS = ("tests/ops/test_rename_matcher.py",)
RETENTION_TESTS = ("tests/ops/test_retention.py",)
ISSUE39_TESTS = ("tests/robustness/test_mutants.py",)  # the three survivors a review found (issue 39)
INTEGRITY_TESTS = ("tests/ops/test_integrity.py",)
KEPT_TESTS = ("tests/ops/test_kept.py",)
CACHE_TESTS = ("tests/compat/test_reader_cache.py",)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    function: str  # "func" or "Class.method": the mutation must fall inside it
    old: str  # text found exactly once in that function (it may span lines for context)
    new: str  # the same text with one line changed
    tests: tuple[str, ...]


MUTANTS = [
    # ---- which files are a checkpoint's (io/layout/names.py, io/layout/checkpoints.py)
    Mutant("owns: ckpt-10 taken for ckpt-1", "ckptool/io/layout/names.py", "owns",
           "    return role[0] == base\n", "    return role[0].startswith(base)\n", LAYOUT_TESTS),
    Mutant("owns: the base's own name is its file", "ckptool/io/layout/names.py", "owns",
           "    if role is None:\n        return False", "    if role is None:\n        return name == base",
           LAYOUT_TESTS),
    Mutant("owns: any .meta", "ckptool/io/layout/names.py", "owns",
           "        return role[0] == base or meta_graph_filename(base) == name",
           "        return True", LAYOUT_TESTS),
    Mutant("checkpoint_files: every name that starts with the prefix", "ckptool/io/layout/checkpoints.py",
           "checkpoint_files",
           "if owns(base, n)]", "if n.startswith(base) and n != base]", LAYOUT_TESTS),
    Mutant("temp_owner: a staging directory owned by nobody", "ckptool/io/layout/names.py", "temp_owner",
           "    return owner if is_tmp else staging_owner(name)", "    return owner if is_tmp else None", LAYOUT_TESTS),
    # ---- temporaries and the atomic publish
    Mutant("AtomicFile: written under the target name", "ckptool/io/safety/atomic.py", "AtomicFile.__init__",
           "        self.name = storage.temp_name(target) if self.atomic else target",
           "        self.name = target", ATOMIC_TESTS),
    Mutant("temp name: not beside the target", "ckptool/io/safety/atomic.py", "tempstate_name",
           'return f"{path}.tempstate{', 'return f"{os.path.basename(path)}.tempstate{', ATOMIC_TESTS),
    Mutant("temp name: not fresh", "ckptool/io/safety/atomic.py", "tempstate_name",
           "uuid.uuid4().int & ((1 << 64) - 1)", "0", ATOMIC_TESTS),
    Mutant("publish: the index renamed before the data", "ckptool/io/safety/atomic.py", "publish",
           "        for f in files:\n            f.publish()",
           "        for f in reversed(files):\n            f.publish()", ATOMIC_TESTS),
    Mutant("publish: no rollback when the index rename fails", "ckptool/io/safety/atomic.py", "publish",
           "        if files and not files[-1].published:", "        if False:", ATOMIC_TESTS),
    Mutant("publish: renames before every file is sealed", "ckptool/io/safety/atomic.py", "publish",
           "        for f in files:\n            f.seal()", "        for f in files:\n            pass", ATOMIC_TESTS),
    Mutant("publish: the directory not fsynced", "ckptool/io/safety/atomic.py", "publish",
           "            files[0].storage.fsync_dir(d)", "            pass", ATOMIC_TESTS),
    Mutant("publish: a failed check publishes anyway", "ckptool/io/safety/atomic.py", "publish",
           "        if check is not None and not check():", "        if False:", ATOMIC_TESTS),
    Mutant("write_bytes: expect ignored", "ckptool/io/safety/atomic.py", "write_bytes",
           "    check = None if expect is ANY else", "    check = None if True else", ATOMIC_TESTS),
    Mutant("discard: the temporary left behind", "ckptool/io/safety/atomic.py", "AtomicFile.discard",
           "            self.storage.remove(self.name)", "            pass", ATOMIC_TESTS),
    Mutant("check_destination: overwrite without --force", "ckptool/io/safety/destination.py", "check_destination",
           "    if not force:", "    if False:", ATOMIC_TESTS),
    Mutant("check_destination: a symlinked source not seen", "ckptool/io/safety/destination.py", "check_destination",
           "        if any(storage.same_file(t, s) or storage.same_file(bare, s) for s in sources):",
           "        if any(t == s or bare == s for s in sources):", ATOMIC_TESTS),
    # ---- the rename matcher
    Mutant("rename: only the deepest scope tried", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           '                end = name.rfind("/", 0, end)', "                end = -1", RENAME_TESTS),
    Mutant("rename: the longest scope skipped", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           "                r = self.prefixes.get(name[:end + 1])",
           '                r = None if end == name.rfind("/") else self.prefixes.get(name[:end + 1])', RENAME_TESTS),
    Mutant("rename: a scope matched without its '/'", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           "                    return r.new + name[end + 1:]", "                    return r.new + name[end:]",
           RENAME_TESTS),
    Mutant("rename: a regex searched, not full-matched", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           "r.pattern.fullmatch(name)", "r.pattern.search(name)", RENAME_TESTS),
    Mutant("rename: a scope before an exact rule", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           "        r = self.exact.get(name)", "        r = None", RENAME_TESTS),
    Mutant("rename: regex rules applied in reverse order", "ckptool/ops/transform/rename/rules.py", "Renamer.__call__",
           "        for r in self.regex:", "        for r in reversed(self.regex):", RENAME_TESTS + ISSUE39_TESTS),
    # ---- the safetensors reader
    Mutant("safetensors: a gap between tensors accepted", "ckptool/format/safetensors_meta.py", "decode_header",
           "        if t.begin != pos or t.end < t.begin:", "        if t.begin < pos or t.end < t.begin:",
           ISSUE39_TESTS),
    # ---- prune --clean-temp beside a writer
    Mutant("clean-temp --dry-run: is_locked always false", "ckptool/ops/retain/prune.py", "_clean_temp",
           "    if res.dry_run and storage.lock_held(d.path, d.fd):",
           "    if res.dry_run and False:", ISSUE39_TESTS),
    # ---- retention
    Mutant("retention: latest not protected", "ckptool/ops/retain/retention.py", "plan",
           "        if e.name == latest:", "        if False:", RETENTION_TESTS),
    Mutant("retention: min-age reversed", "ckptool/ops/retain/retention.py", "plan",
           "now - e.timestamp < policy.min_age", "now - e.timestamp > policy.min_age", RETENTION_TESTS),
    Mutant("retention: steps-every keeps the others", "ckptool/ops/retain/retention.py", "plan",
           "e.step % policy.keep_steps_every == 0", "e.step % policy.keep_steps_every != 0", RETENTION_TESTS),
    Mutant("retention: a pin ignored", "ckptool/ops/retain/retention.py", "plan",
           "        if e.name in policy.pinned:", "        if False:", RETENTION_TESTS),
    Mutant("sweep: keeps one more than max_to_keep", "ckptool/ops/retain/retention.py", "window_start",
           "        return n - max_to_keep\n", "        return n - max_to_keep - 1\n", RETENTION_TESTS),
    Mutant("sweep: every-n-hours spacing off by the interval", "ckptool/ops/retain/retention.py", "sweep",
           "e.timestamp - hours >= d.last_preserved_timestamp", "e.timestamp >= d.last_preserved_timestamp",
           RETENTION_TESTS),
    # ---- issue 36: damaged checkpoints, TF1's hours, the moves into kept/
    Mutant("window: a damaged checkpoint counted as one of max_to_keep", "ckptool/ops/retain/retention.py",
           "window_start", "        if health(managed[i].name) != BROKEN:", "        if True:", RETENTION_TESTS),
    Mutant("plan: the newest intact checkpoint may be deleted", "ckptool/ops/retain/retention.py", "plan",
           "        if newest is not None and newest not in protect:", "        if False:", RETENTION_TESTS),
    Mutant("sweep: TF1's keep time not strict", "ckptool/ops/retain/retention.py", "sweep",
           "e.timestamp > next_keep if tf1", "e.timestamp >= next_keep if tf1", RETENTION_TESTS),
    Mutant("integrity: a short data file passes", "ckptool/ops/read/integrity.py", "_v2_damage",
           "        if have < end:", "        if have < 0:", INTEGRITY_TESTS),
    Mutant("release: DIR's names go before kept/ holds the checkpoint", "ckptool/ops/retain/deletion.py", "release",
           "            if not _holds(d, kept, klisting, here, base, kbase):", "            if False:", KEPT_TESTS),
    Mutant("keep_into: a name kept/ holds for another checkpoint is taken", "ckptool/ops/retain/deletion.py",
           "keep_into", "                    continue  # another checkpoint has this name in kept/",
           "                    pass  # another checkpoint has this name in kept/", KEPT_TESTS),
    # ---- issue 49: four mutants the suite let live
    Mutant("keep_into: the .index linked into kept/ first", "ckptool/ops/retain/deletion.py", "keep_into",
           "key=lambda f: (f.name == base + INDEX_SUFFIX, f.name))",
           "key=lambda f: (f.name != base + INDEX_SUFFIX, f.name))", KEPT_TESTS),
    Mutant("kept_moves: a damaged checkpoint put into kept/", "ckptool/ops/retain/kept.py", "kept_moves",
           "        if health is not None and health(e.name) != R.INTACT:", "        if False:", KEPT_TESTS),
    Mutant("reader cache: a file's identity without its inode", "ckptool/compat/train.py", "_identity",
           "    return st.st_dev, st.st_ino, st.st_size, st.st_mtime",
           "    return st.st_dev, st.st_size, st.st_mtime", CACHE_TESTS),
    Mutant("reader cache: the racy-mtime window ignored", "ckptool/compat/train.py", "_cached_index",
           "                time.time() - mtime > RACY_SECONDS or storage.read_bytes(index) == hit[1]):",
           "                True or storage.read_bytes(index) == hit[1]):", CACHE_TESTS),
    Mutant("same_file: a copy of the same size taken for the same bytes", "ckptool/io/layout/keptdir.py",
           "same_file", "    if not deep and not kept_name.endswith(\".index\"):", "    if True:", KEPT_TESTS),
]


def _span(source: str, function: str) -> tuple[int, int]:
    """Character offsets of ``function`` ("f" or "C.m") in ``source``."""
    tree = ast.parse(source)
    parts = function.split(".")
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in parts:
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise LookupError(function)
        body = node.body  # type: ignore[attr-defined]
    lines = source.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: node.lineno - 1])  # type: ignore[union-attr]
    end = sum(len(x) for x in lines[: node.end_lineno])  # type: ignore[union-attr]
    return start, end


def mutate(source: str, m: Mutant) -> str:
    start, end = _span(source, m.function)
    body = source[start:end]
    if body.count(m.old) != 1:
        raise LookupError(f"{m.name}: {m.old!r} found {body.count(m.old)} times in {m.function}")
    changed = [(a, b) for a, b in zip(m.old.splitlines(), m.new.splitlines()) if a != b]
    if len(changed) != 1 or len(m.old.splitlines()) != len(m.new.splitlines()):
        raise LookupError(f"{m.name}: a mutant changes exactly one line")
    return source[:start] + body.replace(m.old, m.new) + source[end:]


def _pytest(tree: str, tests: tuple[str, ...]) -> int:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider", *tests]
    return subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


def _copy_tree(dst: str) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = os.path.join(ROOT, rel)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dst, rel))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only the mutants whose name contains this")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if args.k in m.name]
    with tempfile.TemporaryDirectory(prefix="ckptool-mutate-") as tree:
        _copy_tree(tree)
        originals = {m.path: open(os.path.join(tree, m.path), encoding="utf-8").read() for m in chosen}
        try:
            mutated = [(m, mutate(originals[m.path], m)) for m in chosen]
        except LookupError as exc:
            print(f"mutant does not apply: {exc}")
            return 2
        suites = sorted({t for m in chosen for t in m.tests})
        if _pytest(tree, tuple(suites)) != 0:
            print("the unmutated tree fails its tests: " + " ".join(suites))
            return 2
        killed = 0
        for m, text in mutated:
            target = os.path.join(tree, m.path)
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
            try:
                code = _pytest(tree, m.tests)
            finally:
                with open(target, "w", encoding="utf-8") as f:
                    f.write(originals[m.path])
            dead = code not in (0, 5)  # 5: no tests ran, which kills nothing
            killed += dead
            print(f"{'killed  ' if dead else 'SURVIVED'}  {m.name}  ({m.function}; {' '.join(m.tests)})")
        print(f"mutation score: {killed}/{len(mutated)} killed")
        return 0 if killed == len(mutated) else 1


if __name__ == "__main__":
    sys.exit(main())
