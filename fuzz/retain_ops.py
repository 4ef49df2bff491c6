"""Fuzz cases of the commands that write beside or delete checkpoints: ``average``, ``rm`` and
``prune --clean-temp`` (``prune --keep-best`` is fuzz/events.py's), with their oracles.

Each case plants, beside the checkpoints of ``run/``, the names issue 27 found deleted:
lookalike temporaries (``softmax_temp_0.5/`` holding a checkpoint, ``prompt_templates/``,
``hparams.tmpl``, ``notes.tmp``, ``P.index.tempstateX``, ``P_temp_zz/``, a ``P_temp/``
holding a file that is no ``part-*``, ``other_temp/`` of no checkpoint, ``checkpoint.tmpZZ``),
a text file named like a V1 checkpoint (``run/ckpt``), and genuine temporaries of killed
writers (``P.index.tempstate7``, ``P.data-00000-of-00001.tempstate7``, ``P_temp/part-*``,
``P_temp_<32 hex>/part-*``, ``checkpoint.tmp<hex>``), all aged past prune's hour. Checkpoint
names may hold ``_temp``, ``.tmp`` or ``[a]``.

The oracle (:func:`check`), beyond fuzz/ops.py's (nothing below ``outside/`` changes, no
traceback, no temporary left by the command): every path that changed or went is one the
command may touch. ``rm`` and ``prune --clean-temp`` delete only files of checkpoints
(those named, for ``rm``) and genuine temporaries, and rewrite only the state file and
ckptool's own files; ``average`` writes only its output prefix and never one of its inputs
(fuzz/ops.py's reading-command rule with the inputs protected); and an ``average`` of
identical inputs that succeeds gives them back bit for bit.
"""

from __future__ import annotations

import os
import pathlib
import random
import re

NEW_OPS = ("average", "rm", "prune-clean-temp")
OP_FLAGS = {"average": ("-o",), "prune-clean-temp": ("--clean-temp",)}
#: ckptool's and TF's own files in a run directory: a command may create or rewrite them.
OWN = ("run/checkpoint", "run/.ckptool.lock", "run/.ckptool-prune-pending", "run/.ckptool-rm-pending")
HEX32 = "0123456789abcdef" * 2
#: A killed writer's own temporary in run/, by TF's exact naming (its checkpoint may never have
#: been completed): a clean-temp may take it.
WRITER_TEMP = re.compile(r"^run/[^/]+\.(index|data-[0-9]{5}-of-[0-9]{5})\.tempstate[0-9]+$")


def checkpoint_files(files: dict, prefix: str) -> list[str]:
    """The planted files of checkpoint ``run/prefix`` (by the exact name rule)."""
    out = []
    for rel in files:
        if not rel.startswith("run/") or "/" in rel[4:]:
            continue
        name = rel[4:]
        if name == prefix or name in (prefix + ".index", prefix + ".meta"):
            out.append(rel)
        elif name.startswith(prefix + ".data-") and len(name) == len(prefix) + len(".data-00000-of-00001"):
            out.append(rel)
        elif name.startswith(prefix + "-") and name[len(prefix) + 1:].replace("-of-", "").isdigit():
            out.append(rel)  # V1 shards P-NNNNN-of-NNNNN
    return out


def plant(rng: random.Random, files: dict, names: list[str], seed_files: dict, seed_prefix: str,
          planted: list[str], meta: dict) -> list[str]:
    """Lookalikes (planted: never touched) and genuine temporaries (meta["temps"]: may go)."""
    temps: list[str] = []
    p = rng.choice(names)
    if rng.random() < 0.7:  # genuine temporaries of killed writers
        kind = rng.randrange(5)
        if kind == 0:
            temps.append(f"run/{p}.index.tempstate{rng.randrange(10**6)}")
        elif kind == 1:
            temps.append(f"run/{p}.data-00000-of-00001.tempstate{rng.randrange(10**6)}")
        elif kind == 2:
            temps += [f"run/{p}_temp/part-00000-of-00001.index", f"run/{p}_temp/part-00000-of-00001.data-00000-of-00001",
                      f"run/{p}_temp"]
        elif kind == 3:
            h = "".join(rng.choice(HEX32) for _ in range(32))
            temps += [f"run/{p}_temp_{h}/part-00000-of-00002.index", f"run/{p}_temp_{h}"]
        else:
            temps.append(f"run/checkpoint.tmp{rng.randrange(16**8):x}")
        for t in temps:
            if not t.endswith(("_temp",)) and "_temp_" not in t.rsplit("/", 1)[-1]:
                files[t] = b"half written"
    lookalikes = [f"run/{p}.index.tempstateX", f"run/{p}_temp_zz/part-00000-of-00001.index",
                  f"run/{p}_temp/notes.txt", "run/other_temp/part-00000-of-00001.index", "run/checkpoint.tmpZZ",
                  "run/prompt_templates/a.txt", "run/hparams.tmpl", "run/notes.tmp", "run/ckpt", "run/x.tmp.json"]
    for rel in rng.sample(lookalikes, rng.randint(1, 4)):
        if rel.startswith(f"run/{p}_temp/") and any(t.startswith(f"run/{p}_temp/") for t in temps):
            continue  # a genuine staging directory stays genuine
        files[rel] = b"not a temporary\n"
        planted.append(rel)
    if rng.random() < 0.3:  # a sweep run whose name holds _temp, with a checkpoint inside
        for k, v in seed_files.items():
            rel = "run/softmax_temp_0.5/ckpt-1" + k[len(seed_prefix):]
            files[rel] = v
            planted.append(rel)
    meta["temps"] = temps
    meta["aged"] = True
    return temps


def rm_argv(rng: random.Random, files: dict, names: list[str], meta: dict) -> list[str]:
    target = rng.choice(names)
    form = rng.choice(("{D}/run/P", "{D}/run/P", "{D}/run/P.index", "{D}/runlink/P", "{D}/run/ckpt"))
    if form == "{D}/run/ckpt" and "run/ckpt" not in files:
        form = "{D}/run/P"
    if form == "{D}/run/ckpt":
        meta["deletable"] = []
    else:
        meta["deletable"] = checkpoint_files(files, target) + [t for t in meta.get("temps", ())
                                                        if t.startswith(f"run/{target}.")]
    argv = ["rm", form.replace("P", target)]
    argv += [o for o in ("--force", "--dry-run", "--json") if rng.random() < 0.4]
    if "--dry-run" in argv:
        meta["deletable"] = []
    return argv


def clean_temp_argv(rng: random.Random, files: dict, names: list[str], planted: list[str], meta: dict) -> list[str]:
    argv = ["prune", "{D}/run", "--clean-temp"]
    keep_all = rng.random() < 0.5
    if keep_all:  # nothing but temporaries may go
        argv += ["--max-to-keep", "50"]
        for n in names:
            planted.extend(f for f in checkpoint_files(files, n) if f not in planted)
        meta["deletable"] = list(meta.get("temps", ()))
    else:
        argv += ["--max-to-keep", str(rng.choice((1, 2)))]
        meta["deletable"] = [f for n in names for f in checkpoint_files(files, n)] + list(meta.get("temps", ()))
    argv += [o for o in ("--scan", "--json", "--dry-run") if rng.random() < 0.35]
    if "--dry-run" in argv:
        meta["deletable"] = []
    return argv


def average_argv(rng: random.Random, files: dict, names: list[str], victim: int | None, meta: dict) -> list[str]:
    inputs_last = rng.random() < 0.3
    if inputs_last:
        n = rng.randint(1, len(names) + 1)
        argv = ["average", "{D}/" + rng.choice(("run", "runlink")), "--last", str(n)]
        protect = list(names)
        dsts = ["{D}/out/avg", "{D}/run/avg-1"] + (["{D}/run/" + names[-1]] if victim is None else [])
    else:
        chosen = rng.sample(names, rng.randint(1, len(names)))
        forms = []
        for c in chosen:
            forms.append(rng.choice(("{D}/run/" + c, "{D}/run/" + c, "{D}/run/" + c + ".index", "{D}/runlink/" + c)))
        argv = ["average", *forms]
        protect = chosen
        others = [n for n in names if n not in chosen]
        dsts = ["{D}/out/avg", "{D}/run/avg-1", "{D}/run/" + chosen[-1], "{D}/runlink/" + chosen[0],
                "{D}/run/" + chosen[0] + ".index"] + ["{D}/run/" + o for o in others]
    dst = rng.choice(dsts)
    if rng.random() < 0.15:
        files["out/avg.index"] = b"old output"
    argv += ["-o", dst]
    argv += [o for o in ("--force", "--strip-optimizer", "--dry-run", "--json") if rng.random() < 0.35]
    if rng.random() < 0.15:
        argv += ["--shards", str(rng.choice((1, 2, 3)))]
    base = dst.rsplit("/", 1)[-1]
    meta["protect"] = protect
    meta["dst"] = base[: -len(".index")] if base.endswith(".index") else base
    meta["identical"] = victim is None and "--dry-run" not in argv
    meta["first_input"] = "{D}/run/" + protect[0]
    meta["output"] = dst
    return argv


def age(directory: pathlib.Path) -> None:
    """Every path below run/ three hours old (prune --clean-temp leaves younger temporaries)."""
    import time

    t = time.time() - 3 * 3600
    for dirpath, dirnames, filenames in os.walk(directory / "run"):
        for n in dirnames + filenames:
            try:
                os.utime(os.path.join(dirpath, n), (t, t), follow_symlinks=False)
            except OSError:
                pass


def check(case, d: pathlib.Path, before: dict, after: dict, code: int, failure) -> None:
    """The oracles of the three ops (see the module docstring); raise ``failure(key, detail)``."""
    op = case.op
    if op in ("rm", "prune-clean-temp") or (op == "prune-best" and "deletable" in case.meta):
        allowed = set(case.meta.get("deletable", ())) | set(OWN)
        changed = sorted(k for k in before if before.get(k) != after.get(k))
        kept = {k for k in changed if after.get(k) is None and after.get("run/kept/" + k[4:]) == before[k]}  # moved
        bad = [k for k in changed if k not in allowed and k not in kept
               and not (WRITER_TEMP.match(k) and "--dry-run" not in case.argv)]
        if bad:
            raise failure(f"deleted-not-ours@{op}", f"exit {code}: changed or deleted {bad[:6]}")
        # prune keeps what it keeps beyond max_to_keep in run/kept/: a second name of a checkpoint file of run/
        ours = {"run/kept", "run/kept/checkpoint", "run/kept/.ckptool.lock", "run/kept/.ckptool-clock"}  # TF1 clock
        new = sorted(k for k in after if k not in before and not k.startswith("run/.ckptool") and k not in OWN
                     and k not in ours and not (k.startswith("run/kept/") and before.get("run/" + k[9:]) == after[k]))
        if new:
            raise failure(f"created-files@{op}", f"exit {code}: {new[:6]}")
    elif op == "average" and code == 0 and case.meta.get("identical"):
        _same_as_input(case, d, failure)


def _same_as_input(case, d: pathlib.Path, failure) -> None:
    import numpy as np

    import ckptool
    from ckptool.errors import CkptError

    out = case.meta["output"].replace("{D}", str(d))
    src = case.meta["first_input"].replace("{D}", str(d))
    if out.endswith(".index"):
        out = out[: -len(".index")]
    try:
        with ckptool.open(src) as a, ckptool.open(out) as b:
            for name in b.names():
                if name == "_CHECKPOINTABLE_OBJECT_GRAPH" or name not in a:
                    continue
                x, y = a.read(name), b.read(name)
                if isinstance(x, np.ndarray) and x.dtype.kind == "f":
                    same = x.shape == y.shape and x.tobytes() == np.asarray(y).tobytes()
                else:
                    same = repr(x) == repr(y)
                if not same:
                    raise failure("average-of-identical-inputs-differs@average", f"{name}: {x!r} -> {y!r}"[:300])
    except CkptError:
        return  # an input damaged without a mutation (a FIFO, a link): nothing to compare


__all__ = ["NEW_OPS", "OP_FLAGS", "age", "checkpoint_files", "average_argv", "check", "clean_temp_argv", "plant", "rm_argv"]
