"""Unit tests of rewrite-names' matcher (ckptool.ops.transform.rename.rules.Renamer): which rule a
name meets, and what it becomes."""

from __future__ import annotations

import pytest

from ckptool.errors import UsageError
from ckptool.ops.transform.rename.assignment import plan_names
from ckptool.ops.transform.rename.rules import Renamer, make_rule, parse_rule


def rename(rules: dict[str, str], names: list[str]) -> tuple[list[str], list[str]]:
    r = Renamer([make_rule(k, v) for k, v in rules.items()])
    return [r(n) for n in names], r.unused()


def test_a_scope_matches_whole_components_only():
    got, unused = rename({"a/": "z/"}, ["a/x", "a/b/y", "ab/x", "a", "xa/x", "a_/x"])
    assert got == ["z/x", "z/b/y", "ab/x", "a", "xa/x", "a_/x"]
    assert unused == []
    got, unused = rename({"a/": "z/"}, ["ab/x", "a"])
    assert got == ["ab/x", "a"] and unused == ["a/=z/"]


def test_a_nested_scope_matches_its_own_prefix_only():
    got, _ = rename({"a/b/": "c/"}, ["a/b/x", "a/bc/x", "a/b", "a/x"])
    assert got == ["c/x", "a/bc/x", "a/b", "a/x"]


def test_the_longest_scope_wins_whatever_the_order_given():
    for rules in ({"a/": "x/", "a/b/": "y/"}, {"a/b/": "y/", "a/": "x/"}):
        got, unused = rename(rules, ["a/b/w", "a/c/w"])
        assert got == ["y/w", "x/c/w"] and unused == []


def test_an_exact_rule_comes_before_a_scope_and_matches_only_itself():
    got, _ = rename({"a/w": "exact", "a/": "s/"}, ["a/w", "a/w2", "a/w/x"])
    assert got == ["exact", "s/w2", "s/w/x"]


def test_a_scope_to_the_root_and_the_root_to_a_scope():
    assert rename({"old/": "/"}, ["old/x", "oldx"])[0] == ["x", "oldx"]
    assert rename({"/": "new/"}, ["x", "a/y"])[0] == ["new/x", "new/a/y"]
    assert rename({"a/": "s/", "/": "r/"}, ["a/x", "b"])[0] == ["s/x", "r/b"]  # a scope before the root


def test_a_regex_must_match_the_whole_name():
    got, unused = rename({"re:a(\\d)": "b\\1"}, ["a1", "xa1", "a12", "a1/x"])
    assert got == ["b1", "xa1", "a12", "a1/x"] and unused == []
    with pytest.raises(UsageError):
        rename({"re:a(\\d)": "\\2"}, ["a1"])


def test_rules_as_text():
    assert parse_rule("a/=b/").kind == "prefix" and parse_rule("x=y").kind == "exact"
    r = parse_rule("re:a=b=c")  # a regex rule splits at the last '='
    assert (r.old, r.new) == ("a=b", "c")
    for bad in ("a/=b", "/=x", "=x", "noequals", "re:(=x"):
        with pytest.raises(UsageError):
            parse_rule(bad)


def test_plan_reports_a_scope_that_matched_nothing():
    plan = plan_names(["ab/x", "ab/y"], [make_rule("a/", "z/")])
    assert plan.renames == [("ab/x", "ab/x"), ("ab/y", "ab/y")] and plan.unmatched_rules == ["a/=z/"]
