""""Did you mean": the names of a checkpoint closest to a tensor name that is not in it. The one
place that decides a suggestion (every command's NAME arguments and the API's ``read``/``variable``
raise :func:`tensor_not_found`; rules that match nothing use :func:`did_you_mean`)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ckptool.errors import TensorNotFoundError
from ckptool.format.objkeys import ATTRIBUTES, VARIABLE_VALUE

#: what object-based checkpoints append to a variable's path (``save_counter`` is stored as this)
VALUE_SUFFIX = f"/{ATTRIBUTES}/{VARIABLE_VALUE}"

#: at most this many names are suggested at once
MAX_SUGGESTIONS = 3


def plain(name: str) -> str:
    """``name`` without the object-based value suffix (``dense/kernel/.ATTRIBUTES/VARIABLE_VALUE``
    -> ``dense/kernel``); other names as they are."""
    return name[: -len(VALUE_SUFFIX)] if name.endswith(VALUE_SUFFIX) and len(name) > len(VALUE_SUFFIX) else name


def closest_names(name: str, names: Iterable[str]) -> list[str]:
    """The names of ``names`` a user who typed ``name`` most likely meant, best first (at most
    :data:`MAX_SUGGESTIONS`; none when nothing is close). In order of preference: the same
    variable in the other naming (``save_counter`` <-> ``save_counter/.ATTRIBUTES/VARIABLE_VALUE``),
    the same name in other letter case, names whose last parts are ``name`` (``kernel`` ->
    ``dense/kernel``), then names close by difflib's ratio, compared without the value suffix."""
    names = list(names)
    by_plain: dict[str, list[str]] = {}
    for n in names:
        by_plain.setdefault(plain(n), []).append(n)
    want = plain(name.strip().rstrip("/")) or name
    if want in by_plain and want != name:
        return sorted(by_plain[want], key=len)[:MAX_SUGGESTIONS]
    folded = [p for p in by_plain if p.casefold() == want.casefold()]
    if folded:
        return [n for p in sorted(folded) for n in by_plain[p]][:MAX_SUGGESTIONS]
    tail = [p for p in by_plain if p.endswith("/" + want)]
    if tail:
        return [n for p in sorted(tail, key=lambda p: (len(p), p)) for n in by_plain[p]][:MAX_SUGGESTIONS]
    close = difflib.get_close_matches(want, list(by_plain), n=1, cutoff=0.6)  # the one best: a typo
    return [n for p in close for n in by_plain[p]][:MAX_SUGGESTIONS]


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``), or ``""`` when nothing is close."""
    close = closest_names(name, names)
    if not close:
        return ""
    quoted = [repr(c) for c in close]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"; did you mean {listed}?"


def tensor_not_found(prefix: str, name: str, names: Iterable[str]) -> TensorNotFoundError:
    """The error for a tensor ``name`` that checkpoint ``prefix`` does not hold, with the names
    it most likely meant in its message and in ``.suggestions``."""
    names = list(names)
    close = closest_names(name, names)
    return TensorNotFoundError(f"{prefix}: tensor {name!r} not found in checkpoint{did_you_mean(name, close)}",
                               name=name, suggestions=close)
