"""Who holds a directory's lock: :func:`ckptool.io.lock.describe_holder` and
:func:`~ckptool.io.lock.lock_holder`, kept here for the modules that import them from here
(the refusal that names the holder is :func:`ckptool.io.lock.held_refusal`)."""

from __future__ import annotations

from ckptool.io.lock import describe_holder, lock_holder

__all__ = ["describe_holder", "lock_holder"]
