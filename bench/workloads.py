"""The benchmark workloads: deterministic checkpoints built without TensorFlow.

Used by ``bench/run.py`` (full size, under ``bench/work/``) and by
``tests/test_bench_smoke.py`` (toy size, in a temporary directory). Only
numpy is imported at module level, so the TensorFlow child processes of the
harness can import :func:`big_arrays` to write the very same arrays.

Every builder is idempotent: it writes a ``.built.json`` marker holding its
parameters last, and skips the work when a matching marker is present.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np

MARKER = ".built.json"

#: Full-size parameters (the issue's workloads).
FULL = {
    "big_tensors": 128,  # 128 float32 tensors ...
    "big_elems": 2 * 1024 * 1024,  # ... of 8 MiB each: 1 GiB
    "many": 20_000,  # small variables
    "dir_ckpts": 10_000,  # checkpoints in one directory
    "runs": 1_000,  # run directories ...
    "runs_ckpts": 20,  # ... of 20 checkpoints each
    "list_sizes": (20_000, 300_000),  # listing rows (issues 21, 42)
    "stats_sizes": (5_000, 20_000, 80_000),  # statistics rows: linear in variables
    "big_shards": 8,  # the verify-on-every-core row: the 1 GiB in 8 shards
    "retention_sizes": (1_000, 10_000, 100_000),  # retention decisions: linear in checkpoints
    "s3_tensors": 64,  # the object-store rows: 64 float32 tensors ...
    "s3_elems": 1024 * 1024,  # ... of 4 MiB: 256 MiB
    "obj_many": 20_000,  # object-based variables (written with tf.train.Checkpoint)
    "s3_big_bytes": 8 << 30,  # the object store at scale: 8 GiB ...
    "s3_big_shards": 64,  # ... in 64 data shards (sparse files: no disk used)
}

#: ``--quick``: the same shapes of work, about a tenth the size.
QUICK = {
    "big_tensors": 16,
    "big_elems": 2 * 1024 * 1024,  # 128 MiB
    "many": 2_000,
    "dir_ckpts": 1_000,
    "runs": 100,
    "runs_ckpts": 20,
    "list_sizes": (2_000, 20_000),
    "stats_sizes": (500, 2_000, 8_000),
    "big_shards": 8,
    "retention_sizes": (1_000, 10_000, 100_000),
    "s3_tensors": 16,
    "s3_elems": 1024 * 1024,  # 64 MiB
    "obj_many": 2_000,
    "s3_big_bytes": 512 << 20,
    "s3_big_shards": 64,
}

#: Toy sizes for the smoke test.
TOY = {
    "big_tensors": 3,
    "big_elems": 1024,
    "many": 50,
    "dir_ckpts": 12,
    "runs": 4,
    "runs_ckpts": 5,
    "list_sizes": (40, 60),
    "stats_sizes": (20, 40, 80),
    "big_shards": 2,
    "retention_sizes": (10, 100),
    "s3_tensors": 4,
    "s3_elems": 1024,
    "obj_many": 40,
    "s3_big_bytes": 4 << 20,
    "s3_big_shards": 4,
}

#: Epoch of the synthetic step times (2026-01-01T00:00:00Z) and the step spacing.
T0 = 1_767_225_600.0
STEP_SECONDS = 600.0


def big_name(i: int) -> str:
    return f"layer_{i:03d}/kernel"


def big_shape(elems: int) -> tuple[int, ...]:
    return (elems // 1024, 1024) if elems >= 1024 and elems % 1024 == 0 else (elems,)


def big_array(i: int, elems: int) -> np.ndarray:
    """Tensor ``i`` of the big checkpoint: float32, deterministic, not compressible."""
    rng = np.random.default_rng(1000 + i)
    return rng.random(elems, dtype=np.float32).reshape(big_shape(elems))


def big_arrays(n: int, elems: int):
    """``(name, array)`` pairs of the big checkpoint, generated one at a time."""
    for i in range(n):
        yield big_name(i), big_array(i, elems)


def many_spec(n: int):
    """``(name, array)`` pairs of the many-small-variables checkpoint."""
    for i in range(n):
        block, layer = divmod(i, 100)
        kind = i % 4
        base = f"model/block_{block:03d}/layer_{layer:02d}"
        if kind == 0:
            yield f"{base}/kernel", np.full((4, 4), i, dtype=np.float32)
        elif kind == 1:
            yield f"{base}/bias", np.full((4,), i, dtype=np.float32)
        elif kind == 2:
            yield f"{base}/moving_mean", np.full((8,), i, dtype=np.float64)
        else:
            yield f"{base}/step", np.array(i, dtype=np.int64)


def obj_spec(n: int):
    """``(key, array)`` pairs of an object-based checkpoint with the values of :func:`many_spec`:
    ``model/block_BBB/layer_LL/{kernel,bias,moving_mean,step}/.ATTRIBUTES/VARIABLE_VALUE`` (the
    keys tf.train.Checkpoint(model=...) gives nested modules; ckptool.write adds the object graph
    TF would), so that thousands of objects share one parent (``model``'s blocks)."""
    for i, (_, value) in enumerate(many_spec(n)):
        block, layer, kind = obj_var_name(i)
        yield f"model/{block}/{layer}/{kind}/.ATTRIBUTES/VARIABLE_VALUE", value


def _marker_ok(path: str, params: dict) -> bool:
    try:
        with open(os.path.join(path, MARKER)) as f:
            return json.load(f) == params
    except (OSError, ValueError):
        return False


def _fresh(path: str) -> None:
    if os.path.lexists(path):
        shutil.rmtree(path)
    os.makedirs(path)


def _mark(path: str, params: dict) -> None:
    with open(os.path.join(path, MARKER), "w") as f:
        json.dump(params, f)


def build_big(root: str, n: int, elems: int, num_shards: int = 1) -> str:
    """``root/ckpt``: ``n`` float32 tensors of ``elems`` elements in ``num_shards`` data
    files. Returns the prefix."""
    import ckptool

    params = {"kind": "big", "n": n, "elems": elems}
    if num_shards != 1:
        params["shards"] = num_shards
    prefix = os.path.join(root, "ckpt")
    if not _marker_ok(root, params):
        _fresh(root)
        ckptool.write(prefix, big_arrays(n, elems), num_shards=num_shards, sync=False)
        _mark(root, params)
    return prefix


def build_many(root: str, n: int) -> str:
    """``root/ckpt``: ``n`` small variables (float32/float64/int64, scalars included)."""
    import ckptool

    params = {"kind": "many", "n": n}
    prefix = os.path.join(root, "ckpt")
    if not _marker_ok(root, params):
        _fresh(root)
        ckptool.write(prefix, many_spec(n), sync=False)
        _mark(root, params)
    return prefix


def build_obj_keys(root: str, n: int) -> str:
    """``root/ckpt``: ``n`` small variables, object-based (:func:`obj_spec`), written by ckptool."""
    import ckptool

    params = {"kind": "obj_keys", "n": n}
    prefix = os.path.join(root, "ckpt")
    if not _marker_ok(root, params):
        _fresh(root)
        ckptool.write(prefix, obj_spec(n), sync=False)
        _mark(root, params)
    return prefix


def _template() -> dict[str, bytes]:
    """The files of one tiny checkpoint (a step scalar), by suffix. A bundle's
    files do not mention its prefix, so copies under other names are valid."""
    import tempfile

    import ckptool

    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "tpl")
        ckptool.write(prefix, {"global_step": np.array(7, dtype=np.int64),
                               "w": np.arange(4, dtype=np.float32)}, sync=False)
        out = {}
        for name in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, name), "rb") as f:
                out[name[len("tpl"):]] = f.read()
    return out


def _state_text(names: list[str], times: list[float]) -> str:
    """A ``checkpoint`` state file (CheckpointState, protobuf text format), relative paths."""
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{n}"' for n in names]
    lines += [f"all_model_checkpoint_timestamps: {t:.6f}" for t in times]
    lines.append(f"last_preserved_timestamp: {times[0] - STEP_SECONDS:.6f}")
    return "\n".join(lines) + "\n"


def _write_run(d: str, steps: range, files: dict[str, bytes]) -> None:
    """Checkpoints ``ckpt-<step>`` in ``d`` with mtimes and a state file as CheckpointManager leaves them."""
    os.makedirs(d, exist_ok=True)
    names, times = [], []
    for step in steps:
        t = T0 + step * STEP_SECONDS
        for suffix, data in files.items():
            path = os.path.join(d, f"ckpt-{step}{suffix}")
            with open(path, "wb") as f:
                f.write(data)
            os.utime(path, (t, t))
        names.append(f"ckpt-{step}")
        times.append(t)
    with open(os.path.join(d, "checkpoint"), "w") as f:
        f.write(_state_text(names, times))


def build_ckpt_dir(root: str, n: int) -> str:
    """``root/run``: one directory of ``n`` checkpoints ``ckpt-1`` .. ``ckpt-n``. Returns it."""
    params = {"kind": "dir", "n": n}
    run = os.path.join(root, "run")
    if not _marker_ok(root, params):
        _fresh(root)
        files = _template()
        _write_run(run, range(1, n + 1), files)
        _mark(root, params)
    return run


def build_runs(root: str, dirs: int, per: int) -> str:
    """``root/runs``: ``dirs`` run directories (two levels deep) of ``per`` checkpoints each."""
    params = {"kind": "runs", "dirs": dirs, "per": per}
    top = os.path.join(root, "runs")
    if not _marker_ok(root, params):
        _fresh(root)
        files = _template()
        for i in range(dirs):
            d = os.path.join(top, f"exp_{i // 50:02d}", f"trial_{i:04d}")
            _write_run(d, range(1000, 1000 + per * 100, 100), files)
        _mark(root, params)
    return top


def build_s3(root: str, n: int, elems: int) -> str:
    """``root/bkt/run/ckpt``: the object-store rows' checkpoint (``n`` float32 tensors of
    ``elems``), under a directory that ``bench/s3server.py ROOT`` serves as bucket ``bkt``.
    Returns its URL, ``s3://bkt/run/ckpt``."""
    build_big(os.path.join(root, "bkt", "run"), n, elems)
    return "s3://bkt/run/ckpt"


def build_sparse(root: str, nbytes: int, num_shards: int, tensor_bytes: int = 32 << 20) -> str:
    """``root/ckpt``: ``nbytes`` of float32 zeros in ``num_shards`` data files, tensors of
    ``tensor_bytes``, written cheaply: each data file is a sparse file of its size (a hole
    that reads as zeros, no disk used) and the index is built directly, every entry with the
    CRC32C of its zeros. A valid checkpoint TF reads; for the object-store row at scale."""
    from ckptool.format import bundle, dtypes
    from ckptool.format.coding import crc32c, mask_crc
    from ckptool.format.table_build import TableBuilder

    params = {"kind": "sparse", "bytes": nbytes, "shards": num_shards, "tensor": tensor_bytes}
    prefix = os.path.join(root, "ckpt")
    if _marker_ok(root, params):
        return prefix
    _fresh(root)
    per_shard = max(1, nbytes // num_shards // tensor_bytes)
    tensor_bytes = min(tensor_bytes, nbytes // num_shards)
    crc = mask_crc(crc32c(bytes(tensor_bytes)))
    entries = []
    for shard in range(num_shards):
        with open(bundle.data_filename(prefix, shard, num_shards), "wb") as f:
            f.truncate(per_shard * tensor_bytes)
        for k in range(per_shard):
            entries.append((f"t{shard:03d}_{k:04d}".encode(),
                            bundle.encode_entry(dtypes.BY_NAME["float32"], (tensor_bytes // 4,), shard,
                                                k * tensor_bytes, tensor_bytes, crc)))
    with open(prefix + ".index", "wb") as f:
        table = TableBuilder(f)
        table.add(bundle.HEADER_KEY, bundle.encode_header(num_shards))
        for key, value in sorted(entries):
            table.add(key, value)
        table.finish()
    _mark(root, params)
    return prefix


def obj_var_name(i: int) -> tuple[str, str, str]:
    """``(block, layer, kind)`` of object-based variable ``i`` (the shapes of many_spec)."""
    block, layer = divmod(i, 100)
    return f"block_{block:03d}", f"layer_{layer:02d}", ("kernel", "bias", "moving_mean", "step")[i % 4]


def build_obj(root: str, kind: str, n: int, elems: int, tf_python: str | None) -> str | None:
    """``root/ckpt``: an object-based checkpoint written by ``tf.train.Checkpoint.write``
    (with ``tf_python``: bench/child.py tf_write_obj): ``kind`` "big", ``n`` float32
    variables of ``elems`` (the arrays of :func:`big_arrays`), or "many", ``n`` small
    variables (the values of :func:`many_spec`) nested in dicts. None without TensorFlow."""
    params = {"kind": f"obj_{kind}", "n": n, "elems": elems}
    prefix = os.path.join(root, "ckpt")
    if _marker_ok(root, params):
        return prefix
    if not tf_python:
        return None
    import subprocess

    _fresh(root)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    child = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")
    subprocess.run([tf_python, child, "tf_write_obj", prefix, kind, str(n), str(elems)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    _mark(root, params)
    return prefix


def copy_tree(src: str, dst: str) -> None:
    """A fresh copy of a workload directory (for destructive operations), mtimes kept."""
    if os.path.lexists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


def build_all(work: str, sizes: dict, tf_python: str | None = None) -> dict[str, str]:
    """Build (or reuse) every workload under ``work``; the paths the harness measures (the
    object-based ones need ``tf_python``: absent without it and not built before)."""
    os.makedirs(work, exist_ok=True)
    obj = {"obj_big": build_obj(os.path.join(work, "obj_big"), "big", sizes["big_tensors"], sizes["big_elems"],
                                tf_python),
           "obj_many": build_obj(os.path.join(work, "obj_many"), "many", sizes["obj_many"], 0, tf_python)}
    return {
        **{k: v for k, v in obj.items() if v is not None},
        "s3_root": os.path.join(work, "s3"),
        "s3": build_s3(os.path.join(work, "s3"), sizes["s3_tensors"], sizes["s3_elems"]),
        "s3_big": (build_sparse(os.path.join(work, "s3", "bkt", "big"), sizes["s3_big_bytes"], sizes["s3_big_shards"])
                   and "s3://bkt/big/ckpt"),
        "big": build_big(os.path.join(work, "big"), sizes["big_tensors"], sizes["big_elems"]),
        "many": build_many(os.path.join(work, "many"), sizes["many"]),
        "dir": build_ckpt_dir(os.path.join(work, "dir"), sizes["dir_ckpts"]),
        "runs": build_runs(os.path.join(work, "runs"), sizes["runs"], sizes["runs_ckpts"]),
        "big_sharded": build_big(os.path.join(work, "big_sharded"), sizes["big_tensors"], sizes["big_elems"],
                                 sizes["big_shards"]),
        **{f"many_{n}": build_many(os.path.join(work, f"many_{n}"), n)
           for n in sorted(set(sizes["list_sizes"]) | set(sizes["stats_sizes"]))},
    }
