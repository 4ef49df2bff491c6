"""Checkpoint file names, by name alone: which names are a checkpoint's files and which
are temporaries (the exact rule of docs/ARCHITECTURE.md). No I/O; :mod:`ckptool.io.layout.checkpoints`
adds what needs the disk (a V1 file is one only when it parses) and re-exports these.
"""

from __future__ import annotations

import re

from ckptool.format.bundle import DATA_RE, INDEX_SUFFIX

STATE_FILENAME = "checkpoint"  # the state file a run directory holds (tf.train.CheckpointManager's)

META_SUFFIX = ".meta"
#: V1 sharded file names and the spec Saver records for them (docs/FORMAT.md §1.1).
V1_SHARD_RE = re.compile(r"^(?P<base>.*)-(?P<shard>\d{5,}|\?{5})-of-(?P<num>\d{5,})$")
STEP_RE = re.compile(r"-(\d+)$")
#: The temporary-file rule (docs/ARCHITECTURE.md): exactly these names, nothing else.
#: A writer's ``P.index.tempstate<N>`` / ``P.data-NNNNN-of-NNNNN.tempstate<N>`` (TF's and
#: ckptool's, also ckptool's ``P.meta.tempstate<N>``); TF's ``checkpoint.tmp<hex>``; ckptool's
#: own ``<file>.tmp<hex>`` / ``<file>.tempstate<N>`` of its state, journal and policy files;
#: and a staging directory named exactly ``P_temp`` or ``P_temp_<32 hex>`` holding only the
#: ``part-NNNNN-of-NNNNN`` files of TF's sharded save (:func:`is_staging_dir`); ``P`` a checkpoint
#: prefix of that directory (:func:`prefix_of_dir`, which needs the directory's names).
TEMPSTATE_RE = re.compile(r"^(?P<head>.+)\.tempstate(?P<n>[0-9]+)$")
TMP_RE = re.compile(r"^(?P<head>.+)\.tmp(?P<hex>[0-9a-f]+)$")
STAGING_RE = re.compile(r"^(?P<base>.+)_temp(?:_[0-9a-f]{32})?$")
STAGING_PART_RE = re.compile(r"^part-[0-9]{5,}-of-[0-9]{5,}(?:\.index|\.data-[0-9]{5,}-of-[0-9]{5,})"
                             r"(?:\.tempstate[0-9]+)?$")
#: ckptool's own files and TF's state file: never a checkpoint's.
OWN_FILES = frozenset({"checkpoint", ".ckptool.lock", ".ckptool-prune-pending", ".ckptool.toml",
                       ".ckptool-clock"})
INDEX, DATA, META, V1_FILE = "index", "data", "meta", "v1"


def step_of(prefix: str) -> int | None:
    m = STEP_RE.search(prefix.rstrip("/").rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def meta_graph_filename(prefix: str) -> str:
    m = V1_SHARD_RE.match(prefix)
    return (m.group("base") if m else prefix) + META_SUFFIX


# --------------------------------------------------------------------------- names


def _temp_file(name: str) -> tuple[bool, str | None]:
    """``(is a temporary file, the checkpoint base it belongs to)`` by the exact rule."""
    m = TEMPSTATE_RE.match(name)
    if m:
        head = m.group("head")
        if head in OWN_FILES:
            return True, None
        if head.endswith(INDEX_SUFFIX) and len(head) > len(INDEX_SUFFIX):
            return True, head[: -len(INDEX_SUFFIX)]
        if head.endswith(META_SUFFIX) and len(head) > len(META_SUFFIX):
            return True, head[: -len(META_SUFFIX)]
        d = DATA_RE.match(head)
        if d and d.group("prefix"):
            return True, d.group("prefix")
        return False, None
    m = TMP_RE.match(name)
    if m and m.group("head") in OWN_FILES:
        return True, None
    return False, None


def is_temp(name: str) -> bool:
    """A temporary *file* of a writer, by its exact name (a staging directory also needs its
    content checked: :func:`staging_owner`, :func:`is_staging_dir`)."""
    return _temp_file(name)[0]


def temp_owner(name: str) -> str | None:
    """The checkpoint base whose writer made the temporary ``name`` (``P.index.tempstate1``,
    ``P.data-00000-of-00001.tempstate2``, a staging directory ``P_temp``, ``P_temp_<32 hex>``);
    None for any other name (``checkpoint.tmp<hex>`` is a temporary of no checkpoint)."""
    is_tmp, owner = _temp_file(name)
    return owner if is_tmp else staging_owner(name)


def staging_owner(name: str) -> str | None:
    """``P`` when ``name`` is exactly ``P_temp`` or ``P_temp_<32 hex>``, else None; it is a
    temporary only when it is a directory that :func:`is_staging_dir` accepts."""
    m = STAGING_RE.match(name)
    return m.group("base") if m else None


def is_staging_dir(entries: list[tuple[str, bool]]) -> bool:
    """A staging directory's content: ``(name, is a regular file)`` of each entry; at least one,
    every one a regular file named as a part of TF's sharded save (``part-00000-of-00002.index``,
    ``part-00000-of-00002.data-00000-of-00001``, their ``.tempstate<N>``)."""
    return bool(entries) and all(regular and STAGING_PART_RE.match(n) is not None for n, regular in entries)


def prefix_of_dir(prefix: str, bases: set[str]) -> bool:
    """Whether ``prefix`` is a checkpoint prefix of a directory whose checkpoint files have the
    bases ``bases``: one of them, or the next step of one of its runs (``ckpt-7`` beside
    ``ckpt-6``: the killed save of a new step leaves only its temporaries). ``other`` beside no
    checkpoint ``other`` is none, so ``other_temp/`` is an ordinary directory."""
    if prefix in bases:
        return True
    m = STEP_RE.search(prefix)
    if m is None or m.start() == 0:
        return False
    stem = prefix[: m.start()]
    return any((bm := STEP_RE.search(b)) is not None and b[: bm.start()] == stem for b in bases)


def file_role(name: str) -> tuple[str, str] | None:
    """``(base, kind)`` for a file name that by name alone is one of a checkpoint's
    (kind ``index``, ``data``, ``meta``, or ``v1`` for a V1 shard, base ``P-?????-of-N``);
    None for any other name (a V1 single-file checkpoint is known by content only)."""
    if not name or name in OWN_FILES or is_temp(name):
        return None
    if name.endswith(INDEX_SUFFIX) and len(name) > len(INDEX_SUFFIX):
        return name[: -len(INDEX_SUFFIX)], INDEX
    m = DATA_RE.match(name)
    if m and m.group("prefix"):
        return m.group("prefix"), DATA
    if name.endswith(META_SUFFIX) and len(name) > len(META_SUFFIX):
        return name[: -len(META_SUFFIX)], META
    m = V1_SHARD_RE.match(name)
    if m and m.group("base") and m.group("shard") != "?????":
        return f"{m.group('base')}-?????-of-{m.group('num')}", V1_FILE
    return None


#: What TensorFlow, TensorBoard, Keras and the tools around a run name files that are never a V1
#: table: a directory is searched for V1 checkpoints (known by content only: :func:`file_role`) by
#: reading each other file's footer, a request a file on an object store, so these are not read.
NOT_TABLES = (("events.out.tfevents.",), (".json", ".jsonl", ".pbtxt", ".pb", ".txt", ".csv", ".tsv", ".yaml",
                                           ".yml", ".log", ".toml", ".md", ".h5", ".hdf5", ".keras", ".png", ".svg"))


def may_be_v1_table(name: str) -> bool:
    """Whether a directory's search for V1 checkpoints reads the file ``name`` (:data:`NOT_TABLES`:
    an event file, a JSON or text file, a graph, a Keras file are not; a path named explicitly
    is always read)."""
    heads, tails = NOT_TABLES
    low = name.lower()
    return not low.startswith(heads) and not low.endswith(tails)


def owns(base: str, name: str) -> bool:
    """Whether ``name`` is one of checkpoint ``base``'s files by its name: its ``.index``, a data
    shard, its ``.meta``, a V1 shard of the spec ``base``. Compared whole, never as a prefix
    (``ckpt-10.index`` is not ``ckpt-1``'s). The V1 file ``base`` itself is one only when it
    parses as a V1 table (:func:`v1_files`), which a name cannot say."""
    role = file_role(name)
    if role is None:
        return False
    if role[1] == META:
        return role[0] == base or meta_graph_filename(base) == name
    return role[0] == base


def strip_file_suffix(path: str) -> str | None:
    """The prefix of a path naming one of a checkpoint's files (``.index``, a data shard,
    ``.meta``), else None."""
    if path.endswith(INDEX_SUFFIX):
        return path[: -len(INDEX_SUFFIX)]
    m = DATA_RE.match(path)
    if m:
        return m.group("prefix")
    if path.endswith(META_SUFFIX):
        return path[: -len(META_SUFFIX)]
    return None


def basename_any(path: str) -> str:
    """The last component of a recorded path, '/' or '\\' separated (a state file may come
    from another OS)."""
    return re.split(r"[\\/]", path.rstrip("/\\"))[-1]
