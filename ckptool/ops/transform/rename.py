"""Rename, drop and strip variables of a checkpoint: the library side of ``ckptool rewrite-names``.

Rules (first match wins, in this order):

* exact: ``{"old/name": "new/name"}`` renames that one variable;
* scope prefix: ``{"old/": "new/"}`` renames every ``old/x`` to ``new/x`` (the
  longest matching prefix wins); ``{"old/": "/"}`` moves ``old/x`` to the root;
* root: ``{"/": "scope/"}`` renames every ``x`` to ``scope/x``
  (``init_from_checkpoint``'s rules, docs/FORMAT.md §8.2, read as old -> new);
* regex: ``re:PATTERN=REPL`` (command line) or a map key ``re:PATTERN``: a
  full match of PATTERN, REPL with ``\\1`` / ``\\g<name>`` groups; in order given.

Fast path: when SRC is a V2 bundle and nothing is dropped (a pure rename), its
data files are hard-linked (or copied whole) to DST's names and only the index
is rebuilt. Dropping variables (``drop``, ``strip_optimizer``) compacts by
default: the kept tensors' bytes are copied into new data files, so DST is
smaller. ``link`` asks for the fast path anyway (the dropped bytes then stay in
the linked files); ``compact`` asks for the copy always. A renamed object-based
checkpoint gets an object graph rebuilt from its new keys (slot references
included), written to one extra small data shard.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UsageError
from ckptool.format import bundle
from ckptool.format.objgraph import OBJECT_GRAPH_KEY, ObjectGraph, is_object_key
from ckptool.format.objkeys import key_of
from ckptool.format.slots import is_optimizer_name
from ckptool.ops.read.plan import prefetch
from ckptool.ops.transform.rename_template import copy_raw

if TYPE_CHECKING:
    from ckptool.io.base import Storage

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


@dataclass
class Plan:
    src: str
    dst: str
    renames: list[tuple[str, str]] = field(default_factory=list)  # (old, new), sorted by new
    dropped: list[str] = field(default_factory=list)
    # old keys the object graph moved, not a rule: a kept variable whose key ran through an object
    # cut out (a Keras model's weight keyed under optimizer/_trainable_variables, with strip_optimizer)
    # takes the key TF gives it without that object
    rekeyed: list[str] = field(default_factory=list)
    unmatched_rules: list[str] = field(default_factory=list)
    object_graph: str = "none"  # none | kept | rebuilt | template
    fast_path: bool = False
    linked: bool = False  # the fast path's data files are hard links of SRC's (not copies)
    template: dict[str, Any] | None = None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc = {"src": self.src, "dst": self.dst, "fast_path": self.fast_path,
               "object_graph": self.object_graph,
               "tensors": [{"old": o, "new": n} for o, n in self.renames],
               "renamed": sum(1 for o, n in self.renames if o != n),
               "dropped": self.dropped, "unmatched_rules": self.unmatched_rules}
        if self.rekeyed:
            doc["rekeyed"] = self.rekeyed
        if self.template is not None:
            doc["template"] = self.template
        if self.files:
            doc["files"] = self.files
        return doc


def plan_names(names: list[str], rules: list[Rule], drop: Any = (), strip_optimizer: bool = False, strict: bool = False,
               src: str = "", dst: str = "", allow_unused: bool = True) -> Plan:
    """Which SRC names go where; raises on collisions, and on rules (or ``drop`` globs) that
    match nothing unless ``allow_unused`` (``strict`` raises on them always)."""
    renamer = Renamer(rules)
    drops = [re.compile(fnmatch.translate(g)) for g in drop]
    used_drops = [0] * len(drops)
    plan = Plan(src, dst)
    targets: dict[str, str] = {}
    collisions = []
    for name in sorted(names):
        if name == OBJECT_GRAPH_KEY:
            continue
        hit = [i for i, p in enumerate(drops) if p.match(name)]
        for i in hit:
            used_drops[i] += 1
        if hit or (strip_optimizer and is_optimizer_name(name)):
            plan.dropped.append(name)
            continue
        new = renamer(name)
        if not new or new == OBJECT_GRAPH_KEY or new.startswith("\0"):
            raise CkptError(f"{name!r} would be renamed to the reserved name {new!r}")
        if new in targets:
            collisions.append(f"{targets[new]!r} and {name!r} -> {new!r}")
        targets[new] = name
    if collisions:
        raise CkptError("two sources land on one name: " + "; ".join(collisions) + " (nothing written)")
    plan.renames = sorted(((o, n) for n, o in targets.items()), key=lambda p: p[1])
    plan.unmatched_rules = renamer.unused() + [f"--drop {g}" for g, n in zip(drop, used_drops) if not n]
    if (strict or not allow_unused) and plan.unmatched_rules:
        raise CkptError("these rules match no source name: " + _unmatched(renamer, plan.unmatched_rules, names)
                        + " (nothing written; --allow-unused accepts them)")
    return plan


def _unmatched(renamer: Renamer, unmatched: list[str], names: list[str]) -> str:
    """The first few rules that match nothing, an exact name with the source names it may
    have meant, and how many more (suggestions from one index of the names, for those shown)."""
    from ckptool.ops.read.suggest import MAX_SHOWN, Suggester, did_you_mean, listed, shorten

    exact = {r.text(): r.old for r in renamer.rules if not r.used and r.kind == EXACT}
    index = Suggester(names)
    shown = []
    for u in unmatched[:MAX_SHOWN]:
        hint = did_you_mean(exact[u], index).lstrip("; ") if u in exact else ""
        shown.append(f"{shorten(u)} ({hint})" if hint else shorten(u))
    return listed(shown, len(unmatched))


def _graph_for(src_graph: ObjectGraph | None, plan: Plan, strip_optimizer: bool) -> ObjectGraph | None:
    """DST's object graph, and ``plan`` brought in line with it.

    An object-based SRC has its graph edited (objects moved, other paths and
    slot references kept, optimizers cut out with ``strip_optimizer``): what
    left the graph is dropped and re-keyed variables take their new key. A
    name-based SRC gets a graph synthesized when new names are object keys.
    """
    if src_graph is None:
        if not any(is_object_key(n) for _, n in plan.renames):
            return None
        plan.object_graph = "rebuilt"
        return ObjectGraph.from_keys([n for _, n in plan.renames])
    graph, keys = src_graph.edited({o: n for o, n in plan.renames if o != n}, set(plan.dropped),
                                   strip_optimizer=strip_optimizer)
    targets: dict[str, str]
    renames, targets = [], {}
    for old, new in plan.renames:
        final = keys.get(new, new)
        if final is None:
            plan.dropped.append(old)
            continue
        if final in targets:
            raise CkptError(f"{targets[final]!r} and {old!r} both land on {final!r} (nothing written)")
        targets[final] = old
        if final != new:
            plan.rekeyed.append(old)
        renames.append((old, final))
    plan.dropped.sort()
    plan.renames = sorted(renames, key=lambda p: p[1])
    changed = any(o != n for o, n in plan.renames) or plan.dropped
    plan.object_graph = "rebuilt" if changed else "kept"
    return graph


def _check_dst(src_ck: Any, dst: str, storage: Storage, force: bool) -> None:
    from ckptool.io.safety.destination import check_destination, checkpoint_identity

    check_destination(storage, [bundle.index_filename(dst)], force=force,
                      sources=checkpoint_identity(src_ck), label=dst)


def rewrite_names(src: str, dst: str, rules: list[Rule], *, drop: Sequence[str] = (), strip_optimizer: bool = False,
                  strict: bool = False, template: str | None = None, dry_run: bool = False, force: bool = False,
                  compact: bool = False, link: bool = False, allow_unused: bool = False, allow_missing: bool = False,
                  sync: bool = True, progress: Callable[[int, int], None] | None = None,
                  jobs: int | None = None) -> Plan:
    """Write SRC's tensors at DST under new names (see the module doc).

    Every file is fsynced before the renames unless ``sync=False`` (TF's behaviour,
    for scratch outputs).

    A rule or ``drop`` glob that matches no SRC name is an error unless
    ``allow_unused``; with ``template``, a template variable that SRC does not
    fill is an error unless ``allow_missing`` (which keeps the template's value).
    Nothing is written when an error is raised.

    ``compact`` / ``link`` choose how tensor bytes reach DST (see the module doc); a
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
    from ckptool.ops.write.writer import BundleWriter

    storage, dprefix = storage_for(dst)
    with open_checkpoint(src) as ck:
        # object-based: the graph says what is optimizer state (a Keras model's weights are
        # also keyed under optimizer/_trainable_variables), so names decide only for TF1
        plan = plan_names(ck.names(), rules, drop, strip_optimizer and not ck.is_object_based, strict,
                          src=src, dst=dst, allow_unused=allow_unused)
        _check_dst(ck, dprefix, storage, force)
        if template is not None:
            from ckptool.ops.transform.rename_template import with_template

            return with_template(ck, plan, template, dprefix, storage, strict, dry_run, force, allow_missing,
                                 sync)
        graph = _graph_for(ck.object_graph() if ck.is_object_based else None, plan, strip_optimizer)
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
        graph_bytes = graph.serialize() if plan.object_graph == "rebuilt" and graph is not None else None
        if plan.fast_path:
            plan.files, plan.linked = _fast(ck, plan, dprefix, storage, graph_bytes, force, sync, progress)
            return plan
        with BundleWriter(dprefix, storage=storage, force=force, sync=sync,
                          endianness=ck.header.endianness if isinstance(ck, BundleCheckpoint)
                          else bundle.HOST_ENDIANNESS) as w:
            total = sum(ck.variable(old).nbytes for old, _ in plan.renames) if progress else 0
            done = 0
            with prefetch(ck, [old for old, _ in plan.renames], jobs):  # fetched ahead from an object store
                for old, new in plan.renames:
                    if isinstance(ck, BundleCheckpoint):
                        e = ck.entry(key_of(old))
                        copy_raw(ck, e, new, w)
                    else:
                        w.add(new, ck.read(old))
                    if progress:
                        done += ck.variable(old).nbytes
                        progress(done, total)
            if graph_bytes is not None:
                w.add(OBJECT_GRAPH_KEY, graph_bytes)
            elif plan.object_graph == "kept":
                if isinstance(ck, BundleCheckpoint):  # the graph's stored bytes, copied as they are
                    e = ck.entry(key_of(OBJECT_GRAPH_KEY))
                    w.add_raw(OBJECT_GRAPH_KEY, e, ck.read_raw(e))
                else:  # a V1 file holding a graph tensor: its value, re-encoded
                    w.add(OBJECT_GRAPH_KEY, ck.read(OBJECT_GRAPH_KEY))
            res = w.finish()
        plan.files = res.files
        return plan


def _fast(ck: Any, plan: Plan, dprefix: str, storage: Storage, graph_bytes: Any, force: Any, sync: bool,
          progress: Callable[[int, int], None] | None = None) -> tuple[list[str], bool]:
    """Link (or copy whole) SRC's data files, write the index; (files, whether all were linked)."""
    n_src = ck.header.num_shards
    n_dst = n_src + (1 if graph_bytes is not None else 0)
    entries = []
    for old, new in plan.renames:
        ok = key_of(old)
        nk = key_of(new)
        e = ck.entry(ok)
        entries.append((nk, ck.raw_entry(ok)))
        for sl in e.slices:
            sk = bundle.encode_tensor_name_slice(ok, sl)
            entries.append((bundle.encode_tensor_name_slice(nk, sl), ck.raw_entry(sk)))
    if plan.object_graph == "kept":
        k = key_of(OBJECT_GRAPH_KEY)
        entries.append((k, ck.raw_entry(k)))
    from ckptool.io.safety.atomic import AtomicFile, link_or_copy, make_output_dir, publish
    from ckptool.ops.write.writer import index_file, retire_index

    make_output_dir(storage, storage.dirname(dprefix))
    made = []  # every file written in full under a temporary name; published at the end
    try:
        sizes = [storage.size(ck.shard_path(i)) for i in range(n_src)] if progress else []
        for i in range(n_src):
            made.append(link_or_copy(storage, ck.shard_path(i), bundle.data_filename(dprefix, i, n_dst), sync=sync))
            if progress:
                progress(sum(sizes[:i + 1]), sum(sizes))
        if graph_bytes is not None:
            from ckptool.format.coding import mask_crc
            from ckptool.ops.write.writer import encode_tensor

            dt, shape, data, crc = encode_tensor(key_of(OBJECT_GRAPH_KEY), graph_bytes)
            blob = bytes(data)
            f = AtomicFile(storage, bundle.data_filename(dprefix, n_src, n_dst), sync=sync)
            made.append(f)
            f.write(blob)
            entries.append((key_of(OBJECT_GRAPH_KEY),
                            bundle.encode_entry(dt, shape, n_src, 0, len(blob), mask_crc(crc))))
        linked = all(f.file is None for f in made[:n_src])  # a link has nothing to write
        made.append(index_file(storage, dprefix, n_dst, entries, ck.header.endianness, sync))
        finals = [f.target for f in made[:-1]]
        publish(made, check=(lambda: retire_index(storage, dprefix, finals, sync)) if force else None)
    except BaseException:
        for f in made:
            f.discard()
        raise
    return [f.target for f in made], linked


