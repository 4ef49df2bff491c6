"""A directory's Keras ``ModelCheckpoint`` series, read: its members listed and checked
(:mod:`ckptool.io.layout.series_listing`; a TF-format member by its index, here), and which series a
directory holds when none is named (``inspect DIR``, ``du``, ``verify DIR``): the ``series``
of DIR's own ``.ckptool.toml``, else the one series its file names show
(:mod:`ckptool.io.layout.series_discover`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptool.errors import CkptError
from ckptool.format.keras_files import COMPLETE, DAMAGED
from ckptool.io.layout.series_listing import Member, SeriesListing, scan_series
from ckptool.io.layout.series_names import TF_PREFIX, Template, parse_template

if TYPE_CHECKING:
    from ckptool.io.base import Dir, Storage


def check_tf_member(storage: Storage, d: Dir, m: Member) -> None:
    """A TF-format member whose index parses: every data file its header counts is there and
    as long as its entries say (the CRCs are ``verify``'s); else it is damaged."""
    from ckptool.ops.read.reader import open as open_checkpoint
    from ckptool.ops.read.v2 import BundleCheckpoint

    sizes = {f.name: f.size for f in m.files}
    try:
        with open_checkpoint(d.join(m.name), storage) as ck:
            if not isinstance(ck, BundleCheckpoint):
                return
            missing, _ = ck.missing_shards()
            if missing:
                m.state, m.problem = DAMAGED, f"{m.name}: {missing} of {ck.header.num_shards} data files missing"
                return
            ends: dict[int, int] = {}
            for e in ck.plain_entries():
                ends[e.shard_id] = max(ends.get(e.shard_id, 0), e.offset + e.size)
            for sid, end in sorted(ends.items()):
                name = storage.basename(ck.shard_path(sid))
                if sizes.get(name, 0) < end:
                    m.state, m.problem = DAMAGED, f"{name}: {sizes.get(name, 0)} bytes, its index needs {end}"
                    return
    except CkptError as exc:
        m.state, m.problem = DAMAGED, f"{m.name}: {exc}"


def list_series(storage: Storage, d: Dir, template: Template) -> SeriesListing:
    """The series in the open directory ``d``, every member checked (TF ones by their index)."""
    listing = scan_series(d, template)
    if template.kind == TF_PREFIX:
        for m in listing.members:
            if m.state == COMPLETE:
                check_tf_member(storage, d, m)
    return listing


def template_for(storage: Storage, directory: str, names: list[str]) -> Template | None:
    """The series DIR holds: its own ``.ckptool.toml``'s ``series``, else the only series its
    file names show (None: none, or several)."""
    from ckptool.io.control.policy import read_policy
    from ckptool.io.layout.series_discover import discover

    try:
        pol = read_policy(directory, storage)
    except CkptError:
        pol = None
    if pol and pol.get("series"):
        return parse_template(pol["series"])
    found = discover(names)
    return parse_template(found[0].template) if len(found) == 1 else None


def find_series(storage: Storage, directory: str) -> SeriesListing | None:
    """DIR's series listed (None when it holds none, or TF checkpoints: a run of its own)."""
    from ckptool.io.control.state import STATE_FILENAME
    from ckptool.io.layout.checkpoints import INDEX, file_role
    from ckptool.io.safety.dirfd import open_dir

    with open_dir(storage, directory) as d:
        names = d.names()
        if STATE_FILENAME in names or any((r := file_role(n)) is not None and r[1] == INDEX for n in names):
            return None
        template = template_for(storage, directory, names)
        return list_series(storage, d, template) if template is not None else None


__all__ = ["check_tf_member", "find_series", "list_series", "template_for"]
