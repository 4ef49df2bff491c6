"""Damaged and changing data files read through tf.train, run under real TensorFlow and under
``python -m ckptool.shim`` (tests/interop/test_tf_shim_surface.py compares the two):

    python damage_probe.py OUT.json PREFIX WORKDIR

Each case copies PREFIX's directory into WORKDIR, damages its data file (truncated, a bit
flipped, deleted) and reads every variable; then, in one process, one copy is replaced,
deleted, restored, truncated and repaired between calls of load_variable (which TF answers
from the files as they are at each call), beside a reader opened once (which keeps the
shard it has opened, as TF's does).
"""

# ruff: noqa: B023  (each lambda is called where it is made, inside its loop)

import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf

out, src, work = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
base = os.path.basename(src)
names = [n for n, _ in tf.train.list_variables(src)]


def err(e):
    d = {"raised": type(e).__name__, "str": str(e).replace(work, "<W>")}
    if isinstance(e, tf.errors.OpError):
        d["code"] = e.error_code
    return d


def show(v):
    a = np.asarray(v)
    return {"ok": [str(a.dtype), list(a.shape), [x.hex() for x in a.ravel()] if a.dtype == object else a.tobytes().hex()]}


def read(f):
    try:
        return show(f())
    except Exception as e:  # the probe records what is raised
        return err(e)


def data_file(p):
    return p + ".data-00000-of-00001"


res = {}
size = os.path.getsize(data_file(src))
cuts = sorted({0, 1, size // 2, size - 1, size - 4, size - 9, size - 20, size - 33, size - 50})
for kind, arg in [("trunc", c) for c in cuts] + [("flip", c) for c in cuts] + [("delete", 0)]:
    d = os.path.join(work, f"{kind}{arg}")
    shutil.copytree(os.path.dirname(src), d)
    p = os.path.join(d, base)
    raw = bytearray(open(data_file(p), "rb").read())
    if kind == "trunc":
        open(data_file(p), "wb").write(raw[:arg])
    elif kind == "flip":
        raw[arg] ^= 0x40
        open(data_file(p), "wb").write(raw)
    else:
        os.remove(data_file(p))
    res[f"{kind}{arg}"] = {n: read(lambda: tf.train.load_variable(p, n)) for n in names}

d = os.path.join(work, "live")
shutil.copytree(os.path.dirname(src), d)
p = os.path.join(d, base)
good = open(data_file(p), "rb").read()
held = tf.train.load_checkpoint(p)
for n in names:
    held.get_tensor(n)  # the held reader has its shard open from here on
steps = []


def replace():
    b = bytearray(good)
    b[-10] ^= 1
    b[20] ^= 1
    open(data_file(p) + ".tmp", "wb").write(b)
    os.replace(data_file(p) + ".tmp", data_file(p))


def step(label, action=None):
    if action:
        action()
    steps.append([label, {n: [read(lambda: tf.train.load_variable(p, n)), read(lambda: held.get_tensor(n)),
                              read(lambda: tf.compat.v1.train.NewCheckpointReader(p).get_tensor(n))]
                          for n in names}])


step("fresh")
step("replaced", replace)
step("deleted", lambda: os.remove(data_file(p)))
step("restored", lambda: open(data_file(p), "wb").write(good))
step("truncated_in_place", lambda: open(data_file(p), "r+b").truncate(len(good) // 3))
step("repaired_in_place", lambda: open(data_file(p), "r+b").write(good))
step("zeroed_in_place", lambda: open(data_file(p), "r+b").write(bytes(len(good))))
step("repaired_again", lambda: open(data_file(p), "r+b").write(good))
res["live"] = steps
with open(out, "w") as f:
    json.dump(res, f, indent=1, sort_keys=True)
