"""The model's weights that no variable fills: what transformers would initialise at random.

Every rule that is not ``optional`` names a required weight. A template without a numeric group
(``bert.embeddings.position_embeddings.weight``) is required once; one with numeric groups
(``encoder.layer.{n}.attention.self.{p}.weight``) for each layer the placed names show: the
template up to its last numeric group (``encoder.layer.{n}``) is the layer's scope, and each
scope some placed name lies in needs the rest. A group written as alternatives in the pattern
(``(?P<p>query|key|value)``, ``(?P<k>[12])``) needs every alternative.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

from ckptool.ops.transform.hf.weightmap import Plan, Rule, fill

_PLACEHOLDER = re.compile(r"\{([^}]+)\}")
_GROUP_NAME = re.compile(r"(?:\d+\*)?(\w+)")
_WORDS = re.compile(r"\w+(?:\|\w+)+|\w+")
_CHARS = re.compile(r"\[(\w+)\]")


def _group_bodies(pattern: str) -> dict[str, str]:
    """Each named group's sub-pattern, as written."""
    out: dict[str, str] = {}
    for m in re.finditer(r"\(\?P<(\w+)>", pattern):
        depth, i = 1, m.end()
        while i < len(pattern) and depth:
            c = pattern[i]
            if c == "\\":
                i += 2
                continue
            depth += {"(": 1, ")": -1}.get(c, 0)
            i += 1
        out[m[1]] = pattern[m.end():i - 1]
    return out


def alternatives(rule: Rule) -> dict[str, list[str]]:
    """The groups of ``rule`` whose pattern lists its values (``a|b|c``, ``[abc]``): group -> values."""
    out: dict[str, list[str]] = {}
    for name, body in _group_bodies(rule.tf).items():
        if _WORDS.fullmatch(body) and not body.isdigit():
            out[name] = body.split("|")
        elif (m := _CHARS.fullmatch(body)) is not None:
            out[name] = list(m[1])
    return out


def _scope(rule: Rule, hf: str, alts: dict[str, list[str]]) -> tuple[re.Pattern[str] | None, str]:
    """The layer scope's pattern (None: no numeric group) and the template after it."""
    cut = None
    for m in _PLACEHOLDER.finditer(hf):
        group = _GROUP_NAME.match(m[1])
        if group is not None and group[1] not in alts:
            cut = m.end()
    if cut is None:
        return None, hf
    parts, last = [], 0
    for m in _PLACEHOLDER.finditer(hf[:cut]):
        parts.append(re.escape(hf[last:m.start()]))
        group = _GROUP_NAME.match(m[1])
        name = group[1] if group is not None else ""
        parts.append("(?:" + "|".join(map(re.escape, alts[name])) + ")" if name in alts else r"[^.]+")
        last = m.end()
    return re.compile("".join(parts) + r"(?=\.|$)"), hf[cut:]


def _expand(template: str, alts: dict[str, list[str]]) -> Iterator[str]:
    used = [g for g in alts if re.search(r"\{" + g + r"\}", template)]
    for values in itertools.product(*(alts[g] for g in used)):
        yield fill(template, dict(zip(used, values)))


def unfilled(plan: Plan) -> list[str]:
    """The required HF weights of ``plan``'s arch that no placed variable fills, in rule order."""
    have = {p.hf for p in plan.placed}
    missing: list[str] = []
    for rule in plan.arch.rules:
        if rule.hf is None or rule.optional:
            continue
        alts = alternatives(rule)
        scope, rest = _scope(rule, rule.hf, alts)
        if scope is None:
            names = list(_expand(rule.hf, alts))
        else:
            scopes = sorted({m[0] for h in have if (m := scope.match(h)) is not None})
            names = [s + tail for s in scopes for tail in _expand(rest, alts)]
        missing += [n for n in names if n not in have and n not in missing]
    return missing


__all__ = ["alternatives", "unfilled"]
