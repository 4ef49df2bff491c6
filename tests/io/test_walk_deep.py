"""One walk of a tree, a loop over a stack (issue 50): a run 1,100 directories deep is found by
``verify --recursive``, ``du`` and ``prune --recursive`` alike (os.walk recursed: RecursionError)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from ckptool.io.backends.local import LOCAL
from clirun import run

DATA = pathlib.Path(__file__).parents[1] / "data"
DEPTH = 1100


def _deep(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    root = tmp_path / "t"
    root.mkdir()
    (root / ".ckptool.toml").write_text("max_to_keep = 2\n")
    fd = os.open(root, os.O_RDONLY)
    try:  # made relative to a descriptor: no path of 2,200 characters needed to make it
        for _ in range(DEPTH):
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = sub
        for src in sorted(DATA.joinpath("manager").iterdir()):
            if src.suffix != ".json":
                wfd = os.open(src.name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(wfd, src.read_bytes())
                os.close(wfd)
    finally:
        os.close(fd)
    return root, root.joinpath(*["d"] * DEPTH)


def test_walk_dirs_is_a_loop_in_sorted_depth_first_order(tmp_path):
    for rel in ("b/x", "a/z", "a/y/q", "c"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "a" / "f").write_text("")
    os.symlink(tmp_path / "a", tmp_path / "link")  # never followed
    bad = []
    got = [os.path.relpath(p, tmp_path) for p in LOCAL.walk_dirs(str(tmp_path), lambda p, r: bad.append(p))]
    assert got == [".", "a", "a/y", "a/y/q", "a/z", "b", "b/x", "c"] and not bad
    assert got == [os.path.relpath(d, tmp_path) for d, subs, _ in _sorted_walk(tmp_path)]


def _sorted_walk(top):
    for d, subs, files in os.walk(top):
        subs.sort()
        yield d, subs, files


@pytest.fixture
def deep(tmp_path):
    root, leaf = _deep(tmp_path)
    try:
        yield root, leaf
    finally:  # pytest's own cleanup of tmp_path recurses: never leave the tree to it
        _flatten_away(root, tmp_path)


def test_a_tree_1100_deep_is_walked_by_every_command(deep, capsys):
    root, leaf = deep
    rc, out, err = run(capsys, "verify", str(root), "--recursive", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["ok"] and doc["checkpoints"] == 3 and all(r["prefix"].startswith(str(leaf)) for r in doc["results"])
    rc, out, err = run(capsys, "du", str(root), "--json")
    assert rc == 0, err
    rows = json.loads(out)["directories"]
    assert [r["directory"] for r in rows] == [str(leaf)] and rows[0]["checkpoints"] == 3
    rc, out, err = run(capsys, "prune", str(root), "--recursive", "--dry-run", "--json")
    assert rc == 0, err
    runs = json.loads(out)["directories"]
    assert [r["directory"] for r in runs] == [str(leaf)] and runs[0]["counts"]["deleted"] == 1


def _flatten_away(root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """Remove the tree without recursing (shutil.rmtree and pytest's cleanup would): each level
    is moved up beside ROOT, then each is one level deep."""
    cur, i = root, 0
    while (cur / "d").is_dir():
        nxt = tmp_path / f"level{i}"
        os.rename(cur / "d", nxt)
        cur, i = nxt, i + 1
    for p in [root, *(tmp_path / f"level{j}" for j in range(i))]:
        shutil.rmtree(p)
