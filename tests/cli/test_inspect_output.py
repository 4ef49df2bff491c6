"""What ``inspect`` prints for a new user (issue 32): the directory's state beside a prefix too,
the object graph out of --all-tensors' values."""

import json

from clirun import completed


def test_inspect_of_a_prefix_shows_its_directorys_state(example):
    for arg in (example / "ckpt-5", example / "ckpt-5.index", example):
        out = completed("inspect", arg)
        assert out.returncode == 0, out.stderr
        assert f"state       {example / 'checkpoint'}" in out.stdout, arg
        rows = out.stdout.split("STEP", 1)[1].splitlines()[1:]
        assert [r.split()[0] for r in rows] == ["3", "4", "5"], arg
        assert rows[-1].split()[-2:] == ["latest", "ckpt-5"]
        doc = json.loads(completed("inspect", arg, "--json").stdout)
        assert [c["step"] for c in doc["state"]["checkpoints"]] == [3, 4, 5]


def test_inspect_of_a_prefix_without_a_state_file_has_no_state(example):
    (example / "checkpoint").unlink()
    out = completed("inspect", example / "ckpt-4")
    assert out.returncode == 0 and "state" not in out.stdout and "STEP" not in out.stdout
    assert json.loads(completed("inspect", example / "ckpt-4", "--json").stdout)["state"] is None
