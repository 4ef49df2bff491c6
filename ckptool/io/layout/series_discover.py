"""Which Keras ``ModelCheckpoint`` series a directory seems to hold, and the ``--series``
template that names it: for the message of a prune, inspect or du that finds such files and
no state file (``ckptool`` never prunes a series it was not told the name of).

Names are read as literal text and numbers; names with the same literal text form a group;
each number place becomes a field: the first whole-number place that varies ``{epoch}``
(zero-padded as the names are: ``{epoch:02d}``), a second one ``{batch}``, decimals
``{metric:.2f}`` (the metric's name is not in the file name: the user names it as in their
ModelCheckpoint filepath). A suggestion is offered only when it matches every name of its
group (:meth:`ckptool.io.layout.series_names.Template.match`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ckptool.errors import CkptError
from ckptool.io.layout.series_names import PART_SUFFIX, is_series_file, parse_template

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_MIN_GROUP = 2  # one file is no series
_INDEX = ".index"


def tf_prefixes(names: list[str] | set[str]) -> set[str]:
    """The prefixes of the TF-format checkpoints among ``names`` (``P`` of ``P.index``): a tf_keras
    ``save_weights_only`` series is named by them."""
    return {n[: -len(_INDEX)] for n in names if n.endswith(_INDEX) and len(n) > len(_INDEX)}


@dataclass
class Found:
    """A group of file names and the template that names them all."""

    template: str
    names: list[str]

    def describe(self) -> str:
        n = len(self.names)
        return f"{n} files like {self.names[-1]} (--series '{self.template}')" if n > 1 else self.names[0]


def _skeleton(name: str) -> tuple[tuple[str, ...], list[str]]:
    lits, nums, pos = [], [], 0
    for m in _NUMBER.finditer(name):
        lits.append(name[pos:m.start()])
        nums.append(m.group())
        pos = m.end()
    lits.append(name[pos:])
    return tuple(lits), nums


def _field(values: list[str], ints_seen: int) -> str:
    if all("." not in v for v in values):
        name = ("epoch", "batch")[ints_seen] if ints_seen < 2 else f"n{ints_seen}"
        width = min(len(v) for v in values)
        padded = any(len(v) > 1 and v.startswith("0") for v in values)
        return "{" + name + (f":0{width}d" if padded else "") + "}"
    decimals = {len(v.split(".", 1)[1]) if "." in v else 0 for v in values}
    return "{metric" + (f":.{decimals.pop()}f" if len(decimals) == 1 else "") + "}"


def discover(names: list[str]) -> list[Found]:
    """The series among ``names`` (a directory's file names), largest first."""
    groups: dict[tuple[str, ...], list[tuple[str, list[str]]]] = {}
    files = [n for n in names if is_series_file(n)
             and not (n.endswith(PART_SUFFIX) and re.search(r"_\d{5,}\.weights\.h5$", n))]
    for n in sorted(set(files) | tf_prefixes(names)):
        lits, nums = _skeleton(n)
        if nums:
            groups.setdefault(lits, []).append((n, nums))
    found = []
    for lits, members in groups.items():
        if len(members) < _MIN_GROUP:
            continue
        text, ints = "", 0
        for i, lit in enumerate(lits):
            text += lit.replace("{", "{{").replace("}", "}}")
            if i == len(lits) - 1:
                break
            values = [nums[i] for _, nums in members]
            if len(set(values)) == 1:
                text += values[0]
                continue
            f = _field(values, ints)
            ints += f.startswith(("{epoch", "{batch", "{n"))
            text += f
        try:
            t = parse_template(text)
        except CkptError:
            continue
        if "{" in text and all(t.match(n) is not None for n, _ in members):
            found.append(Found(text, [n for n, _ in members]))
    found.sort(key=lambda f: (-len(f.names), f.template))
    return found


def hint(names: list[str]) -> str:
    """A sentence for an error message: the series found and how to name it ('' for none)."""
    found = discover(names)
    if not found:
        return ""
    shown = "; ".join(f.describe() for f in found[:3])
    return (f"; it holds a Keras ModelCheckpoint series: {shown}; prune it with --series TEMPLATE, your "
            f"ModelCheckpoint filepath (its fields named as there, e.g. {{val_loss:.2f}}), or series = "
            f"\"TEMPLATE\" in .ckptool.toml")


__all__ = ["Found", "discover", "hint", "tf_prefixes"]
