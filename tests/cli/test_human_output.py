"""Human output speaks one language (issue 32): counts agree with their nouns, sizes have one
format (exact bytes are --json's), times one format, each fact is said once, and a variable count
means the same in every command (what list-variables lists, the object graph tensor included)."""

import re

import numpy as np

from ckptool.cli.common import human_bytes, human_time, plural
from clirun import completed

ROOT_DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_plural_and_the_one_size_and_time_formats():
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "directory", "directories") == "1 directory"
    assert plural(3, "directory", "directories") == "3 directories"
    assert [human_bytes(n) for n in (0, 973, 4527, 5 << 20)] == ["0 B", "973 B", "4.4 KiB", "5.0 MiB"]
    assert human_time(1796238396.0) == "2026-12-02T19:06:36Z" and human_time(None) == "-"


def _no_bad_plural(text):
    assert not re.search(r"(?<![\d.])1 (files|variables|tensors|values|checkpoints|parameters|paths|elements|inputs)\b",
                         text), text


def test_inspect_uses_one_size_format_and_no_raw_byte_counts(example):
    out = completed("inspect", example / "ckpt-5").stdout
    assert " bytes" not in out and "4527" not in out
    assert "runs/ckpt-5.data-00000-of-00001  4.4 KiB" in out.replace(str(example.parent) + "/", "")
    assert re.search(r"^bytes\s+4\.4 KiB$", out, re.M)
    assert re.search(r"^dtypes\s+string: 1 variable, 1 parameter, 2\.3 KiB$", out, re.M)
    _no_bad_plural(out)


def test_state_and_inspect_show_times_alike(example):
    shown = completed("inspect", example).stdout
    state = completed("state", example).stdout
    inspect_times = re.findall(ISO, shown)
    state_times = re.findall(ISO, state)
    assert inspect_times and set(inspect_times) <= set(state_times)
    assert "UTC" not in state


def test_rm_of_one_checkpoint_says_it_once(example):
    out = completed("rm", example / "ckpt-3")
    assert out.returncode == 0
    assert out.stderr.count("5.4 KiB") == 1 and "freed" not in out.stderr, out.stderr
    out = completed("rm", example / "ckpt-4", example / "ckpt-5", "--force", "--dry-run")
    assert "would free 10.7 KiB in all (2 checkpoints)" in out.stderr, out.stderr


def test_counts_of_one_are_singular(tmp_path):
    np.save(tmp_path / "step.npy", np.int64(3))
    out = completed("save", tmp_path / "ck", "--from", tmp_path / "step.npy", "--no-state")
    assert "1 variable, 8 B in 2 files" in out.stderr
    out = completed("convert", tmp_path / "ck", tmp_path / "w.npz")
    assert out.returncode == 0 and "1 tensor, 8 B in 1 file" in out.stderr, out.stderr
    out = completed("list-variables", tmp_path / "ck")
    assert out.stderr == "# 1 variable, 1 parameter, 8 B\n"
    _no_bad_plural(out.stderr)


def test_rewrite_names_counts_variables_as_list_variables_does(example, tmp_path):
    for extra in (["--strip-optimizer"], ["--rule", "optimizer/=opt/"]):
        dst = tmp_path / f"out{len(extra)}" / "ckpt-5"
        out = completed("rewrite-names", example / "ckpt-5", dst, *extra)
        assert out.returncode == 0, out.stderr
        said = int(re.search(r": (\d+) variables?,", out.stderr).group(1))
        listed = completed("list-variables", dst).stdout.splitlines()[1:]
        assert said == len(listed), (extra, out.stderr)


def test_a_name_based_rewrite_does_not_say_object_graph_none(tmp_path):
    src = tmp_path / "tf1"
    import shutil

    shutil.copytree(ROOT_DATA / "tf1_saver", src)
    out = completed("rewrite-names", src, tmp_path / "x" / "m", "--rule", "global_step=gs")
    assert out.returncode == 0, out.stderr
    assert "object graph none" not in out.stderr and "name-based (no object graph)" in out.stderr
