"""Fleet pruning: `prune ROOT --recursive`, `.ckptool.toml` policies, `du`."""

import json
import os

import numpy as np
import pytest

import ckptool
from ckptool.io.control.policy import effective_policy
from ckptool.io.control.state import CheckpointState, write_state
from ckptool.ops.retain import fleet as F
from ckptool.ops.retain import prune as P

T0 = 1_700_000_000.0
NOW = T0 + 30 * 86400


from clirun import run  # noqa: E402


def ckpts(d, steps, *, tf1=False, name="ckpt", gap=3600.0):
    d.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(steps):
        ckptool.write(str(d / f"{name}-{s}"), {"w": np.full(4, s, np.float32)}, sync=False)
        if tf1:
            (d / f"{name}-{s}.meta").write_bytes(b"m" * 10)
        t = T0 + i * gap
        for f in d.glob(f"{name}-{s}.*"):
            os.utime(f, (t, t))
    paths = [str(d / f"{name}-{s}") if tf1 else f"{name}-{s}" for s in steps]
    if tf1:
        write_state(str(d), CheckpointState(paths[-1], paths[-5:]))  # Saver: absolute, no timestamps
    else:
        write_state(str(d), CheckpointState(paths[-1], paths, [T0 + i * gap for i in range(len(steps))], T0 - 1))


@pytest.fixture
def tree(tmp_path):
    return build(tmp_path / "runs", tmp_path / "outside")


def build(root, outside):
    ckpts(outside, [1, 2, 3])
    for i in range(50):
        kind = i % 5
        d = root / f"exp{i:02d}"
        if kind == 0:
            ckpts(d, range(1, 9), tf1=True, name="model")
        elif kind == 1:
            ckpts(d, range(1, 11))
        elif kind == 2:
            ckpts(d / "train", range(100, 1100, 100))
            ckpts(d / "eval", range(1, 4))
        elif kind == 3:
            ckpts(d, range(1, 8))
            (d / ".ckptool.toml").write_text('max_to_keep = 2\nkeep = ["ckpt-1"]\n')
        else:
            ckpts(d, range(1, 7))
    (root / "exp04" / "checkpoint").write_text("model_checkpoint_path: ")  # corrupt
    (root / "exp09" / ".ckptool.toml").write_text("max_to_keep = 3\nkeep = = 2\n")  # malformed
    (root / "exp14" / "ckpt-99.index").symlink_to(outside / "ckpt-1.index")
    write_state(str(root / "exp14"), CheckpointState("ckpt-6", ["ckpt-99"] + [f"ckpt-{s}" for s in range(1, 7)],
                                                     [T0 - 5] + [T0 + i * 3600 for i in range(6)], T0 - 9))
    os.symlink(outside, root / "link-out")
    (root / "exp20").joinpath(".ckptool.toml").write_text('max_to_keep = 1\nmin_age = "100d"\n')
    (root / ".ckptool.toml").write_text("max_to_keep = 3\n")
    return root, outside


def files(root):
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.name.startswith(".ckptool.lock")}


def snapshot(d):
    return {str(p): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def test_every_directory_ends_as_prune_dir_with_its_policy(tree, tmp_path):
    root, outside = tree
    copy, _ = build(tmp_path / "copy", tmp_path / "outside2")
    before_out = snapshot(outside)
    # no max_to_keep argument: the files' values apply (issue 27: an argument given would beat them)
    res = F.prune_tree(str(root), now=NOW)
    assert snapshot(outside) == before_out
    assert set(res.errors) == {str(root / "exp04"), str(root / "exp09")}
    assert "exp09/.ckptool.toml" in res.errors[str(root / "exp09")] and "line" in res.errors[str(root / "exp09")]
    assert len(res.runs) == 60 - 2  # 50 runs, 10 of them as train/ and eval/, minus 2 failures
    # The same, one directory at a time, with each effective policy by hand.
    for d in sorted(res.runs):
        rel = os.path.relpath(d, root)
        pol, _ = effective_policy(str(root), d, {"max_to_keep": 5, "keep_every_n_hours": None,
                                                        "keep_steps_every": None, "min_age": None, "keep": []})
        P.prune(str(copy / rel), max_to_keep=pol["max_to_keep"], min_age=pol["min_age"], keep=pol["keep"],
                     now=NOW)
    lost = {f for f in files(copy) if "exp04" in f or "exp09" in f}
    assert files(root) == files(copy)
    assert lost <= files(root)
    # Root policy (3) applies; exp03's file overrides with 2 and a pin; exp20's min_age keeps all.
    assert sorted(p.name for p in (root / "exp01").glob("*.index")) == ["ckpt-10.index", "ckpt-8.index", "ckpt-9.index"]
    assert sorted(p.name for p in (root / "exp03").glob("*.index")) == ["ckpt-6.index", "ckpt-7.index"]
    assert sorted(p.name for p in (root / "exp03").glob("kept/*.index")) == ["ckpt-1.index"]  # the pin, moved
    assert len(list((root / "exp20").glob("*.index"))) == 8  # TF1 dir: min_age keeps all 8
    assert (root / "exp14" / "ckpt-99.index").is_symlink()
    # TF1 Saver dirs: absolute paths inside, mtimes; .meta deleted with the rest; orphans need --scan.
    assert sorted(p.name for p in (root / "exp00").glob("model-*")) == sorted(
        f"model-{s}{x}" for s in (1, 2, 3, 6, 7, 8) for x in (".index", ".data-00000-of-00001", ".meta"))
    assert not any((root / "exp04").glob("*.tmp*"))


def test_cli_report_json_exit_code_and_dry_run(tree, capsys):
    root, _ = tree
    before = files(root)
    code, out, err = run(capsys, "prune", str(root), "--recursive", "--dry-run", "--json", "--exclude", "exp1*")
    assert code == 1 and "exp04" in err and "directories failed" in err
    doc = json.loads(out)
    dirs = {d["directory"]: d for d in doc["directories"]}
    assert doc["dry_run"] and str(root / "exp04") in dirs and dirs[str(root / "exp04")]["error"]
    assert not any("exp1" in os.path.relpath(d, root) for d in dirs)
    assert doc["total"]["deleted"] > 0 and doc["total"]["bytes_freed"] > 0
    assert files(root) == before
    code, out, err = run(capsys, "prune", str(root), "--recursive")
    assert code == 1
    assert out.splitlines()[0].split()[0] == "DIRECTORY" and out.splitlines()[-1].startswith("total")


def test_du(tree, capsys):
    root, _ = tree
    d = root / "exp01"
    os.link(d / "ckpt-10.data-00000-of-00001", d / "hardlink-of-a-shard")  # not a checkpoint file
    code, out, err = run(capsys, "du", str(root), "--json")
    assert code == 1  # exp04's corrupt state / exp09's toml are reported
    doc = json.loads(out)
    rows = {r["directory"]: r for r in doc["directories"]}
    r = rows[str(d)]
    size = sum(f.stat().st_size for f in d.glob("ckpt-*"))
    assert r["checkpoints"] == 10 and r["bytes"] == size and r["latest_step"] == 10
    assert r["would_free"] == sum(f.stat().st_size for f in d.glob("ckpt-*") if f.name.split(".")[0] in
                                  {f"ckpt-{i}" for i in range(1, 8)})
    sizes = [x["bytes"] for x in doc["directories"]]
    assert sizes == sorted(sizes, reverse=True)
    assert doc["total"]["checkpoints"] == sum(x["checkpoints"] for x in doc["directories"])
    code, out, err = run(capsys, "du", str(root), "--exclude", "exp04", "--exclude", "exp09")
    assert code == 0 and out.splitlines()[-1].startswith("total")


def test_toml_errors_name_file_and_line(tmp_path):
    d = tmp_path / "r"
    ckpts(d, [1, 2])
    (d / ".ckptool.toml").write_text("max_to_keep = 2\nbogus = 1\n")
    with pytest.raises(ckptool.errors.CorruptError, match="bogus"):
        effective_policy(str(tmp_path), str(d), {})
    (d / ".ckptool.toml").write_text('min_age = "soon"\n')
    with pytest.raises(ckptool.errors.CorruptError, match="min_age"):
        effective_policy(str(tmp_path), str(d), {})
