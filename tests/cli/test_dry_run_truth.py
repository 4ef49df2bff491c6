"""``--dry-run`` tells the truth: for every command that has it, the dry run's ``--json``
document equals the one the real run then prints (counts, bytes, files, decisions), save
for ``dry_run`` itself and what only a write can know; and the dry run changed no byte."""

import json

import pytest

from clirun import completed

# argv after "ckptool", run in a directory holding a copy of the example at runs/.
COMMANDS = {
    "prune": ["prune", "runs", "--max-to-keep", "1"],
    "prune-hours": ["prune", "runs", "--max-to-keep", "0", "--keep-every-n-hours", "1000000"],
    "rm": ["rm", "runs/ckpt-3", "runs/ckpt-4"],
    "rm-latest": ["rm", "runs/ckpt-5", "--force"],
    "rewrite-names": ["rewrite-names", "runs/ckpt-5", "out/ckpt-5", "--strip-optimizer"],
    "average": ["average", "runs", "--last", "3", "-o", "avg/ckpt"],
    "state-rebuild": ["state", "runs", "--rebuild"],
}
# Keys a dry run cannot fill (the files a write produced).
WRITE_ONLY = {"files"}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_dry_run_reports_what_the_real_run_does(tmp_path, monkeypatch, example, tree_bytes, name):
    if name == "state-rebuild":
        (example / "checkpoint").unlink()
    monkeypatch.chdir(tmp_path)
    argv = COMMANDS[name]
    before = tree_bytes(tmp_path)
    dry = completed(*argv, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert tree_bytes(tmp_path) == before, "the dry run changed files"
    real = completed(*argv, "--json")
    assert real.returncode == 0, real.stderr
    assert tree_bytes(tmp_path) != before, "the real run did nothing: the comparison proves nothing"
    d, r = json.loads(dry.stdout), json.loads(real.stdout)
    assert d.pop("dry_run", True) is True and r.pop("dry_run", False) is False
    for key in WRITE_ONLY:
        d.pop(key, None)
        r.pop(key, None)
    assert d == r
