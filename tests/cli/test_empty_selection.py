"""A name filter that selects nothing is an error, not an empty result (ckptool.ops.read.select):
convert, diff, rewrite-names and list-variables name the pattern(s), exit 1 (diff: 2, its
"trouble"), and write nothing; a filter that selects something, or no filter on an empty
source, goes on as before."""

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.ops.read.select import select


def _one_line_error(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckptool: error: "), err
    for w in words:
        assert w in lines[0], (w, err)


@pytest.mark.parametrize("filters", [("--match", "zz*"), ("--match", "zz*", "--match", "yy"),
                                     ("--exclude", "*"), ("--match", "save*", "--exclude", "save*")])
@pytest.mark.parametrize("suffix", ["x.npz", "x.safetensors", "out/ckpt"])
def test_convert_refuses_a_filter_that_selects_nothing(ck, example, tmp_path, filters, suffix):
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out, err = ck("convert", example / "ckpt-5", tmp_path / suffix, *filters)
    assert code == 1 and out == ""
    _one_line_error(err, *[f"{flag} '{glob}'" for flag, glob in zip(filters[::2], filters[1::2])],
                    "selects none of the", "nothing written")
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written, no temp name left


def test_convert_with_a_filter_that_selects_something_still_writes(ck, example, tmp_path):
    code, _, err = ck("convert", example / "ckpt-5", tmp_path / "x.npz", "--match", "save*", "--match", "zz*")
    assert code == 0, err
    with np.load(tmp_path / "x.npz") as z:
        assert z.files == ["save_counter/.ATTRIBUTES/VARIABLE_VALUE"]


def test_library_convert_raises_and_writes_nothing(example, tmp_path):
    with pytest.raises(CkptError, match=r"--match 'nope/\*' selects none of the \d+ tensors"):
        ckptool.convert(str(example / "ckpt-5"), str(tmp_path / "x.npz"), match=["nope/*"])
    assert not list(tmp_path.glob("x*"))


def test_diff_match_selecting_nothing_is_trouble_not_identical(ck, example):
    code, out, err = ck("diff", example / "ckpt-4", example / "ckpt-5", "--match", "zz*")
    assert code == 2 and out == ""
    _one_line_error(err, "--match 'zz*'", "selects none of the")
    code, _, _ = ck("diff", example / "ckpt-5", example / "ckpt-5", "--match", "save*")
    assert code == 0


@pytest.mark.parametrize("filters", [("--match", "zz*"), ("--regex", "^zz"), ("--match", "save*", "--regex", "zz")])
def test_list_variables_selecting_nothing_exits_1_like_grep(ck, example, filters):
    for extra in ((), ("--json",)):
        code, out, err = ck("list-variables", example / "ckpt-5", *filters, *extra)
        assert code == 1 and out == ""
        _one_line_error(err, "selects none of the", "variables of")


def test_list_variables_bad_regex_is_still_a_usage_error(ck, example):
    code, _, err = ck("list-variables", example / "ckpt-5", "--regex", "[")
    assert code == 2 and "--regex '['" in err


@pytest.mark.parametrize("argv", [("--drop", "*"), ("--drop", "*", "--dry-run"), ("--drop", "*", "--compact"),
                                  ("--drop", "optimizer/*", "--drop", "save*")])
def test_rewrite_names_dropping_everything_is_refused(ck, example, tmp_path, argv):
    code, out, err = ck("rewrite-names", example / "ckpt-5", tmp_path / "small" / "ckpt", *argv)
    assert code == 1 and out == ""
    _one_line_error(err, "--drop '*'" if argv[1] == "*" else "--drop 'optimizer/*' --drop 'save*'", "leaves none of the",
                    "nothing written")
    assert not (tmp_path / "small").exists()


def test_select_is_the_one_rule():
    names = ["a/x", "a/y", "b"]
    assert select(names, "src", ["a/*"], None, ["*y"]) == ["a/x"]
    assert select([], "src", ["zz"]) == []  # an empty source is not the filter's fault
    assert select(names, "src") == names
    with pytest.raises(CkptError, match=r"^--match 'zz' --regex 'q' --exclude 'b' selects none of the 3 tensors "
                                        r"of src$"):
        select(names, "src", ["zz"], "q", ["b"])
