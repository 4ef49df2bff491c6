"""Issue 40, words that mislead: a DST suffix one slip from a written one is refused with
"did you mean" (not written as a TF prefix), a held lock is refused naming its holder by
every command that takes it, in one wording, and a state file that does not parse is
"the checkpoint state file", never a protobuf class."""

import os
import subprocess
import sys

import pytest

from ckptool.ops.transform.convert.dst_suffix import one_edit, suffix_typo

TYPOS = {
    "out.safetensor": ".safetensors",  # a letter dropped
    "out.safetensros": ".safetensors",  # two swapped
    "out.safetensorss": ".safetensors",  # one added
    "out.satetensors": ".safetensors",  # one changed
    "w/OUT.SAFETENSOR": ".safetensors",  # case is no excuse
    "out.nzp": ".npz",
    "out.np": ".npz",
    "out.npy": ".npz",  # read, never written: the archive is meant
    "out.kears": ".keras",
    "out.weight.h5": ".weights.h5",
    "out.wieghts.h5": ".weights.h5",
    "out.weights.h6": ".weights.h5",
    "out.weights.h55": ".weights.h5",
}
PREFIXES = ["out/ckpt.v2", "model.ckpt", "model.ckpt-100", "ckpt.best", "run.1", "ckpt-5", "out.safetensors",
            "out.npz", "out.weights.h5", "x.keras", "out.pt", "out.h5", "out.bin", "a.b/ckpt"]


@pytest.mark.parametrize("dst,meant", sorted(TYPOS.items()))
def test_a_suffix_one_slip_away_is_named(dst, meant):
    got = suffix_typo(dst)
    assert got is not None and got[1] == meant
    assert dst.endswith(got[0])


@pytest.mark.parametrize("dst", PREFIXES)
def test_real_prefixes_and_written_suffixes_are_no_typos(dst):
    assert suffix_typo(dst) is None


def test_one_edit():
    assert one_edit("safetensor", "safetensors") and one_edit("safetensros", "safetensors")
    assert one_edit("npx", "npz") and one_edit("nzp", "npz") and one_edit("anpz", "npz")
    assert not one_edit("npz", "npz") and not one_edit("n", "npz") and not one_edit("zpn", "npz")
    assert not one_edit("ckpt", "keras") and not one_edit("v2", "npz")


def test_convert_refuses_the_typo_and_writes_nothing(example, tmp_path, ck, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = ck("convert", example / "ckpt-5", "out.safetensor")
    assert code == 2 and out == ""
    assert err.splitlines() == ["ckptool: error: out.safetensor: did you mean .safetensors? (.safetensor is not a "
                                "format ckptool writes; --to tf writes a TF checkpoint of this name)"]
    assert not any(n.startswith("out") for n in os.listdir(tmp_path))
    code, out, err = ck("convert", example / "ckpt-5", "out.weight.h5")
    assert code == 2 and "did you mean .weights.h5?" in err and not os.path.exists("out.weight.h5")
    code, out, err = ck("convert", example / "ckpt-5", "out.safetensor", "--to", "tf")  # meant
    assert code == 0, err
    assert os.path.isfile("out.safetensor.index")
    code, out, err = ck("convert", example / "ckpt-5", "out/ckpt.v2")  # a TF prefix with a dot
    assert code == 0 and os.path.isfile("out/ckpt.v2.index"), err
    code, out, err = ck("convert", example / "ckpt-5", "w.npy", "--to", "npz")
    assert code == 0 and os.path.isfile("w.npy"), err


# --------------------------------------------------------------------------- the lock


@pytest.fixture
def held(example):
    """``example``'s lock held by a process that is not ckptool; yields its PID."""
    script = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
              "fcntl.flock(fd, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", script, str(example / ".ckptool.lock"), "--trainer"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        yield p.pid
    finally:
        p.stdin.close()
        p.wait()


@pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="the holder is named from /proc/locks")
def test_every_command_refused_by_a_held_lock_names_the_holder(example, held, ck, tmp_path):
    import numpy as np

    np.savez(tmp_path / "w.npz", w=np.zeros(2))
    refused = {}
    for argv in (["prune", example, "--max-to-keep", "1"], ["rm", example / "ckpt-3"],
                 ["save", example / "ckpt", "--from", tmp_path / "w.npz", "--global-step", "9", "--wait", "0"],
                 ["state", example, "--rebuild"]):
        code, out, err = ck(*argv)
        assert code == 1 and out == "", argv
        refused[argv[0]] = err
    for name, err in refused.items():
        assert len(err.splitlines()) == 1, name
        m = err.strip()
        assert m.startswith(f"ckptool: error: {example}: its lock is held by PID {held} (-c import fcntl"), (name, m)
        assert m.endswith("...); not waiting for it"), (name, m)  # its command line, cut at 80 characters
        assert "another ckptool process" not in m
    assert sorted(os.listdir(example)) == [".ckptool.lock", "checkpoint", *sorted(
        f"ckpt-{i}.{s}" for i in (3, 4, 5) for s in ("data-00000-of-00001", "index"))]


def test_a_lock_refusal_after_a_wait_says_how_long(example, held):
    from ckptool.errors import RefusedError
    from ckptool.io.control.lock import DirLock

    with pytest.raises(RefusedError) as exc, DirLock(str(example), timeout=0.2):
        pass
    assert str(exc.value).endswith("; gave up after waiting 0.2 s") and f"PID {held} (" in str(exc.value)


# --------------------------------------------------------------------------- the state file


@pytest.mark.parametrize("text,want", [
    ('model_checkpoint_path: "a"\nfoo: 3\n', "line 2, column 1: no field 'foo' (a state file has "
                                            "model_checkpoint_path, all_model_checkpoint_paths, "),
    ("[ext]: 1\n", "line 1, column 2: the checkpoint state file does not have extensions"),
    ('model_checkpoint_path: "a\n', "line 1, column 24: "),
])
def test_a_state_file_that_does_not_parse_is_named_in_our_words(tmp_path, ck, text, want):
    (tmp_path / "checkpoint").write_text(text)
    for argv in (["state", tmp_path], ["inspect", tmp_path], ["prune", tmp_path]):
        code, out, err = ck(*argv)
        assert code == 1 and len(err.splitlines()) == 1, (argv, err)
        assert err.startswith(f"ckptool: error: {tmp_path / 'checkpoint'}: not a valid checkpoint state file: {want}")
        assert "ckptool.tf" not in err and "Message type" not in err and "CheckpointState" not in err
