"""The one "not offered" rule of :mod:`ckptool.compat.tf`: every name TF has and ckptool
does not raise :class:`NotOfferedError` (an ``AttributeError``, so ``hasattr`` stays False)."""

from __future__ import annotations

from ckptool.errors import CkptError


class NotOfferedError(CkptError, AttributeError):
    """A part of TensorFlow's API that ckptool.compat.tf does not offer."""


def not_offered(module: str, name: str, offered: list[str]) -> NotOfferedError:
    """The error for ``module.name``; dunder probes get a plain message."""
    if name.startswith("__"):
        return NotOfferedError(f"module {module!r} has no attribute {name!r}")
    return NotOfferedError(
        f"{module}.{name} is not offered by ckptool.compat.tf, which stands in for TensorFlow's checkpoint "
        f"readers only (here: {', '.join(offered)}); install TensorFlow for the rest")
