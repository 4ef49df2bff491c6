"""The rules of ``rewrite-names`` (exact, scope prefix, root, regex) and the matcher that applies
them to a name, first match winning (the order: :mod:`ckptool.ops.transform.rename`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ckptool.errors import UsageError

EXACT, PREFIX, ROOT, REGEX = "exact", "prefix", "root", "regex"


@dataclass
class Rule:
    kind: str
    old: str
    new: str
    pattern: re.Pattern[str] | None = None
    used: int = 0

    def text(self) -> str:
        return f"re:{self.old}={self.new}" if self.kind == REGEX else f"{self.old}={self.new}"


def make_rule(old: str, new: str) -> Rule:
    if old.startswith("re:"):
        pat = old[3:]
        try:
            return Rule(REGEX, pat, new, re.compile(pat))
        except (re.error, OverflowError, RecursionError) as exc:
            raise UsageError(f"bad regular expression in rule {old!r}: {exc}") from None
    if old == "/":
        if new != "/" and not new.endswith("/"):
            raise UsageError(f"rule '/' -> {new!r}: the root maps to a scope ending in '/'")
        return Rule(ROOT, old, "" if new == "/" else new)
    if old.endswith("/"):
        if not new.endswith("/"):
            raise UsageError(f"rule {old!r} -> {new!r}: a scope (ending in '/') must map to a scope")
        return Rule(PREFIX, old, "" if new == "/" else new)
    if not old:
        raise UsageError("a rule needs a non-empty old name")
    return Rule(EXACT, old, new)


def parse_rule(text: str) -> Rule:
    """``OLD=NEW`` or ``re:PATTERN=REPL`` (split at the last '=' for regex rules? no: the first
    '=' not inside the pattern is ambiguous, so regex rules split at the LAST '=')."""
    if text.startswith("re:"):
        old, sep, new = text.rpartition("=")
    else:
        old, sep, new = text.partition("=")
    if not sep:
        raise UsageError(f"rule {text!r} is not of the form OLD=NEW")
    return make_rule(old, new)


def parse_map(doc: Any) -> list[Rule]:
    if not isinstance(doc, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in doc.items()):
        raise UsageError("an assignment map is a JSON object of {old: new} strings")
    return [make_rule(k, v) for k, v in doc.items()]


class Renamer:
    def __init__(self, rules: list[Rule]):
        self.rules = rules
        self.exact = {r.old: r for r in rules if r.kind == EXACT}
        self.prefixes: dict[str, Rule] = {}  # a scope ends in '/': a name's scopes are looked up, longest first
        for r in rules:
            if r.kind == PREFIX:
                self.prefixes.setdefault(r.old, r)
        self.root = [r for r in rules if r.kind == ROOT]
        self.regex = [r for r in rules if r.kind == REGEX]

    def __call__(self, name: str) -> str:
        r = self.exact.get(name)
        if r is not None:
            r.used += 1
            return r.new
        if self.prefixes:
            end = name.rfind("/")
            while end >= 0:
                r = self.prefixes.get(name[:end + 1])
                if r is not None:
                    r.used += 1
                    return r.new + name[end + 1:]
                end = name.rfind("/", 0, end)
        for r in self.root:
            r.used += 1
            return r.new + name
        for r in self.regex:
            m = r.pattern.fullmatch(name) if r.pattern is not None else None  # a regex rule has one
            if m:
                r.used += 1
                try:
                    return m.expand(r.new)
                except (re.error, IndexError) as exc:
                    raise UsageError(f"rule {r.text()!r} on {name!r}: {exc}") from None
        return name

    def unused(self) -> list[str]:
        return [r.text() for r in self.rules if not r.used]


__all__ = ["EXACT", "PREFIX", "REGEX", "ROOT", "Renamer", "Rule", "make_rule", "parse_map", "parse_rule"]
