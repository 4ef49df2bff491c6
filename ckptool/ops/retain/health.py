"""Whether each checkpoint prune keeps is intact, asked once per checkpoint (memoized).

The rule of "intact" is :func:`ckptool.ops.read.integrity.damage` (the cheap check: every
file there, each data file as long as the index needs); with ``verify`` a checkpoint that
passes it is also read in full and its CRCs checked (:func:`ckptool.ops.inspect.verify.verify`,
which is why ``retain`` may import ``inspect``). A checkpoint none of whose files is in DIR
is "gone", not damaged: TF counts it and deletes nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.ops.read.integrity import damage
from ckptool.ops.retain.retention import BROKEN, GONE, INTACT

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.io.layout.listing import DirListing


class Health:
    """``health(base)`` -> ``intact``, ``damaged`` or ``gone`` for a checkpoint of the listing;
    :meth:`problem` says what is wrong with a damaged one."""

    def __init__(self, storage: Storage, directory: str, listing: DirListing, verify: bool = False,
                 read_indexes: bool = True):
        self.storage, self.directory, self.listing, self.verify = storage, directory, listing, verify
        #: False (du): a checkpoint the listing calls complete (its index there, a table's footer long at
        #: least) is intact unread; one it does not (index missing or shorter) is checked as ever
        self.read_indexes = read_indexes
        self._problems: dict[str, str | None] = {}

    def __call__(self, base: str) -> str:
        if not self.listing.files.get(base):
            return GONE
        return INTACT if self.problem(base) is None else BROKEN

    def problem(self, base: str) -> str | None:
        if base not in self._problems:
            self._problems[base] = self._check(base)
        return self._problems[base]

    def _check(self, base: str) -> str | None:
        files = self.listing.files.get(base, [])
        if not files:
            return None
        prefix = self.storage.join(self.directory, base) if self.directory else base
        v1 = tuple(self.storage.join(self.directory, f.name) if self.directory else f.name for f in files
                   if f.name == base or (base in self.listing.v1 and not f.name.endswith(".meta")))
        if base in self.listing.v1 and not v1:
            return None
        if not self.read_indexes and base in self.listing.complete:
            return None  # its index there, as long as a table's footer: what only the contents could tell is not asked
        found = damage(self.storage, prefix, v1_files=v1 if base in self.listing.v1 else (),
                       sizes={f.name: f.size for f in files})
        if found is not None or not self.verify:
            return found
        return _crc_problem(self.storage, prefix)


def _crc_problem(storage: Storage, prefix: str) -> str | None:
    """``--verify``: the first problem a full verification finds, or None."""
    from ckptool.ops.inspect.verify import verify
    from ckptool.ops.read.reader import open as open_checkpoint

    try:
        with open_checkpoint(prefix, storage) as ck:
            report = verify(ck)
    except CkptError as exc:
        return str(exc)
    if report.ok:
        return None
    p = report.problems[0]
    more = f" (and {len(report.problems) - 1} more)" if len(report.problems) > 1 else ""
    return f"{p.name + ': ' if p.name else ''}{p.error}{more}"


__all__ = ["Health"]
