"""``convert --to hf --force`` over an earlier export is all or nothing: killed (SIGKILL, by
tests/faultinject) just before and just after every call that changes the disk, the folder is the
old export whole, the new one whole, or has no ``config.json`` (so transformers does not load it);
never new shards under an old index or config, nor an old ``model.safetensors`` (which transformers
prefers) beside a new sharded export. A rerun then finishes the new export. transformers 5 judges the
same folders in tests/hf/test_transformers5.py."""

import hashlib
import json
import multiprocessing
import pathlib
import shutil
import sys
import uuid

import numpy as np
import pytest
from test_export import DATA, folder

import ckptool
from clirun import completed

FAULTS = pathlib.Path(__file__).resolve().parents[1] / "faultinject"
sys.path.insert(0, str(FAULTS))
import faults  # noqa: E402

NAME = "bert_pretraining"
CONFIG = DATA / NAME / "bert_config.json"


def sources(tmp):
    """The fixture's checkpoint (old) and one with every float weight changed (new), with a config
    of its own (``new_config.json``: another initializer_range)."""
    cfg = json.loads(CONFIG.read_text())
    (tmp / "new").mkdir()
    (tmp / "new" / "new_config.json").write_text(json.dumps(dict(cfg, initializer_range=0.5)))
    old = DATA / NAME / "model.ckpt"
    with ckptool.open(str(old)) as ck:
        values = {v.name: ck.read(v.name) for v in ck.variables()}
    new = {k: (v + 1).astype(v.dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
           for k, v in values.items()}
    ckptool.write(str(tmp / "new" / "model.ckpt"), new, sync=False)
    return str(old), str(tmp / "new" / "model.ckpt")


def args(src, out, shard):
    config = pathlib.Path(src).parent / "new_config.json"
    return ["convert", src, str(out), "--to", "hf", "--config", str(config if config.exists() else CONFIG),
            "--max-shard-size", shard, "--force"]


def forked(argv, spec="", log=""):
    ctx = multiprocessing.get_context("fork")
    out = pathlib.Path(log or "/dev/null").parent / f"child-{uuid.uuid4().hex[:8]}.out" if log else None
    p = ctx.Process(target=faults.run_armed, args=(argv, spec, log, str(out) if out else "/dev/null"))
    p.start()
    p.join(120)
    return p.exitcode


def state(out):
    """What transformers would load: None without config.json, else (config, {name: bytes digest}) of
    model.safetensors when present (transformers takes it first), else of the index's shards."""
    out = pathlib.Path(out)
    if not (out / "config.json").exists():
        return None
    if (out / "model.safetensors").exists():
        tensors = folder_single(out)
    else:
        tensors = folder(out)
    cfg = json.loads((out / "config.json").read_text())
    return cfg, {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() for k, v in tensors.items()}


def folder_single(out):
    from ckptool.ops.transform.convert.stfile import StFile

    with StFile(str(out / "model.safetensors")) as st:
        return {t.name: st.read(t.name) for t in st.tensors}


def sweep(tmp, old_shard, new_shard, on_state=None):
    """Kill the overwrite at every disk event; each result is old whole, new whole or unloadable."""
    old_src, new_src = sources(tmp)
    base = tmp / "old"
    assert completed(*args(old_src, base, old_shard)).returncode == 0
    want = tmp / "want"
    assert completed(*args(new_src, want, new_shard)).returncode == 0
    old_state, new_state = state(base), state(want)
    assert old_state[0] != new_state[0] and old_state[1] != new_state[1]
    log = tmp / "events.log"
    out = tmp / "count"
    shutil.copytree(base, out)
    assert forked(args(new_src, out, new_shard), "", str(log)) == 0
    assert state(out) == new_state
    n = sum(1 for line in log.read_text().splitlines() if line.split()[1:2] == ["fs"])
    assert n > 10
    seen = {"old": 0, "new": 0, "none": 0}
    for i in range(1, n + 1):
        for spec in (f"fs:{i}", f"fs+:{i}"):
            out = tmp / f"run-{spec.replace(':', '-').replace('+', 'p')}"
            shutil.copytree(base, out)
            code = forked(args(new_src, out, new_shard), spec)
            assert code == -9, (spec, code)
            got = state(out)
            kind = "old" if got == old_state else "new" if got == new_state else "none" if got is None else None
            assert kind is not None, (spec, sorted(p.name for p in out.iterdir()))
            seen[kind] += 1
            if on_state is not None:
                on_state(out, kind)
            assert completed(*args(new_src, out, new_shard)).returncode == 0, spec
            assert state(out) == new_state, spec
            shutil.rmtree(out)
    assert all(seen.values()), seen  # the kills fell before, inside and after the swap
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("old_shard, new_shard", [("2KB", "5GB"), ("5GB", "2KB"), ("2KB", "3KB")])
def test_an_overwrite_killed_anywhere_is_old_or_new_or_unloadable(old_shard, new_shard, tmp_path):
    sweep(tmp_path, old_shard, new_shard)


class _Killed(BaseException):
    pass


def _mem_state(fs, root):
    """state() of a memory:// folder, read through a local copy."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for path in fs.ls(root, detail=False):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if ".tempstate" not in name:
                pathlib.Path(d, name).write_bytes(fs.cat_file(path))
        return state(d)


@pytest.mark.parametrize("old_shard, new_shard", [("2KB", "5GB"), ("5GB", "2KB")])
def test_on_an_object_store_the_old_export_goes_before_any_new_file_appears(old_shard, new_shard, tmp_path,
                                                                             monkeypatch):
    """On an object store a file appears when its writer is closed (no renames): stopped before any
    close or delete, the folder is still old whole, new whole or without config.json."""
    import fsspec

    from ckptool.io.backends.remote import RemoteStorage
    from ckptool.io.safety.atomic import AtomicFile

    fs = fsspec.filesystem("memory")
    old_src, new_src = sources(tmp_path)
    root = f"memory://hf{uuid.uuid4().hex[:10]}"
    want = tmp_path / "want"
    assert completed(*args(new_src, want, new_shard)).returncode == 0
    new_state = state(want)
    seen = set()
    for stop in range(1, 80):
        fs.rm(root, recursive=True) if fs.exists(root) else None
        assert completed(*args(old_src, root, old_shard)).returncode == 0
        old_state = _mem_state(fs, root)
        assert old_state is not None and old_state[0]["initializer_range"] == 0.02
        count, snapshot = [0], []

        def event(real, count=count, stop=stop, snapshot=snapshot):
            def wrapped(*a, **k):
                for when in ("before", "after"):  # a kill just before the call, or just after it
                    count[0] += 1
                    if count[0] == stop:  # what a SIGKILL here leaves: no cleanup runs
                        snapshot.append(_mem_state(fs, root))
                        raise _Killed
                    if when == "before":
                        result = real(*a, **k)
                return result
            return wrapped

        with monkeypatch.context() as m:
            m.setattr(AtomicFile, "seal", event(AtomicFile.seal))
            m.setattr(RemoteStorage, "remove", event(RemoteStorage.remove))
            from ckptool.ops.transform.hf.export import convert_hf

            try:
                convert_hf(new_src, root, config=str(pathlib.Path(new_src).parent / "new_config.json"),
                           max_shard_size=new_shard, force=True)
                finished = True
            except _Killed:
                finished = False
        got = snapshot[0] if snapshot else _mem_state(fs, root)
        kind = "old" if got == old_state else "new" if got == new_state else "none" if got is None else None
        assert kind is not None, (stop, fs.ls(root, detail=False))
        seen.add(kind)
        if finished:
            break
    assert seen == {"old", "new", "none"}, seen
    fs.rm(root, recursive=True)
