"""`prune --series`: a Keras ModelCheckpoint file series pruned by the same policy as a TF run,
through the one deletion engine (issue 43). Files are made as Keras writes them: .keras zips,
.weights.h5 / .h5 HDF5 files (h5py), sharded .weights.json + parts, TF prefixes."""

import io
import json
import os
import random
import time
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptool
from ckptool.errors import CkptError, MissingError, UsageError
from ckptool.format.keras_files import COMPLETE, DAMAGED, OPEN
from ckptool.io.layout.series_listing import scan_series
from ckptool.io.layout.series_names import parse_template
from ckptool.io.safety.dirfd import LocalDir
from ckptool.ops.retain.journal import JOURNAL, finish_journal
from ckptool.ops.retain.prune import prune

h5py = pytest.importorskip("h5py")

from clirun import run  # noqa: E402

NOW = 1_800_000_000.0
HOUR = 3600.0
KT = "model-{epoch:02d}-{val_loss:.2f}.keras"


def h5_bytes(value=1.0):
    b = io.BytesIO()
    with h5py.File(b, "w") as f:
        f["layers/dense/vars/0"] = np.full((2, 3), value, np.float32)
    return b.getvalue()


def keras_file(path, value=1.0):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", "{}")
        z.writestr("config.json", "{}")
        z.writestr("model.weights.h5", h5_bytes(value))


def weights_file(path, value=1.0):
    path.write_bytes(h5_bytes(value))


def age(path, t):
    os.utime(path, (t, t))


def keras_series(d, losses, *, t0=NOW - 10 * HOUR, gap=HOUR, template=KT):
    d.mkdir(exist_ok=True)
    names = []
    for e, v in enumerate(losses, 1):
        n = template.format(epoch=e, val_loss=v)
        keras_file(d / n, v)
        age(d / n, t0 + (e - 1) * gap)
        names.append(n)
    return names


def files(d):
    return sorted(n for n in os.listdir(d) if n != ".ckptool.lock")


def test_max_to_keep_follows_the_epochs_not_the_times(tmp_path):
    d = tmp_path / "run"
    names = keras_series(d, [0.9, 0.5, 0.7, 0.4, 0.6])
    age(d / names[0], NOW - HOUR)  # epoch 1 rewritten last (a restart): still the oldest by epoch
    (d / "notes.txt").write_text("x")
    (d / "model-6.keras").write_text("not a member: {epoch:02d} writes 06")
    r = prune(str(d), series=KT, max_to_keep=2, now=NOW)
    assert files(d) == sorted(names[3:] + ["notes.txt", "model-6.keras"])
    assert [os.path.basename(p) for p in r.deleted] == names[:3]
    assert r.reasons[str(d / names[4])] == ["max_to_keep", "latest"]
    assert r.to_json()["series"]["template"] == KT and r.policy["series"] == KT
    assert not os.path.exists(d / JOURNAL)


def test_without_counters_the_series_is_ordered_by_time(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for i, v in enumerate([0.3, 0.1, 0.2]):
        weights_file(d / f"w-{v:.2f}.weights.h5")
        age(d / f"w-{v:.2f}.weights.h5", NOW - (3 - i) * HOUR)
    prune(str(d), series="w-{val_loss:.2f}.weights.h5", max_to_keep=1, now=NOW)
    assert files(d) == ["w-0.20.weights.h5"]


def test_keep_best_from_the_names_and_pins_and_steps(tmp_path):
    d = tmp_path / "run"
    names = keras_series(d, [0.9, 0.2, 0.7, 0.2, 0.6, 0.8, 0.5])
    r = prune(str(d), series=KT, max_to_keep=1, best=_spec(1, "val_loss"), keep=(names[0],), keep_steps_every=3,
              now=NOW)
    # best: epochs 2 and 4 tie at 0.20, the newer wins; pinned 1; steps-every 3 and 6; latest 7
    assert files(d) == [names[i] for i in (0, 2, 3, 5, 6)]
    assert r.best["series"] == "{val_loss}" and r.best["best"][0]["checkpoint"] == names[3]
    assert "best" in r.reasons[str(d / names[3])]


def _spec(n, metric, mode="min", metrics=None):
    from ckptool.ops.retain.keep_best import BestSpec

    return BestSpec(n, metric, mode, metrics)


def test_keep_best_joins_a_csv_or_jsonl_on_keras_s_epoch(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for e in range(1, 6):
        weights_file(d / f"w-{e:02d}.weights.h5")
        age(d / f"w-{e:02d}.weights.h5", NOW - (6 - e) * HOUR)
    # CSVLogger counts epochs from 0: row 2 is the file named w-03
    (d / "log.csv").write_text("epoch,loss,val_loss\n0,1,0.9\n1,1,0.8\n2,1,0.1\n3,1,0.7\n4,1,0.6\n")
    prune(str(d), series="w-{epoch:02d}.weights.h5", max_to_keep=1, best=_spec(1, "val_loss", metrics=str(
        d / "log.csv")), now=NOW)
    assert files(d) == ["log.csv", "w-03.weights.h5", "w-05.weights.h5"]
    (d / "h.jsonl").write_text("\n".join(json.dumps({"epoch": e, "acc": a}) for e, a in
                                         [(0, 0.5), (2, 0.1), (4, 0.2), (2, 0.9)]) + "\n")  # a later line wins
    r = prune(str(d), series="w-{epoch:02d}.weights.h5", max_to_keep=1,
              best=_spec(1, "acc", "max", str(d / "h.jsonl")), now=NOW, dry_run=True)
    assert r.best["best"] == [{"checkpoint": "w-03.weights.h5", "step": 3, "value": 0.9}]
    with pytest.raises(MissingError, match="found: loss, val_loss"):
        prune(str(d), series="w-{epoch:02d}.weights.h5", best=_spec(1, "nope", metrics=str(d / "log.csv")), now=NOW)
    (tmp_path / "run2").mkdir()
    weights_file(tmp_path / "run2" / "w-0.5.weights.h5")
    with pytest.raises(CkptError, match="no \\{epoch\\} to join"):
        prune(str(tmp_path / "run2"), series="w-{val_loss}.weights.h5", best=_spec(1, "x", metrics=str(d / "h.jsonl")),
              now=NOW)
    with pytest.raises(MissingError, match="series 'w-\\{val_loss\\}.weights.h5' matches none of its 4 files; it holds "
                                          "a Keras ModelCheckpoint series: .*--series 'w-\\{epoch:02d\\}.weights.h5'"):
        prune(str(d), series="w-{val_loss}.weights.h5", now=NOW)  # cron would never prune, and never say why


def test_a_save_in_progress_and_a_damaged_member(tmp_path):
    d = tmp_path / "run"
    real = time.time()
    names = keras_series(d, [0.9, 0.8, 0.7, 0.6, 0.5], t0=real - 10 * HOUR)
    # epoch 2 cut short long ago (damaged), epoch 6 a .keras Keras is writing (no end record yet)
    (d / names[1]).write_bytes((d / names[1]).read_bytes()[:200])
    age(d / names[1], real - 9 * HOUR)
    busy = KT.format(epoch=6, val_loss=0.4)
    with open(d / busy, "wb") as f, zipfile.ZipFile(f, "w") as z:
        z.writestr("metadata.json", "{}")
        f.flush()
        r = prune(str(d), series=KT, max_to_keep=2, now=real)
        assert busy in files(d)
    assert r.in_progress == [str(d / busy)]
    assert [os.path.basename(p) for p in r.deleted] == names[:3]  # the damaged one rotated out with them
    assert files(d) == [names[3], names[4], busy]
    # a damaged member among those kept: kept, named, not counted
    names = keras_series(tmp_path / "b", [0.9, 0.8, 0.7, 0.6])
    (tmp_path / "b" / names[2]).write_bytes(b"PK\x03\x04 cut")
    age(tmp_path / "b" / names[2], NOW - 9.5 * HOUR)
    r = prune(str(tmp_path / "b"), series=KT, max_to_keep=2, now=NOW)
    assert files(tmp_path / "b") == names[1:]  # 2 and 4 counted, 3 kept as damaged
    assert [x["path"] for x in r.damaged] == [str(tmp_path / "b" / names[2])]
    assert r.reasons[str(tmp_path / "b" / names[2])] == ["damaged"]


def test_the_newest_file_younger_than_a_minute_is_never_deleted(tmp_path):
    d = tmp_path / "run"
    names = keras_series(d, [0.9, 0.8, 0.7], t0=NOW - 4 * HOUR)
    age(d / names[0], NOW - 5)  # epoch 1 rewritten a moment ago (a restarted run writing it now)
    r = prune(str(d), series=KT, max_to_keep=1, now=NOW)
    assert files(d) == [names[0], names[2]] and r.reasons[str(d / names[0])] == ["newest file"]


def test_min_age_and_every_n_hours_use_the_file_times(tmp_path):
    d = tmp_path / "run"
    names = keras_series(d, [0.9] * 8, t0=NOW - 8 * HOUR)
    prune(str(d), series=KT, max_to_keep=2, keep_every_n_hours=3, min_age=2.5 * HOUR, now=NOW)
    # every 3 hours from the first: 1 (t-8h), 4 (t-5h); min-age: 7, 8 (t-2h, t-1h) and 6 (t-3h)...
    left = files(d)
    assert names[0] in left and names[3] in left and names[6] in left and names[7] in left
    assert names[1] not in left and names[2] not in left


def test_every_file_of_a_sharded_member_and_nothing_else(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for e in (1, 2, 3):
        parts = [f"w-{e:02d}_{i:05}.weights.h5" for i in range(2)]
        for p in parts:
            weights_file(d / p)
        (d / f"w-{e:02d}.weights.json").write_text(json.dumps(
            {"metadata": {"total_size": 1}, "weight_map": {"/layers/dense/vars": parts}}))
        for n in parts + [f"w-{e:02d}.weights.json"]:
            age(d / n, NOW - (4 - e) * HOUR)
    weights_file(d / "w-01_0.weights.h5")  # not a part: Keras pads the index to 5 digits
    weights_file(d / "w-04_00000.weights.h5")  # a part of a save whose JSON is not written yet
    t = parse_template("w-{epoch:02d}.weights.json")
    with LocalDir(str(d)) as h:
        listing = scan_series(h, t)
    assert [m.name for m in listing.members] == [f"w-{e:02d}.weights.json" for e in (1, 2, 3)]
    assert [f.name for f in listing.members[0].files] == [
        "w-01.weights.json", "w-01_00000.weights.h5", "w-01_00001.weights.h5"]
    prune(str(d), series="w-{epoch:02d}.weights.json", max_to_keep=1, now=NOW)
    assert files(d) == ["w-01_0.weights.h5", "w-03.weights.json", "w-03_00000.weights.h5",
                        "w-03_00001.weights.h5", "w-04_00000.weights.h5"]
    os.remove(d / "w-03_00001.weights.h5")
    with LocalDir(str(d)) as h:
        m = scan_series(h, t).members[0]
    assert m.state == DAMAGED and "w-03_00001.weights.h5' is missing" in m.problem


def test_member_states_follow_how_keras_writes(tmp_path):
    d = tmp_path
    weights_file(d / "w-1.weights.h5")
    f = h5py.File(d / "w-2.weights.h5", "w")  # open for writing, as save_weights holds it
    f["x"] = np.zeros(1000)
    f.flush()
    (d / "w-3.weights.h5").write_bytes(h5_bytes()[:-100])  # cut short
    (d / "w-4.weights.h5").write_bytes(b"not hdf5 at all, long enough")
    (d / "w-5.weights.h5").write_bytes(b"")
    with LocalDir(str(d)) as h:
        states = {m.name: m.state for m in scan_series(h, parse_template("w-{epoch}.weights.h5")).members}
    f.close()
    assert states == {"w-1.weights.h5": COMPLETE, "w-2.weights.h5": OPEN, "w-3.weights.h5": OPEN,
                      "w-4.weights.h5": DAMAGED, "w-5.weights.h5": OPEN}
    with LocalDir(str(d)) as h:
        assert scan_series(h, parse_template("w-{epoch}.weights.h5")).members[1].state == COMPLETE  # closed now
    keras_file(d / "m-1.keras")
    with zipfile.ZipFile(d / "m-2.keras", "w") as z:
        z.writestr("other.txt", "x")
    (d / "m-3.keras").write_bytes((d / "m-1.keras").read_bytes()[:-22])  # no end record
    (d / "m-4.keras").write_bytes(b"garbage garbage garbage")
    with LocalDir(str(d)) as h:
        states = {m.name: m.state for m in scan_series(h, parse_template("m-{epoch}.keras")).members}
    assert states == {"m-1.keras": COMPLETE, "m-2.keras": DAMAGED, "m-3.keras": OPEN, "m-4.keras": DAMAGED}


def test_a_tf_format_series_is_its_prefixes_own_files(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for e in range(1, 5):
        ckptool.write(str(d / f"w-{e:02d}"), {"v": np.full(3, e, np.float32)}, sync=False)
        for n in os.listdir(d):
            if n.startswith(f"w-{e:02d}."):
                age(d / n, NOW - (5 - e) * HOUR)
    (d / "w-01.index.bak").write_bytes(b"x")
    (d / "w-010.index").write_bytes((d / "w-01.index").read_bytes())  # another member's name? no: 010 != 10
    os.remove(d / "w-02.data-00000-of-00001")  # damaged
    r = prune(str(d), series="w-{epoch:02d}", max_to_keep=2, now=NOW)
    assert files(d) == ["w-01.index.bak", "w-010.index", "w-03.data-00000-of-00001", "w-03.index",
                        "w-04.data-00000-of-00001", "w-04.index"]
    assert {os.path.basename(p) for p in r.deleted} == {"w-01", "w-02"}


def test_a_killed_prune_is_finished_and_a_rewritten_name_is_not_touched(tmp_path):
    d = tmp_path / "run"
    names = keras_series(d, [0.9, 0.8, 0.7, 0.6])
    st = [os.stat(d / n) for n in names[:2]]
    (d / JOURNAL).write_text(json.dumps([{"files": [[n, s.st_size, s.st_mtime]]} for n, s in zip(names[:2], st)]))
    keras_file(d / names[1], 5.0)  # rewritten since (another save under the same name)
    with LocalDir(str(d)) as h:
        finish_journal(None, h, None)
    assert files(d) == names[1:] and not os.path.exists(d / JOURNAL)


def test_refusals_and_errors(tmp_path):
    d = tmp_path / "run"
    keras_series(d, [0.9, 0.8])
    with pytest.raises(UsageError, match="names files of"):
        prune(str(d), series="elsewhere/" + KT, now=NOW)
    with pytest.raises(MissingError, match="names no member"):
        prune(str(d), series=KT, keep=("model-09-0.10.keras",), now=NOW)
    (d / ".ckptool.toml").write_text('series = "a/{epoch}.keras"\n')
    with pytest.raises(CkptError, match=r"series: 'a/\{epoch\}.keras' names the files of .*run/a \(its directory "
                                        r"part is relative to the .ckptool.toml\), not of "):
        prune(str(d), now=NOW)
    (d / ".ckptool.toml").write_text(f'series = "{KT}"\nmax_to_keep = 1\n')
    r = prune(str(d), now=NOW)
    assert len(r.deleted) == 1 and r.sources["series"].endswith(".ckptool.toml")


def test_the_cli(tmp_path, capsys):
    d = tmp_path / "run"
    names = keras_series(d, [0.9, 0.8, 0.7], t0=time.time() - 10 * HOUR)
    code, out, err = run(capsys, "prune", d)
    assert code == 1 and "--series 'model-{epoch:02d}-{metric:.2f}.keras'" in err
    code, out, err = run(capsys, "prune", d, "--series", KT, "--max-to-keep", 1, "--json", "--dry-run")
    doc = json.loads(out)
    assert code == 0 and [os.path.basename(p) for p in doc["deleted"]] == names[:2]
    assert doc["series"]["members"] == 3 and doc["policy_sources"]["series"] == "flag"
    (d / names[0]).write_bytes(b"PK\x03\x04")
    age(d / names[0], time.time() - 9 * HOUR)
    code, out, err = run(capsys, "prune", d, "--series", KT, "--max-to-keep", 3)
    assert code == 1 and "damaged" in err and names[0] in err
    code, out, err = run(capsys, "prune", d, "--series", "{0}.keras")
    assert code == 2 and err.startswith("ckptool: error: --series")
    code, out, err = run(capsys, "inspect", d, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["prefix"] == str(d / names[2])
    assert [e["status"] for e in doc["series"]["entries"]] == ["damaged", "kept", "latest"]
    code, out, err = run(capsys, "verify", d)
    assert code == 1 and out.count("ok ") == 2 and "DAMAGED" in out
    code, out, err = run(capsys, "du", tmp_path, "--json")
    row = json.loads(out)["directories"][0]
    assert row["checkpoints"] == 3 and row["latest_step"] == 3


def test_recursive_prunes_each_run_s_series(tmp_path, capsys):
    for run_dir in ("a", "b/c"):
        keras_series(_mk(tmp_path / "root" / run_dir), [0.9, 0.8, 0.7])
    (tmp_path / "root" / ".ckptool.toml").write_text(f'series = "{KT}"\nmax_to_keep = 1\n')
    code, out, err = run(capsys, "prune", tmp_path / "root", "--recursive")
    assert code == 0, err
    assert len(files(tmp_path / "root" / "a")) == 1 and len(files(tmp_path / "root" / "b" / "c")) == 1


def _mk(p):
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["member", "decoy", "part", "other"]), min_size=1, max_size=14),
       st.integers(0, 4), st.randoms(use_true_random=False))
def test_only_members_files_are_ever_deleted(tmp_path_factory, kinds, keep, rnd):
    """A model of the tree: random names beside a series; prune deletes only files of members it
    drops, and keeps the newest max_to_keep complete ones."""
    d = tmp_path_factory.mktemp("model")
    t = "r[{epoch:03d}]-{val_loss:.3f}.weights.h5"
    made, members = [], {}
    for i, k in enumerate(kinds):
        e = rnd.randint(1, 400)
        v = rnd.random()
        if k == "member":
            n = t.format(epoch=e, val_loss=v)
            members[n] = e
        elif k == "decoy":
            n = rnd.choice([f"r[{e}]-{v:.3f}.weights.h5", f"r[{e:03d}]-{v:.4f}.weights.h5",
                            f"r{e:03d}-{v:.3f}.weights.h5", t.format(epoch=e, val_loss=v) + ".bak",
                            f"r[{e:03d}]-{v:.3f}.weights.H5"])
        elif k == "part":
            n = f"r[{e:03d}]-{v:.3f}_00000.weights.h5"
        else:
            n = rnd.choice(["checkpoint.txt", "log.csv", f"x{i}.keras"])
        if n in made:
            continue
        weights_file(d / n)
        age(d / n, NOW - rnd.randint(100, 10**6))
        made.append(n)
    before = set(files(d))
    mtimes = {n: os.path.getmtime(d / n) for n in members}
    if not members:  # files, none of them a member: said, never a silent success
        with pytest.raises(MissingError, match="matches none of its"):
            prune(str(d), series=t, max_to_keep=keep or None, now=NOW)
    else:
        prune(str(d), series=t, max_to_keep=keep or None, now=NOW)
    after = set(files(d))
    assert before - after <= set(members)  # nothing but members
    by_order = sorted(members, key=lambda n: (members[n], mtimes[n], n))  # epoch, then time
    if keep:
        assert after & set(members) == set(by_order[-keep:])  # exactly the newest K
    else:
        assert after == before


def test_random_names_never_confuse_the_listing():
    rnd = random.Random(5)
    t = parse_template("m-{epoch:02d}-{val_loss:.2f}.keras")
    for _ in range(2000):
        name = "".join(rnd.choice("m-0123456789.kerasx") for _ in range(rnd.randint(1, 24)))
        got = t.match(name)
        assert got is None or t.format(**got) == name
