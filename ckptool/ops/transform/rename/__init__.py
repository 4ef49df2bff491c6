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

The package: :mod:`~ckptool.ops.transform.rename.rules` (the rules and the matcher),
:mod:`~ckptool.ops.transform.rename.assignment` (which SRC name goes where, and the object graph brought
in line), :mod:`~ckptool.ops.transform.rename.transfer` (how the tensor bytes reach DST: linked or
copied), :mod:`~ckptool.ops.transform.rename.template` (``--template``) and
:mod:`~ckptool.ops.transform.rename.rewrite` (:func:`~ckptool.ops.transform.rename.rewrite.rewrite_names`,
which runs them).
"""
