"""Operation fuzzing: every command of ckptool on a directory tree of mutants.

A *case* is a small tree built from one case number: ``run/`` holds one to
four checkpoints made from a TF-written seed (fuzz/corpus/tf, tests/data,
the bundled example), renamed ``ckpt-N``, one of them mutated by
:func:`fuzz.engine.mutate_case`; beside them a ``checkpoint`` state file and
a ``.ckptool.toml`` policy file, valid, hostile or byte-mutated; sometimes
files that are not ours (``notes.index`` holding text, ``ckpt-1.notes.txt``),
a FIFO or a directory where a checkpoint file should be, a symlink out of the
tree, a sparse 2 GiB ``.index``. ``outside/`` holds a checkpoint and a file
that no command may touch; ``other/`` a second checkpoint for ``diff``.

The case then runs one command in-process through ``ckptool.cli.main.main``:
list-variables, inspect (summary, --tensor/--all-tensors, --stats, --verify,
--tree), diff, convert to tf/npz/safetensors, rewrite-names, prune (plain,
--scan, --recursive, --keep, --dry-run), state (show, --rebuild, --relative),
du, save, ``prune --keep-best 1 --metric TAG --dry-run`` over mutated
TF-written event files (fuzz/events.py), average, rm and ``prune --clean-temp``
beside lookalike and genuine temporaries (fuzz/retain_ops.py, with its
deletion oracle); or the library (open, variables, read, verify) directly.

The oracle (:func:`execute`): the command ends with exit 0/1/2 or a
:class:`ckptool.errors.CkptError` (``--debug`` cases re-raise it); any other
exception, a traceback on stderr, a run past the deadline (SIGALRM), a
MemoryError under the address-space cap, a change below ``outside/``, a
change to the source tree by a command that only reads it, a file we planted
that disappeared, a forged ``ckptool: error:`` line, or a temporary file
(``*.tempstate*``, ``*.tmp*``, ``*_temp*``, ``*.part``) left behind is a
:class:`Failure`, keyed by its class (what went wrong, and the innermost
frame in ckptool) so that one bug is one class.

Cases are pure functions of (seed, number): ``python -m fuzz.run --case N``
rebuilds and replays case N.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pathlib
import random
import re
import shutil
import stat
import sys
import traceback
import warnings
from dataclasses import dataclass, field

from ckptool.errors import CkptError
from fuzz import engine, retain_ops
from fuzz import events as fuzz_events

ROOT = engine.ROOT
OPS = ("list", "inspect", "read", "verify", "stats", "tree", "diff", "convert-tf", "convert-npz",
       "convert-safetensors", "rewrite", "prune", "prune-recursive", "state", "du", "save", "api", "prune-best",
       *retain_ops.NEW_OPS)
READ_ONLY = {"list", "inspect", "read", "verify", "stats", "tree", "diff", "convert-tf", "convert-npz",
             "convert-safetensors", "rewrite", "du", "save", "api", "average"}
#: The options that make an op what it is: the minimizer (fuzz/pool.py) never drops them,
#: so a kept ``prune-recursive`` case still runs ``prune --recursive``.
OP_FLAGS = {"read": ("--all-tensors", "--tensor"), "verify": ("--verify",), "stats": ("--stats",),
            "tree": ("--tree",), "convert-tf": ("--to",), "convert-npz": ("--to",),
            "convert-safetensors": ("--to",), "prune-recursive": ("--recursive",), "save": ("--from",),
            "prune-best": ("--keep-best", "--metric"), **retain_ops.OP_FLAGS}
TEMP_MARKERS = (".tempstate", ".tmp", "_temp", ".part")
#: A temporary a writer leaves (by the end of its name, so that a checkpoint named
#: ``sweep.tmp1-3`` or ``model_temp-5`` is none): TF's and ckptool's ``.tempstate<N>``,
#: ``.tmp<hex>`` of a state-file write, ``P_temp[_<32 hex>]/`` staging, ``.part`` on S3.
TEMP_NAME = re.compile(r"(\.tempstate[0-9]+|\.tmp[0-9a-f]+|\.part)$|_temp(_[0-9a-f]{32})?(/|$)")
SPARSE_SIZE = 2 << 30


class Failure(Exception):
    """A case broke the oracle. ``key`` names the class of the bug (stable across cases)."""

    def __init__(self, key: str, detail: str):
        super().__init__(f"{key}: {detail}")
        self.key = key
        self.detail = detail


@dataclass
class Case:
    number: int
    op: str
    argv: list[str]  # "{D}" stands for the case directory
    files: dict[str, object]  # relative path -> bytes | {"symlink": t} | {"fifo": 1} | {"dir": 1} | {"sparse": n}
    desc: str = ""
    planted: list[str] = field(default_factory=list)  # files no command may delete or change
    # "protect": prefixes in run/ a reading command must leave alone (its source), "dst": the
    # prefix in run/ it may write (its destination)
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        def enc(v):
            if isinstance(v, bytes):
                return {"b64": base64.b64encode(v).decode("ascii")}
            return v
        return {"number": self.number, "op": self.op, "argv": self.argv, "desc": self.desc,
                "planted": self.planted, "meta": self.meta, "files": {k: enc(v) for k, v in sorted(self.files.items())}}

    @classmethod
    def from_json(cls, doc: dict) -> Case:
        files = {k: base64.b64decode(v["b64"]) if "b64" in v else v for k, v in doc["files"].items()}
        return cls(doc["number"], doc["op"], list(doc["argv"]), files, doc.get("desc", ""),
                   list(doc.get("planted", [])), dict(doc.get("meta", {})))


# --------------------------------------------------------------------------- seeds

_SEEDS: list[engine.Seed] | None = None


def disk_seeds() -> list[engine.Seed]:
    """The seed checkpoints on disk (TF-written): stable, so a case number means one case."""
    global _SEEDS
    if _SEEDS is None:
        seeds = []
        tfd = engine.CORPUS / "tf"
        if tfd.is_dir():
            seeds.append(engine._load_dir(tfd, "mixed", "tf/mixed"))
            seeds.append(engine._load_dir(tfd, "sharded", "tf/sharded"))
            seeds.append(engine._load_dir(tfd, "v1.ckpt", "tf/v1", v1=True))
        ex = ROOT / "examples" / "keras_adam"
        if (ex / "ckpt-3.index").is_file():
            seeds.append(engine._load_dir(ex, "ckpt-3", "example/keras_adam"))
        data = ROOT / "tests" / "data"
        for index in sorted(data.rglob("*.index")) if data.is_dir() else ():
            if "fuzz_regressions" in index.parts:
                continue
            prefix = index.name[: -len(".index")]
            s = engine._load_dir(index.parent, prefix, f"data/{index.parent.relative_to(data)}/{prefix}")
            if s.files and sum(len(b) for b in s.files.values()) <= 64 << 10:
                seeds.append(s)
        _SEEDS = seeds
    return _SEEDS


def _renamed(files: dict[str, bytes], old: str, new: str) -> dict[str, bytes]:
    return {new + n[len(old):]: b for n, b in files.items() if n.startswith(old)}


# --------------------------------------------------------------------------- hostile side files

HOSTILE_PATHS = ["../outside/ckpt-1", "../outside/precious", "/nonexistent/old/run/ckpt-2", "link/ckpt-1",
                 "..", "/", "", ".", "a" * 5000, "ckpt\n-1", "\nckptool: error: forged", "ckpt-1\x00x",
                 "ckpt-1/../../outside/ckpt-1", "s3://bucket/x", "~/x", "\x1b[31mred", "ckpt-99",
                 "notes", "ckpt-1.index", "ckpt-2.data-00000-of-00001"]
TIMES = ["0", "-1", "1e300", "nan", "inf", "-inf", "-1e18", "1.7e9", "1e18", "17e8"]


def _q(s: str) -> str:
    out = []
    for ch in s.encode("utf-8", "surrogateescape"):
        c = chr(ch)
        if c in '"\\':
            out.append("\\" + c)
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append(f"\\{ch:03o}")
    return '"' + "".join(out) + '"'


def state_text(rng: random.Random, names: list[str]) -> tuple[bytes, str]:
    pool = names * 3 + HOSTILE_PATHS
    kind = rng.choice(("valid", "valid", "hostile", "hostile", "bytes", "junk"))
    if kind == "valid" or kind == "bytes":
        paths = list(names)
        latest = names[-1] if names else "ckpt-1"
    else:
        paths = [rng.choice(pool) for _ in range(rng.randint(0, 5))]
        latest = rng.choice(pool)
    lines = [f"model_checkpoint_path: {_q(latest)}"] if rng.random() < 0.95 else []
    lines += [f"all_model_checkpoint_paths: {_q(p)}" for p in paths]
    if rng.random() < 0.6:
        lines += [f"all_model_checkpoint_timestamps: {rng.choice(TIMES) if kind != 'valid' else 1.7e9 + i}"
                  for i in range(len(paths) if rng.random() < 0.8 else rng.randint(0, 6))]
    if rng.random() < 0.5:
        lines.append(f"last_preserved_timestamp: {rng.choice(TIMES) if kind != 'valid' else '1.6e9'}")
    text = ("\n".join(lines) + "\n").encode()
    if kind == "bytes":
        text, d = engine.mutate_bytes(rng, text)
        return text, f"state bytes: {d}"
    if kind == "junk":
        junk = rng.choice((b'model_checkpoint_path: "a" model_checkpoint_path: "b"', b"all_model_checkpoint_paths: 3",
                           b'unknown_field: "x"', b"{" * 300, b"\xff\xfe\x00", b"model_checkpoint_path: '",
                           b"\xef\xbb\xbfmodel_checkpoint_path: \"ckpt-1\"", b""))
        return junk, f"state junk {junk[:40]!r}"
    return text, f"state {kind} {text[:200]!r}"


def policy_text(rng: random.Random, names: list[str]) -> tuple[bytes, str]:
    vals = {
        "max_to_keep": ["0", "1", "2", "-1", "2000000000000000000000", '"3"', "1.5", "true", "[]"],
        "keep_every_n_hours": ["0", "1e-300", "1e300", "nan", "inf", "-1", '"x"', "1"],
        "keep_steps_every": ["0", "1", "2", "-5", "9223372036854775808", '"2"'],
        "min_age": ['"1h"', '"0s"', '"-1h"', '"999999999999d"', '"x"', "3", '""'],
        "keep": ["[]", '["ckpt-1"]', '["../outside/ckpt-1"]', '["/etc/passwd"]', '["ckpt-99"]', '"ckpt-1"',
                 "[1, 2]", '["run/ckpt-2"]', '["ckpt-2.index"]', '[[]]'],
        "unknown": ['"x"'],
    }
    kind = rng.choice(("valid", "hostile", "hostile", "bytes", "junk"))
    lines = []
    for k, vs in vals.items():
        if rng.random() < 0.45:
            v = vs[min(rng.randrange(3), len(vs) - 1)] if kind == "valid" else rng.choice(vs)
            lines.append(f"{k} = {v}")
    if rng.random() < 0.1:
        lines.insert(0, "[policy]")
    text = ("\n".join(lines) + "\n").encode()
    if kind == "bytes":
        text, d = engine.mutate_bytes(rng, text)
        return text, f"toml bytes: {d}"
    if kind == "junk":
        junk = rng.choice((b"max_to_keep = ", b"[[[", b"\xff\xfe", b"a = 1\na = 2", b"x = {" * 200,
                           b"max_to_keep = 1\n" * 3, b"keep = [" + b"[" * 1000))
        return junk, f"toml junk {junk[:30]!r}"
    return text, f"toml {text[:160]!r}"


def npz_bytes(rng: random.Random) -> tuple[bytes, str]:
    import numpy as np

    buf = io.BytesIO()
    arrays = {"w": np.arange(4, dtype=np.float32), "b": np.zeros((2, 2), np.int64)}
    if rng.random() < 0.3:
        arrays[rng.choice(("w\0evil", "__metadata__", "a/../b", "x.npy", ""))] = np.ones(2, np.float16)
    if rng.random() < 0.2:
        arrays["o"] = np.array([b"x", None], dtype=object)
    try:
        np.savez(buf, **arrays)
    except Exception:  # noqa: BLE001 - a name numpy cannot store: plain arrays then
        buf = io.BytesIO()
        np.savez(buf, w=np.arange(3))
    data = buf.getvalue()
    if rng.random() < 0.5:
        data, d = engine.mutate_bytes(rng, data)
        return data, f"npz mutated: {d}"
    return data, f"npz {sorted(arrays)!r}"


def safetensors_bytes(rng: random.Random) -> tuple[bytes, str]:
    header = {"w": {"dtype": rng.choice(("F32", "BF16", "I64", "F8_E5M2", "BOOL", "X")),
                    "shape": rng.choice(([2], [1, 2], [], [2**40], [-1])),
                    "data_offsets": rng.choice(([0, 8], [0, 2**62], [8, 0], [0, 4]))}}
    if rng.random() < 0.3:
        header["__metadata__"] = rng.choice(({"a": "b"}, {"a": 1}, "x"))
    h = json.dumps(header).encode()
    hlen = len(h) if rng.random() < 0.8 else rng.choice((0, 2**63, len(h) + 5, 7))
    data = hlen.to_bytes(8, "little") + h + b"\0" * 8
    if rng.random() < 0.3:
        data, d = engine.mutate_bytes(rng, data)
        return data, f"safetensors mutated: {d}"
    return data, f"safetensors {h[:120]!r}"


# --------------------------------------------------------------------------- cases

def _ck_arg(rng: random.Random, names: list[str], v1: bool, has_state: bool) -> str:
    """One of the forms a CHECKPOINT argument takes, for a checkpoint of run/."""
    p = rng.choice(names)
    forms = ["run/" + p, "run/" + p, "run"]
    if not v1:
        forms += ["run/" + p + ".index", "run/" + p + ".data-00000-of-00001"]
    if rng.random() < 0.05:
        forms += ["link/ckpt-1", "run/link/ckpt-1", "outside", "run/notes", "run/nothing", "run/ckpt-1.meta"]
    return "{D}/" + rng.choice(forms)


def make_case(number: int, seed: int = 0) -> Case:
    rng = random.Random(seed * 1_000_003 + number)
    seeds = disk_seeds()
    op = OPS[number % len(OPS)]
    s = seeds[rng.randrange(len(seeds))]
    files: dict[str, object] = {}
    desc = [f"op {op}", f"seed {s.name}"]
    n_ck = rng.choice((1, 2, 3, 4)) if op.startswith(("prune", "state", "du", "rm", "average")) else \
        rng.choice((1, 1, 2))
    if op == "prune-best":  # steps the event files hold values at, and some they do not
        steps = sorted(rng.sample(fuzz_events.EVENT_STEPS + (1, 150, 2000), n_ck))
    else:
        steps = sorted(rng.sample(range(1, 40), n_ck))
    base = "ckpt"
    if op in retain_ops.NEW_OPS:  # checkpoint names that look like temporaries or globs are checkpoints
        base = rng.choice(("ckpt", "ckpt", "model_temp", "ckpt[a]", "sweep.tmp1"))
    names = [f"{base}-{st}" for st in steps]
    victim = rng.randrange(n_ck) if rng.random() < 0.85 else None
    for i, name in enumerate(names):
        if i == victim:
            mfiles, d = engine.mutate_case(rng, s)
            desc.append(f"{name} <- {d}")
        else:
            mfiles = dict(s.files)
        for k, v in _renamed(mfiles, s.prefix, name).items():
            files["run/" + k] = v
    has_state = rng.random() < 0.75
    valid_state = False
    if has_state:
        files["run/checkpoint"], d = state_text(rng, names)
        valid_state = d.startswith("state valid")
        desc.append(d)
    if rng.random() < 0.35:
        where = rng.choice(("run/.ckptool.toml", "run/.ckptool.toml", ".ckptool.toml"))
        files[where], d = policy_text(rng, names)
        desc.append(f"{where}: {d}")
    # The sentinel outside the tree, and a second checkpoint for diff.
    o = seeds[0]
    for k, v in _renamed(o.files, o.prefix, "ckpt-1").items():
        files["outside/" + k] = v
    files["outside/precious"] = b"precious"
    planted = []
    r = rng.random()
    if r < 0.25:
        side = rng.choice(("run/notes.index", "run/ckpt-1.notes.txt", f"run/{names[0]}.json",
                           f"run/{names[0]}.index.bak", "run/notes.txt", "run/notes.md"))
        files[side] = rng.choice((b"just notes\n", b"", b"\0" * 60))
        if side == "run/notes.index":
            files["run/notes.txt"] = b"mine\n"
            planted.append("run/notes.txt")
        planted.append(side)
        desc.append(f"planted {side}")
    elif r < 0.32:
        target = rng.choice(sorted(k for k in files if k.startswith("run/ckpt") or
                                   any(k == f"run/{n}" or k.startswith((f"run/{n}.", f"run/{n}-")) for n in names)))
        files[target] = rng.choice(({"fifo": 1}, {"dir": 1}, {"symlink": "../outside/precious"},
                                    {"symlink": "/dev/zero"}, {"symlink": "nowhere"}))
        desc.append(f"{target} is {files[target]}")
    elif r < 0.36:
        files[rng.choice(("run/big.index", f"run/{names[-1]}.index", "run/huge.data-00000-of-00001"))] = \
            {"sparse": SPARSE_SIZE}
        desc.append("a sparse 2 GiB file")
    elif r < 0.42:
        files["run/link"] = {"symlink": "../outside"}
        files["link"] = {"symlink": "outside"}
        desc.append("run/link -> ../outside")
    elif r < 0.46:
        files[f"run/ckpt-50.index.tempstate{rng.randrange(1000)}"] = b"half written"
        files["run/ckpt-50.data-00000-of-00001.tempstate1"] = b"x" * 10
        desc.append("a killed writer's temporaries")
    if op in retain_ops.NEW_OPS:
        meta = {"protect": [], "dst": None}
        retain_ops.plant(rng, files, names, s.files, s.prefix, planted, meta)
        files["runlink"] = {"symlink": "run"}
        if op == "average":
            argv = retain_ops.average_argv(rng, files, names, victim, meta)
        elif op == "rm":
            argv = retain_ops.rm_argv(rng, files, names, meta)
        else:
            argv = retain_ops.clean_temp_argv(rng, files, names, planted, meta)
        desc.append("argv " + " ".join(argv)[:300])
    else:
        argv, d = _argv(rng, op, names, s.v1, has_state, files)
        desc.append(d)
        meta = _roles(argv, op, names, (not has_state and n_ck == 1) or valid_state)
        if op == "prune-best" and "--dry-run" not in argv:
            meta["deletable"] = [f for n in names for f in retain_ops.checkpoint_files(files, n)]
    if rng.random() < 0.7 and op != "api":
        argv = ["--debug"] + argv
    return Case(number, op, argv, files, "; ".join(desc)[:2000], planted, meta)


_FILE_SUFFIX = re.compile(r"(\.index|\.data-[0-9]{5}-of-[0-9]{5}|\.meta)?(\.tempstate[0-9]+)?$")


def _prefix_of(rel: str) -> str:
    """The checkpoint prefix a file name belongs to (``sweep.tmp1-3.index`` -> ``sweep.tmp1-3``)."""
    base = os.path.basename(rel)
    return base[: _FILE_SUFFIX.search(base).start()]  # type: ignore[union-attr]


def _roles(argv: list[str], op: str, names: list[str], latest_known: bool) -> dict:
    """Which prefix of run/ the command reads (protect) and which it may write (dst)."""
    protect, dst = [], None
    writes = op.startswith("convert") or op == "rewrite"
    # The source is argv[1] of a writing command (argv[2] is its destination, never a source).
    srcs = [a for a in argv[1:2 if writes else 3] if a.startswith("{D}/run")] if op in READ_ONLY else []
    for a in srcs[:1]:
        if a.startswith(("{D}/run/ckpt-", "{D}/runlink/ckpt-")):
            protect.append(_prefix_of(a))
        elif a in ("{D}/run", "{D}/runlink") and latest_known:
            protect.append(names[-1])
    if writes:
        target = argv[2]
        if target.startswith(("{D}/run/", "{D}/runlink/")):
            dst = _prefix_of(target)
    return {"protect": protect, "dst": dst}


def _argv(rng, op, names, v1, has_state, files) -> tuple[list[str], str]:
    ck = _ck_arg(rng, names, v1, has_state)
    files["runlink"] = {"symlink": "run"}
    flags = lambda *opts: [o for o in opts if rng.random() < 0.4]  # noqa: E731
    if op == "list":
        a = ["list-variables", ck] + flags("--json")
        if rng.random() < 0.2:
            a += rng.choice((["--match", "*"], ["--regex", "("], ["--regex", "(a*)*b"], ["--match", "[!"]))
    elif op == "inspect":
        a = ["inspect", ck] + flags("--json")
    elif op == "read":
        if rng.random() < 0.6:
            a = ["inspect", ck, "--all-tensors"] + flags("--json", "--full")
        else:
            t = rng.choice(("f32", "part", "strs", "w", "nope", "", "_CHECKPOINTABLE_OBJECT_GRAPH", "a\0b",
                            "dt/float8_e5m2", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"))
            a = ["inspect", ck, "--tensor", t] + flags("--json", "--full")
    elif op == "verify":
        a = ["inspect", ck, "--verify"] + flags("--json")
    elif op == "stats":
        a = ["inspect", ck, "--stats"] + flags("--json", "--all-tensors")
    elif op == "tree":
        a = ["inspect", ck, "--tree"] + flags("--json") + (["--depth", str(rng.choice((0, 1, 5)))]
                                                            if rng.random() < 0.3 else [])
    elif op == "diff":
        other = rng.choice(("{D}/outside/ckpt-1", ck, "{D}/run/" + names[0]))
        a = ["diff", ck, other] + flags("--json") + (["--atol", rng.choice(("0", "1e300", "nan", "inf"))]
                                                     if rng.random() < 0.2 else [])
    elif op.startswith("convert"):
        fmt = op.split("-", 1)[1]
        dst = rng.choice(("{D}/out/x", "{D}/out/x", "{D}/run/" + names[-1], "{D}/run", "{D}/runlink/" + names[-1],
                          "{D}/out/x.pt"))
        if fmt != "tf" and dst == "{D}/out/x":
            dst += "." + fmt
        if rng.random() < 0.15:
            files["out/x" + ("" if fmt == "tf" else "." + fmt)] = b"old output"
        a = ["convert", ck, dst, "--to", fmt] + flags("--force", "--keep-slices", "--skip-unsupported")
        if rng.random() < 0.2:
            a += ["--shards", str(rng.choice((1, 2, 7)))]
        if rng.random() < 0.1:
            a += ["--match", rng.choice(("*", "nothing", "f*"))]
    elif op == "rewrite":
        dst = rng.choice(("{D}/out/x", "{D}/out/x", "{D}/run/" + names[-1], "{D}/runlink/" + names[-1],
                          "{D}/run"))
        a = ["rewrite-names", ck, dst]
        r = rng.random()
        if r < 0.2:
            doc = rng.choice(('{"f32": "g32"}', '{"": "x/"}', '[]', '{"a": 1}', '{"a/": "b/"}', "{", '{"f32": ""}',
                              '{"f32": "part", "part": "f32"}'))
            files["map.json"] = doc.encode()
            a += ["--map", "{D}/map.json"]
        else:
            rule = rng.choice(("f32=g32", "=x", "a", "w=w", "*=x", "/=/", "f32=i64", "model/=net/", "\0=x"))
            a += ["--rule", rule]
        a += flags("--force", "--strip-optimizer", "--dry-run", "--compact", "--strict")
        if rng.random() < 0.1:
            a += ["--drop", rng.choice(("*", "f*", "["))]
        if rng.random() < 0.1:
            a += ["--template", rng.choice(("{D}/outside/ckpt-1", ck))]
    elif op in ("prune", "prune-recursive"):
        a = ["prune", "{D}/run"]
        if op == "prune-recursive":
            a.append("--recursive")
        if rng.random() < 0.7:
            a += ["--max-to-keep", str(rng.choice((0, 1, 2, 3)))]
        a += flags("--scan", "--json", "--dry-run")
        if rng.random() < 0.2:
            a += ["--keep-every-n-hours", rng.choice(("1", "1e-300", "1e300"))]
        if rng.random() < 0.15:
            a += ["--keep", rng.choice((names[0], "{D}/run/" + names[0], "ckpt-99", "../outside/ckpt-1"))]
        if rng.random() < 0.1:
            a += ["--min-age", rng.choice(("0s", "1h", "999999999d"))]
    elif op == "state":
        a = ["state", "{D}/run"] + rng.choice(([], [], ["--rebuild"], ["--relative"])) + flags("--json", "--dry-run")
    elif op == "du":
        a = ["du", rng.choice(("{D}", "{D}/run"))] + flags("--json")
    elif op == "save":
        src_kind = rng.random()
        if src_kind < 0.4:
            src = ck
        elif src_kind < 0.7:
            files["in.npz"], d = npz_bytes(rng)
            src = "{D}/in.npz"
        else:
            files["in.safetensors"], d = safetensors_bytes(rng)
            src = "{D}/in.safetensors"
        a = ["save", "{D}/out/ckpt", "--from", src] + flags("--force", "--no-state")
        if rng.random() < 0.3:
            a += ["--global-step", str(rng.choice((0, 1, 2**62)))]
    elif op == "prune-best":
        return fuzz_events.keep_best_argv(rng, files, names)
    else:  # api
        return [ck], "library open/variables/read/verify"
    return a, "argv " + " ".join(a)[:300]


# --------------------------------------------------------------------------- running one case

def materialize(case: Case, directory: pathlib.Path) -> None:
    for rel, v in sorted(case.files.items()):
        p = directory / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(v, bytes):
            p.write_bytes(v)
        elif "symlink" in v:
            os.symlink(v["symlink"], p)
        elif "fifo" in v:
            os.mkfifo(p)
        elif "dir" in v:
            p.mkdir(exist_ok=True)
        elif "sparse" in v:
            with open(p, "wb") as f:
                f.truncate(int(v["sparse"]))
        else:
            raise ValueError(f"bad file spec {v!r}")
    for sub in ("run", "out", "outside"):
        (directory / sub).mkdir(exist_ok=True)


def tree_state(directory: pathlib.Path) -> dict[str, object]:
    """path -> bytes (regular files, hashed if big), ('link', target), ('fifo',), ('dir',)."""
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, directory)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("big", st.st_size) if st.st_size > 1 << 20 else open(p, "rb").read()
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))
    return out


def _top_frame(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    pkg = str(ROOT / "ckptool")
    ours = [f for f in frames if f.filename.startswith(pkg)]
    f = (ours or frames or [None])[-1]
    if f is None:
        return "?"
    where = os.path.relpath(f.filename, ROOT) if f.filename.startswith(str(ROOT)) else os.path.basename(f.filename)
    return f"{where}:{f.name}"


def _cli(argv: list[str]) -> tuple[int, str, str, BaseException | None]:
    from ckptool.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    exc = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except CkptError as e:
            code, exc = 1, e
    return code, out.getvalue(), err.getvalue(), exc


def _api(path: str) -> str:
    import ckptool

    with ckptool.open(path) as ck:
        vs = ck.variables()
        for v in vs:
            try:
                ck.read(v.name, verify=True)
            except CkptError:
                pass
        list(ck.verify())
        if ck.is_object_based:
            ck.object_graph()
    return "ok"


def run_case(case: Case, base: pathlib.Path, timeout: float = 5.0) -> str:
    """Build ``case`` in a fresh ``base/c`` and run it; the outcome label, or raise Failure."""
    d = base / "c"
    if d.exists() or d.is_symlink():
        _rmtree(d)
    d.mkdir(parents=True)
    materialize(case, d)
    if case.meta.get("aged"):
        retain_ops.age(d)
    before = tree_state(d)
    argv = [a.replace("{D}", str(d)) for a in case.argv]
    exc: BaseException | None = None
    code, out, err = 0, "", ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with engine.deadline(timeout):
                if case.op == "api":
                    try:
                        _api(argv[0])
                    except CkptError as e:
                        code, exc = 1, e
                else:
                    code, out, err, exc = _cli(argv)
    except engine.CaseTimeout as e:
        raise Failure(f"hang@{_top_frame(e)}", f"ran past {timeout}s") from e
    except MemoryError as e:
        raise Failure(f"MemoryError@{_top_frame(e)}", "allocation past the address-space cap") from e
    except RecursionError as e:
        raise Failure(f"RecursionError@{_top_frame(e)}", str(e)[:300]) from e
    except Exception as e:  # noqa: BLE001 - anything but a CkptError is what we look for
        raise Failure(f"{type(e).__name__}@{_top_frame(e)}", f"{type(e).__name__}: {str(e)[:300]}") from e
    finally:
        os.chdir(ROOT)
    after = tree_state(d)
    _check(case, d, before, after, code, out, err)
    if exc is not None:
        return type(exc).__name__
    return f"exit {code}"


def _check(case: Case, d, before, after, code, out, err) -> None:
    op = case.op
    if code not in (0, 1, 2):
        raise Failure(f"exit-{code}@{op}", err[-300:])
    if "Traceback (most recent call last)" in err:
        raise Failure(f"traceback-on-stderr@{op}", err[-600:])
    debug = "--debug" in case.argv
    if code == 1 and not debug and "ckptool: error:" not in err and op not in ("diff", "verify", "prune-recursive", "api"):
        raise Failure(f"exit-1-without-error-line@{op}", err[-300:])
    for text, name in ((out, "stdout"), (err, "stderr")):
        for line in text.splitlines():
            if line.startswith("ckptool: error: forged") or line.startswith("ckptool: warning: forged"):
                raise Failure(f"forged-line-on-{name}@{op}", line[:200])
    if len(err.splitlines()) > 0 and code == 1 and not debug and op in ("list", "inspect", "read", "convert-tf"):
        first = err.splitlines()
        if sum(1 for ln in first if ln.startswith("ckptool: error:")) > 1:
            raise Failure(f"several-error-lines@{op}", err[-300:])
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    outside = [k for k in changed if k == "outside" or k.startswith("outside/")]
    if outside:
        raise Failure(f"touched-outside@{op}", f"changed below outside/: {outside[:5]}")
    gone = [p for p in case.planted if before.get(p) != after.get(p)]
    if gone:
        raise Failure(f"deleted-foreign-file@{op}", f"planted files changed or deleted: {gone}")
    read_only = op in READ_ONLY or (op.startswith("prune") and "--dry-run" in case.argv) or (
        op == "state" and ("--dry-run" in case.argv or not ({"--rebuild", "--relative"} & set(case.argv))))
    if read_only:
        dst, protect = case.meta.get("dst"), set(case.meta.get("protect", ()))
        dst_exists = dst is not None and (f"run/{dst}.index" in before or isinstance(before.get(f"run/{dst}"), bytes))
        may_write = dst is not None and dst not in protect and ("--force" in case.argv or not dst_exists)
        src = [k for k in changed if k in before and (k.startswith("run/") or k in ("run", "map.json", "in.npz"))
               and not (may_write and k.startswith("run/") and _prefix_of(k) == dst and k not in case.planted)]
        if src:
            raise Failure(f"changed-source@{op}", f"a reading command changed {src[:5]}")
    temps = [k for k in after if k not in before and TEMP_NAME.search(k) and not k.startswith("run/.ckptool")]
    if temps:
        raise Failure(f"left-temporary@{op}", f"exit {code}: {temps[:5]}")
    retain_ops.check(case, d, before, after, code, Failure)


def _rmtree(d: pathlib.Path) -> None:
    def onerror(func, path, excinfo):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            func(path)
        except OSError:
            pass
    shutil.rmtree(d, onerror=onerror)


def replay(case: Case, timeout: float = 5.0) -> tuple[str, Failure | None, str]:
    """Run one case in a scratch directory: (outcome, failure or None, traceback text)."""
    import tempfile

    base = pathlib.Path(tempfile.mkdtemp(prefix="ckptool-fuzz-"))
    try:
        try:
            return run_case(case, base, timeout), None, ""
        except Failure as f:
            tb = "".join(traceback.format_exception(f.__cause__ or f))
            return "FAIL " + f.key, f, tb
    finally:
        _rmtree(base)


__all__ = ["OPS", "Case", "Failure", "make_case", "run_case", "replay", "disk_seeds", "materialize"]


if __name__ == "__main__":  # pragma: no cover
    print(json.dumps(make_case(int(sys.argv[1])).to_json())[:2000])
