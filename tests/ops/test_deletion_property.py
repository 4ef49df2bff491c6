"""Issue 27, a property test over names: random run and checkpoint names (with ``_temp``,
``.tmp``, ``[``, ``*``, unicode, spaces) in random trees with user files and genuine
temporaries beside the checkpoints. prune, rm, prune --clean-temp and prune --recursive delete
exactly the files of the checkpoints the policy drops plus the genuine temporaries; nothing
else, checked against a model of the tree.

Issue 36: some checkpoints of the random trees are damaged (a data file truncated or missing,
the index missing or garbled, the latest among them). A damaged checkpoint is not counted as
one of max_to_keep, so no intact checkpoint newer than every kept one is ever deleted; rm
refuses the newest intact one while the latest is damaged (unless forced)."""

import os
import shutil
import tempfile
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CkptWarning
from ckptool.io.control.state import CheckpointState, read_state, resolve, write_state
from ckptool.ops.retain import fleet as F
from ckptool.ops.retain import prune as P
from ckptool.ops.retain.rm import rm

T0 = 1_700_000_000.0
OLD = T0 - 7200.0  # temporaries older than --clean-temp's hour
NOW = T0 + 1000.0

PIECES = ["a", "b", "model", "ckpt", "_temp", ".tmp", "[", "]", "*", "?", " ", "é", "中", "-", "_", ".", "x1",
          "temp", "tmpl", "0.5", "_temp_0.5", ".index", ".data", ".meta"]
names = st.lists(st.sampled_from(PIECES), min_size=1, max_size=5).map("".join).filter(
    lambda n: n not in (".", "..") and not n.startswith(".") and len(n.encode()) < 60)

DAMAGE = ("truncate", "no-data", "no-index", "garble")
runs = st.lists(st.tuples(names, names, st.lists(st.integers(1, 40), min_size=1, max_size=5, unique=True),
                          st.booleans(),  # the state file's paths absolute (TF1 Saver's default)
                          st.lists(st.tuples(st.integers(0, 4), st.sampled_from(DAMAGE)), max_size=3)),  # damage
                min_size=1, max_size=3, unique_by=lambda r: r[0])
ops = st.one_of(
    st.tuples(st.just("prune"), st.integers(1, 4), st.booleans(), st.booleans()),  # (.., clean_temp, via a link)
    st.tuples(st.just("rm"), st.integers(0, 10), st.booleans(), st.booleans()),  # (.., force, via a link)
    st.tuples(st.just("recursive"), st.integers(1, 4), st.booleans(), st.just(False)),
)


def _all(root):
    out = set()
    for r, ds, fs in os.walk(root):
        for n in ds + fs:
            out.add(os.path.relpath(os.path.join(r, n), root))
    return out


def _build(root, spec):
    """The tree, and the model: per run its checkpoints (prefix -> files) in step order, its
    genuine temporaries (with everything below them), and the user files that must stay."""
    model = []
    for run_name, ck_name, steps, absolute, damage in spec:
        d = os.path.join(root, run_name)
        os.makedirs(d)
        steps = sorted(steps)
        cks = {}
        for i, s in enumerate(steps):
            prefix = f"{ck_name}-{s}"
            ckptool.write(os.path.join(d, prefix), {"w": np.full(2, s, np.float32)}, sync=False)
            P.record_save(d, os.path.join(d, prefix), max_to_keep=None, keep_every_n_hours=None, now=T0 + i)
            cks[prefix] = {os.path.join(run_name, n) for n in os.listdir(d)
                           if n in (prefix + ".index", prefix + ".data-00000-of-00001")}
        damaged = set()
        for i, kind in damage:  # after the saves: TF does not fsync, a crash leaves these
            prefix = f"{ck_name}-{steps[i % len(steps)]}"
            index, data = os.path.join(d, prefix + ".index"), os.path.join(d, prefix + ".data-00000-of-00001")
            if prefix in damaged:
                continue
            damaged.add(prefix)
            if kind == "truncate":
                os.truncate(data, 3)
            elif kind == "no-data":
                os.unlink(data)
            elif kind == "no-index":
                os.unlink(index)
            else:
                with open(index, "wb") as f:
                    f.write(b"not an index")
            cks[prefix] = {x for x in cks[prefix] if os.path.exists(os.path.join(root, x))}
        if absolute:
            st_ = read_state(d)
            write_state(d, CheckpointState(os.path.join(d, st_.model_checkpoint_path),
                                           [os.path.join(d, p) for p in st_.all_model_checkpoint_paths],
                                           st_.all_model_checkpoint_timestamps, st_.last_preserved_timestamp))
        first = f"{ck_name}-{steps[0]}"
        user = {f"{first}.notes.txt": b"n", f"{first}.index.bak": b"b", "hparams.tmpl": b"h",
                f"{first}.tempstate12": b"t", "notes.tmp": b"x", f"{ck_name}-{steps[-1] + 1}.index.tmp1": b"y",
                "zz_nobody.index.tempstate4": b"z"}  # a writer's name, but of no checkpoint prefix here
        for n, data in user.items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(data)
        for sub, inner in ((f"{first}_temp", "notes.txt"), ("softmax_temp_0.5", "part-00000-of-00001.index"),
                           (f"{ck_name}_temp_x", "part-00000-of-00001.index"),
                           ("zz_other_temp", "part-00000-of-00001.index")):  # staging-shaped, of no checkpoint
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            with open(os.path.join(d, sub, inner), "wb") as f:
                f.write(b"u")
        temps = {f"{first}.index.tempstate123": None, f"{first}.data-00000-of-00001.tempstate9": None,
                 "checkpoint.tmp0123abcd": None, f"{ck_name}-{steps[-1] + 1}_temp_" + "0f" * 16: "part-00000-of-00001"
                 ".data-00000-of-00001"}
        for n, inner in temps.items():
            p = os.path.join(d, n)
            if inner is None:
                with open(p, "wb") as f:
                    f.write(b"t")
            else:
                os.makedirs(p)
                with open(os.path.join(p, inner), "wb") as f:
                    f.write(b"z")
                os.utime(os.path.join(p, inner), (OLD, OLD))
            os.utime(p, (OLD, OLD))
        temp_paths = set()
        for n in temps:
            rel = os.path.join(run_name, n)
            temp_paths |= {x for x in _all(root) if x == rel or x.startswith(rel + os.sep)}
        model.append({"dir": d, "run": run_name, "cks": cks, "temps": temp_paths, "damaged": damaged})
    for r, ds, fs in os.walk(root):  # everything old: only the rule, not the age, tells temporaries apart
        for n in ds + fs:
            os.utime(os.path.join(r, n), (OLD, OLD))
    return model


def _dropped_by_count(run, k):
    """TF's sweep, damaged checkpoints not counted: what comes before the newest k intact ones."""
    prefixes = list(run["cks"])  # in step order = timestamp order
    intact = [i for i, p in enumerate(prefixes) if p not in run["damaged"]]
    return prefixes[:intact[-k]] if k <= len(intact) else []


def _newest_intact(run):
    return next((p for p in reversed(list(run["cks"])) if p not in run["damaged"]), None)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=runs, op=ops)
def test_deletion_removes_exactly_the_dropped_checkpoints_and_genuine_temporaries(spec, op):
    top = tempfile.mkdtemp()
    root = os.path.join(top, "root")
    os.mkdir(root)
    os.symlink(root, os.path.join(top, "link"))  # the same tree reached through a symlink
    try:
        model = _build(root, spec)
        before = _all(root)
        expected_gone: set[str] = set()
        kind, n, flag, via_link = op

        def where(run):
            return os.path.join(top, "link", run["run"]) if via_link else run["dir"]

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CkptWarning)
            if kind == "prune":
                run = model[n % len(model)]
                P.prune(where(run), max_to_keep=n, clean_temp=flag, now=NOW)
                for p in _dropped_by_count(run, n):
                    expected_gone |= run["cks"][p]
                if flag:
                    expected_gone |= run["temps"]
            elif kind == "rm":
                run = model[n % len(model)]
                prefixes = list(run["cks"])
                victim = prefixes[n % len(prefixes)]
                latest = victim == prefixes[-1]
                last_good = prefixes[-1] in run["damaged"] and victim == _newest_intact(run)
                no_index = not any(x.endswith(".index") for x in run["cks"][victim])
                if no_index:  # no CHECKPOINT argument names data files without their index
                    try:
                        rm([os.path.join(where(run), victim)], force=flag)
                        raise AssertionError("rm took a checkpoint without its index")
                    except ckptool.errors.MissingError:
                        pass
                elif (latest or last_good) and not flag:
                    try:
                        rm([os.path.join(where(run), victim)])
                        raise AssertionError("rm deleted the latest (or the last intact) without --force")
                    except ckptool.errors.RefusedError:
                        pass
                else:
                    rm([os.path.join(where(run), victim)], force=flag)
                    expected_gone |= run["cks"][victim]
                    if len(prefixes) == 1:  # no checkpoint left: the state file goes too (as documented)
                        expected_gone.add(os.path.join(run["run"], "checkpoint"))
            else:
                F.prune_tree(root, max_to_keep=n, clean_temp=flag, now=NOW)
                for run in model:
                    for p in _dropped_by_count(run, n):
                        expected_gone |= run["cks"][p]
                    if flag:
                        expected_gone |= run["temps"]
        after = _all(root)
        gone = before - after
        assert gone == expected_gone, (op, sorted(gone ^ expected_gone))
        if kind != "rm" or flag:  # the property itself: no intact checkpoint newer than every kept one is deleted
            for run in model:
                left = [p for p, fs in run["cks"].items() if fs and not fs & gone]
                newest = _newest_intact(run)
                if newest is not None and left and kind != "rm":
                    assert not run["cks"][newest] & gone, (op, newest, sorted(gone))
        for run in model:  # every state file names existing checkpoints only, the latest first of all
            st_ = read_state(run["dir"])
            if st_ is None:
                continue
            for p in st_.all_model_checkpoint_paths + [st_.model_checkpoint_path]:
                here = resolve(run["dir"], p)
                assert os.path.isfile(here + ".index") or os.path.basename(here) in run["damaged"], (op, p)
    finally:
        shutil.rmtree(top)
