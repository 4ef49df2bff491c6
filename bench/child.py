"""One measured operation, run in its own process by ``bench/run.py``.

    python bench/child.py OP ARGS...

Imports happen first and are not timed; the operation itself is timed with
``time.perf_counter`` and reported as one JSON line on stdout
(``{"seconds": ...}`` plus extras). The parent measures the wall time and the
peak RSS of the whole process (``os.wait4``). ``ck_*`` operations use
ckptool, ``tf_*`` TensorFlow (run with the TensorFlow venv's python).
"""

from __future__ import annotations

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _report(seconds: float, **extra) -> None:
    print(json.dumps({"seconds": seconds, **extra}))


# -- ckptool -----------------------------------------------------------------


def ck_read_all(prefix: str) -> None:
    from ckptool import open as ck_open  # ckptool imports lazily: resolve it before timing

    t0 = time.perf_counter()
    total = 0
    with ck_open(prefix) as ck:
        for v in ck.variables():
            total += ck.read(v.name).nbytes  # CRC checked (verify=True is the default)
    _report(time.perf_counter() - t0, bytes=total)


def ck_list(prefix: str) -> None:
    from ckptool import open as ck_open

    t0 = time.perf_counter()
    with ck_open(prefix) as ck:
        n = len(ck.variables())
    _report(time.perf_counter() - t0, variables=n)


def ck_write(out: str, n: str, elems: str, sync: str = "sync") -> None:
    """``ckptool.write``: durable by default (fsync before each rename); ``nosync`` skips
    the fsyncs, as TF's write does."""
    from workloads import big_arrays

    from ckptool import write

    arrays = dict(big_arrays(int(n), int(elems)))
    t0 = time.perf_counter()
    write(out, arrays, sync=sync == "sync")
    _report(time.perf_counter() - t0)


def raw_write(out: str, n: str, elems: str) -> None:
    """The floor for ``write``: the same bytes written raw to one fresh file, no fsync."""
    from workloads import big_arrays

    arrays = dict(big_arrays(int(n), int(elems)))
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    t0 = time.perf_counter()
    with open(out + ".raw", "xb") as f:
        for a in arrays.values():
            f.write(memoryview(a).cast("B"))
    _report(time.perf_counter() - t0)


def _warm(call, repeat: int = 3) -> tuple[float, float]:
    """``(cold, warm)``: the first call's time, then the best of ``repeat`` more (each
    call does the whole operation afresh: nothing is kept between calls)."""
    t0 = time.perf_counter()
    call()
    cold = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return cold, best


def ck_list_warm(prefix: str) -> None:
    """``ckptool.open(p).variables()``, opened afresh per call: warm = best of 3 after the first."""
    from ckptool import open as ck_open

    out = {}

    def call():
        with ck_open(prefix) as ck:
            out["n"] = len(ck.variables())

    cold, warm = _warm(call)
    _report(warm, cold=cold, variables=out["n"])


def ck_verify(prefix: str, workers: str = "0") -> None:
    """``verify`` of every byte, with ``workers`` threads (0: one per core)."""
    from ckptool import open as ck_open
    from ckptool.ops.inspect.verify import verify

    t0 = time.perf_counter()
    with ck_open(prefix) as ck:
        report = verify(ck, workers=int(workers) or None)
    _report(time.perf_counter() - t0, ok=report.ok, bytes=report.bytes)


# -- TensorFlow ----------------------------------------------------------------


def _tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


def tf_read_all(prefix: str) -> None:
    tf = _tf()
    t0 = time.perf_counter()
    reader = tf.train.load_checkpoint(prefix)
    total = 0
    for name in sorted(reader.get_variable_to_shape_map()):
        value = reader.get_tensor(name)  # BundleReader checks each tensor's CRC32C
        total += value.nbytes if hasattr(value, "nbytes") else len(value)  # a string scalar comes as bytes
    _report(time.perf_counter() - t0, bytes=total)


def tf_list(prefix: str) -> None:
    tf = _tf()
    t0 = time.perf_counter()
    n = len(tf.train.list_variables(prefix))
    _report(time.perf_counter() - t0, variables=n)


def tf_list_warm(prefix: str) -> None:
    """``tf.train.list_variables``: warm = best of 3 after the first (which pays TF's set-up)."""
    tf = _tf()
    out = {}

    def call():
        out["n"] = len(tf.train.list_variables(prefix))

    cold, warm = _warm(call)
    _report(warm, cold=cold, variables=out["n"])


def tf_write(out: str, n: str, elems: str) -> None:
    """tf.train.Checkpoint.write of the same arrays as tf.Variables; the second
    (warm, already traced) write is the one reported, the first as ``cold``."""
    tf = _tf()
    from workloads import big_arrays

    variables = {name.split("/")[0]: tf.Variable(a) for name, a in big_arrays(int(n), int(elems))}
    ckpt = tf.train.Checkpoint(**variables)
    t0 = time.perf_counter()
    ckpt.write(out + "-cold")
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    ckpt.write(out)
    _report(time.perf_counter() - t0, cold=cold)


def tf_write_obj(prefix: str, kind: str, n: str, elems: str) -> None:
    """An object-based workload: ``tf.train.Checkpoint(...).write(prefix)`` of ``n`` big
    variables (``kind`` "big": the arrays of big_arrays, as attributes ``layer_NNN``) or
    ``n`` small ones ("many": the values of many_spec in nested modules
    ``model.block_BBB.layer_LL.{kernel,bias,moving_mean,step}``)."""
    tf = _tf()
    from workloads import big_arrays, many_spec, obj_var_name

    if kind == "big":
        ckpt = tf.train.Checkpoint(**{name.split("/")[0]: tf.Variable(a) for name, a in big_arrays(int(n), int(elems))})
    else:
        model = tf.Module()
        for i, (_, value) in enumerate(many_spec(int(n))):
            block, layer, attr = obj_var_name(i)
            if not hasattr(model, block):
                setattr(model, block, tf.Module())
            b = getattr(model, block)
            if not hasattr(b, layer):
                setattr(b, layer, tf.Module())
            setattr(getattr(b, layer), attr, tf.Variable(value))
        ckpt = tf.train.Checkpoint(model=model)
    t0 = time.perf_counter()
    ckpt.write(prefix)
    _report(time.perf_counter() - t0)


def same_list(prefix: str, runs: str = "15") -> None:
    """Listing in one process, TF 2.21 and ckptool interleaved (the first call of each
    untimed), best of ``runs`` each: ckptool.open(p).variables() against both
    tf.train.list_variables(p) and tf.train.load_checkpoint(p).get_variable_to_shape_map(); the
    TF time reported is the faster of the two. Run with TF's python, ckptool on PYTHONPATH."""
    tf = _tf()
    from ckptool import open as ck_open

    def ck():
        with ck_open(prefix) as c:
            return len(c.variables())

    def tf_list():
        return len(tf.train.list_variables(prefix))

    def tf_map():
        return len(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())

    calls = [ck, tf_list, tf_map]
    counts = {f.__name__: f() for f in calls}
    best = {f.__name__: float("inf") for f in calls}
    for i in range(int(runs)):
        for f in calls if i % 2 == 0 else calls[::-1]:
            t0 = time.perf_counter()
            f()
            best[f.__name__] = min(best[f.__name__], time.perf_counter() - t0)
    _report(best["ck"], tf_seconds=min(best["tf_list"], best["tf_map"]), tf_list=best["tf_list"],
            tf_map=best["tf_map"], variables=counts["ck"], tf_variables=counts["tf_list"])


def raw_read(*paths: str) -> None:
    """The floor for reading: every byte of ``paths`` (files, or directories: their files) read
    in 8 MiB pieces, as cat would, bytes discarded."""
    files = []
    for p in paths:
        files += sorted(os.path.join(p, f) for f in os.listdir(p)) if os.path.isdir(p) else [p]
    buf = bytearray(8 << 20)
    t0 = time.perf_counter()
    total = 0
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                total += n
    _report(time.perf_counter() - t0, bytes=total)


def raw_s3_get(url: str, jobs: str = "8", mib: str = "8") -> None:
    """The floor for the object-store rows: every data file under the checkpoint's directory
    downloaded with s3fs in ``mib`` MiB ranged GETs, ``jobs`` in flight (bytes discarded).
    Imports included in the process time, as the ckptool side pays its own."""
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False)
    t0 = time.perf_counter()
    directory, base = url.rsplit("/", 1)
    ranges = []
    for path in sorted(fs.find(directory)):
        if path.rsplit("/", 1)[1].startswith(base + ".data-"):
            size, step = fs.size(path), int(mib) << 20
            ranges += [(path, s, min(size, s + step)) for s in range(0, size, step)]
    from concurrent.futures import ThreadPoolExecutor

    total = 0
    with ThreadPoolExecutor(int(jobs)) as ex:
        for data in ex.map(lambda r: fs.cat_file(r[0], start=r[1], end=r[2]), ranges):
            total += len(data)
    _report(time.perf_counter() - t0, bytes=total)


def tf_rename(src: str, out: str, mapfile: str) -> None:
    """TF's way to rename: read every tensor, write them all under new names (SaveV2)."""
    tf = _tf()
    with open(mapfile) as f:
        mapping = json.load(f)
    t0 = time.perf_counter()
    reader = tf.train.load_checkpoint(src)
    names = sorted(reader.get_variable_to_shape_map())
    tensors = [reader.get_tensor(n) for n in names]
    tf.raw_ops.SaveV2(prefix=out, tensor_names=[mapping.get(n, n) for n in names],
                      shape_and_slices=[""] * len(names), tensors=tensors)
    _report(time.perf_counter() - t0)


def tf_prune(directory: str, keep: str) -> None:
    """TF's only retention engine: CheckpointManager sweeps old checkpoints on save()."""
    tf = _tf()
    t0 = time.perf_counter()
    state = tf.train.get_checkpoint_state(directory)
    last = int(state.model_checkpoint_path.rsplit("-", 1)[1])
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(), directory, max_to_keep=int(keep))
    manager.save(checkpoint_number=last + 1)
    _report(time.perf_counter() - t0, kept=len(manager.checkpoints))


def ck_retention(n: str) -> None:
    """Retention decisions alone (no disk): ``n`` checkpoints a minute apart through what
    ``prune`` does with a state file, TF's manager recovery then the plan with
    max_to_keep 5 and keep_every_n_hours 1 (each step linear in ``n``)."""
    from ckptool.ops.retain.retention import Policy, plan, recover

    count = int(n)
    names = [f"ckpt-{i}" for i in range(count)]
    stamps = [1.0e9 + 60.0 * i for i in range(count)]
    now = stamps[-1] + 60.0
    t0 = time.perf_counter()
    got = recover(names, stamps, 1.0e9 - 1.0, now, steps=list(range(count)))
    decision = plan(got.managed, Policy(max_to_keep=5, keep_every_n_hours=1.0), got.last_preserved_timestamp, now)
    _report(time.perf_counter() - t0, deleted=len(decision.deleted))


def tf_import() -> None:
    t0 = time.perf_counter()
    _tf()
    _report(time.perf_counter() - t0)


OPS = {f.__name__: f for f in (ck_read_all, ck_list, ck_list_warm, ck_write, raw_write, ck_verify, tf_read_all, tf_list,
                               tf_list_warm, tf_write, tf_rename, tf_prune, tf_import, ck_retention, tf_write_obj,
                               raw_s3_get, same_list, raw_read)}

if __name__ == "__main__":
    OPS[sys.argv[1]](*sys.argv[2:])
