"""A DST suffix one typing slip away from a format convert writes (``out.safetensor``,
``out.safetensros``, ``out.kears``, ``out.weight.h5``, ``out.npy`` for ``.npz``): said before
anything is written, since without ``--to`` any other name is a TF checkpoint prefix and the
slip would silently become ``out.safetensor.index``.

Only a suffix one edit from a written one (a letter added, dropped, changed, or two neighbours
swapped) counts. Names like ``model.ckpt``, ``ckpt.v2``, ``run.best`` or ``model.ckpt-100`` are
far from every written suffix and stay TF prefixes; ``--to tf`` takes a name exactly as given.
"""

from __future__ import annotations

import os

#: the suffixes convert chooses its format by (with the Keras 3 bridge's); the .h5 family last
WRITTEN = ("safetensors", "npz", "keras")
KERAS_H5 = "weights.h5"


def one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by exactly one edit: a character inserted, deleted or
    replaced, or two adjacent characters swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1:]


def suffix_typo(dst: str) -> tuple[str, str] | None:
    """``(DST's suffix, the written suffix it most likely meant)``: ``(".safetensor",
    ".safetensors")``; None when DST's suffix is one convert writes or no near miss of one."""
    name = os.path.basename(dst.rstrip("/"))
    stem, dot, ext = name.lower().rpartition(".")
    if not dot or not stem or not ext:
        return None
    given = name[len(stem):]
    before = stem.rpartition(".")[2] if "." in stem else ""
    if (ext == "h5" and one_edit(before, "weights")) or (before == "weights" and one_edit(ext, "h5")):
        return name[len(stem) - len(before) - 1:], "." + KERAS_H5  # out.weight.h5, out.weights.h6
    if ext == "npy":  # a format of its own (one array), read by convert but not written: the archive is .npz
        return given, ".npz"
    for want in WRITTEN:
        if one_edit(ext, want):
            return given, "." + want
    return None


__all__ = ["one_edit", "suffix_typo"]
