"""``rewrite_names``: SRC's tensors written at DST under new names, through a plan
(:mod:`~ckptool.ops.transform.rename.assignment`), a template
(:mod:`~ckptool.ops.transform.rename.template`) or the tensor bytes linked or copied
(:mod:`~ckptool.ops.transform.rename.transfer`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ckptool.errors import UsageError
from ckptool.format import bundle
from ckptool.format.objkeys import OBJECT_GRAPH_KEY
from ckptool.ops.transform.rename.assignment import Plan, graph_for, plan_names
from ckptool.ops.transform.rename.transfer import copy_tensors, link_files

if TYPE_CHECKING:
    from ckptool.io.base import Storage
    from ckptool.ops.transform.rename.rules import Rule


def _check_dst(src_ck: Any, dst: str, storage: Storage, force: bool) -> None:
    from ckptool.io.safety.destination import check_destination, checkpoint_identity

    check_destination(storage, [bundle.index_filename(dst)], force=force,
                      sources=checkpoint_identity(src_ck), label=dst)


def rewrite_names(src: str, dst: str, rules: list[Rule], *, drop: Sequence[str] = (), strip_optimizer: bool = False,
                  strict: bool = False, template: str | None = None, dry_run: bool = False, force: bool = False,
                  compact: bool = False, link: bool = False, allow_unused: bool = False, allow_missing: bool = False,
                  sync: bool = True, progress: Callable[[int, int], None] | None = None,
                  jobs: int | None = None) -> Plan:
    """Write SRC's tensors at DST under new names (see :mod:`ckptool.ops.transform.rename`).

    Every file is fsynced before the renames unless ``sync=False`` (TF's behaviour,
    for scratch outputs).

    A rule or ``drop`` glob that matches no SRC name is an error unless
    ``allow_unused``; with ``template``, a template variable that SRC does not
    fill is an error unless ``allow_missing`` (which keeps the template's value).
    Nothing is written when an error is raised.

    ``compact`` / ``link`` choose how tensor bytes reach DST (see the package doc); a
    ``link`` that cannot apply (a V1 SRC, a ``template``) is a UsageError.
    ``progress(done_bytes, total_bytes)`` as tensors (or whole data files) are copied. ``jobs``:
    ranged GETs in flight when tensors are read from an object store (default 8)."""
    if compact and link:
        raise UsageError("--compact and --link exclude each other")
    if link and template is not None:
        raise UsageError("--link does not apply with --template (DST's tensors are written anew)")
    from ckptool.io.backends.urls import storage_for
    from ckptool.ops.read.reader import BundleCheckpoint
    from ckptool.ops.read.reader import open as open_checkpoint

    storage, dprefix = storage_for(dst)
    with open_checkpoint(src) as ck:
        # object-based: the graph says what is optimizer state (a Keras model's weights are
        # also keyed under optimizer/_trainable_variables), so names decide only for TF1
        plan = plan_names(ck.names(), rules, drop, strip_optimizer and not ck.is_object_based, strict,
                          src=src, dst=dst, allow_unused=allow_unused)
        _check_dst(ck, dprefix, storage, force)
        if template is not None:
            from ckptool.ops.transform.rename.template import with_template

            return with_template(ck, plan, template, dprefix, storage, strict, dry_run, force, allow_missing,
                                 sync)
        graph = graph_for(ck.object_graph_bytes(), plan, strip_optimizer, f"{ck.prefix}: {OBJECT_GRAPH_KEY}")
        if plan.dropped and not plan.renames:  # dropped everything: a mistake, as a filter selecting nothing
            from ckptool.ops.read.select import filter_words, nothing_selected

            words = filter_words(drop=tuple(drop), strip_optimizer=strip_optimizer)
            raise nothing_selected(src, len(plan.dropped), words, "variable", verb="leaves", writes=True)
        bundle_src = isinstance(ck, BundleCheckpoint)
        if link and not bundle_src:
            raise UsageError(f"--link: {src} is not a V2 bundle (no data files to link); "
                             "its tensors are always rewritten")
        plan.fast_path = bundle_src and not compact and (link or not plan.dropped)
        if dry_run:
            return plan
        rebuilt = [graph] if plan.object_graph == "rebuilt" and graph is not None else []
        del graph  # held by ``rebuilt`` alone, let go once written
        if plan.fast_path:
            plan.files, plan.linked = link_files(ck, plan, dprefix, storage, rebuilt, force, sync, progress)
        else:
            plan.files = copy_tensors(ck, plan, dprefix, storage, rebuilt, force, sync, progress, jobs)
        return plan


__all__ = ["rewrite_names"]
