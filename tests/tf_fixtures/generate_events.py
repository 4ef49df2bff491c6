#!/usr/bin/env python
"""Write the TF-made event-file fixtures in tests/data/events/ with real TensorFlow.

    PYTHONPATH=$PWD /work/tfvenv/bin/python tests/tf_fixtures/generate_events.py [--out tests/data/events]

Two runs, each made by its own subprocess (TF1 needs graph mode):

``tf1/``
    ``tf.compat.v1.summary.FileWriter`` in graph mode: the run directory gets
    ``loss`` and ``learning_rate`` (Summary protos with ``simple_value``, one
    written by a ``tf.compat.v1.summary.scalar`` op run in a session) and the
    graph; ``eval/`` gets ``loss`` and ``accuracy`` from two writers one after
    the other (a restarted evaluator: the second rewrites step 600).
``tf2/``
    ``tf.summary.create_file_writer`` in eager mode: ``tf.summary.scalar``
    (float32 tensor summaries with the scalars plugin's metadata) ``loss`` in the
    run directory and in ``eval/``; ``accuracy`` in ``eval/`` as a raw float64
    ``tf.summary.write``; a string and a 5-element tensor summary (not scalars).

Each run directory gets ``expected.json``: for every event file (path relative
to the run directory) the scalars TF's own ``summary_iterator`` reads from it,
as ``[tag, step, value, wall_time]`` in file order (tensor summaries through
``tf.make_ndarray``).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "events"))
GEN_ROOT = "/tmp/ckptool-events-gen"

STEPS = list(range(100, 1100, 100))
# eval loss per step: a minimum at 700 tied with 300 (ties go to the newer), max accuracy at 900
EVAL_LOSS = [0.9, 0.7, 0.4, 0.6, 0.5, 0.45, 0.4, 0.55, 0.41, 0.6]
ACCURACY = [0.1, 0.3, 0.5, 0.4, 0.6, 0.65, 0.7, 0.72, 0.8, 0.75]
TRAIN_LOSS = [1.0, 0.8, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3, 0.28, 0.25]
RESTART_600 = 0.3  # the restarted evaluator's step-600 value, written last


def tf1(out):
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        lr = v1.placeholder(tf.float32, [], name="lr")
        lr_summary = v1.summary.scalar("learning_rate", lr)
        with v1.Session(graph=graph) as sess:
            w = v1.summary.FileWriter(out, graph=graph)
            for step, loss in zip(STEPS, TRAIN_LOSS):
                w.add_summary(v1.Summary(value=[v1.Summary.Value(tag="loss", simple_value=loss)]), step)
                w.add_summary(sess.run(lr_summary, {lr: 0.1 / (1 + step / 1000)}), step)
            w.close()
    ev = os.path.join(out, "eval")
    first = v1.summary.FileWriter(ev, filename_suffix=".a")
    for step, loss, acc in list(zip(STEPS, EVAL_LOSS, ACCURACY))[:6]:
        first.add_summary(v1.Summary(value=[v1.Summary.Value(tag="loss", simple_value=loss),
                                            v1.Summary.Value(tag="accuracy", simple_value=acc)]), step)
    first.close()
    second = v1.summary.FileWriter(ev, filename_suffix=".b")
    second.add_summary(v1.Summary(value=[v1.Summary.Value(tag="loss", simple_value=RESTART_600)]), 600)
    for step, loss, acc in list(zip(STEPS, EVAL_LOSS, ACCURACY))[6:]:
        second.add_summary(v1.Summary(value=[v1.Summary.Value(tag="loss", simple_value=loss),
                                             v1.Summary.Value(tag="accuracy", simple_value=acc)]), step)
    second.close()


def _scalar(name, data, step):
    """``tf.summary.scalar`` as TensorBoard defines it (tensorboard/plugins/scalar/summary_v2.py):
    a float32 tensor summary with the "scalars" plugin's metadata (ScalarPluginData version 0,
    empty content), through TF's own ``tf.summary.write``. (The TF venv has no TensorBoard, which
    ``tf.summary.scalar`` needs; the bytes written are the same.)"""
    import tensorflow as tf

    meta = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))
    return tf.summary.write(tag=name, tensor=tf.cast(data, tf.float32), step=step, metadata=meta)


def tf2(out):
    import tensorflow as tf

    train = tf.summary.create_file_writer(out)
    with train.as_default():
        for step, loss in zip(STEPS, TRAIN_LOSS):
            _scalar("loss", loss, step=step)
        tf.summary.write("note", tf.constant("not a scalar"), step=0)
    train.close()
    ev = tf.summary.create_file_writer(os.path.join(out, "eval"))
    with ev.as_default():
        for step, loss, acc in zip(STEPS, EVAL_LOSS, ACCURACY):
            _scalar("loss", loss, step=step)
            tf.summary.write("accuracy", tf.constant(acc, tf.float64), step=step)  # a raw float64 one
            tf.summary.write("weights", tf.linspace(0.0, 1.0, 5) * loss, step=step)  # not a scalar
    ev.close()


def expected(run):
    import tensorflow as tf

    out = {}
    for d, _, files in os.walk(run):
        for f in sorted(files):
            if not f.startswith("events.out.tfevents."):
                continue
            path = os.path.join(d, f)
            rows = []
            for e in tf.compat.v1.train.summary_iterator(path):
                for v in e.summary.value:
                    kind = v.WhichOneof("value")
                    if kind == "simple_value":
                        rows.append([v.tag, e.step, float(v.simple_value), e.wall_time])
                    elif kind == "tensor":
                        a = tf.make_ndarray(v.tensor)
                        if a.size == 1 and a.dtype.kind in "fiub":
                            rows.append([v.tag, e.step, float(a.reshape(())), e.wall_time])
            out[os.path.relpath(path, run)] = rows
    return out


RUNS = {"tf1": tf1, "tf2": tf2}


def run_one(name, out_root):
    gen = os.path.join(GEN_ROOT, name)
    shutil.rmtree(gen, ignore_errors=True)
    os.makedirs(gen)
    RUNS[name](gen)
    dst = os.path.join(out_root, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(gen, dst)
    shutil.rmtree(gen)
    with open(os.path.join(dst, "expected.json"), "w") as f:
        json.dump({"files": expected(dst), "tf_version": __import__("tensorflow").__version__}, f, indent=1,
                  sort_keys=True)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    names = args.only or list(RUNS)
    if args.in_process:
        run_one(names[0], args.out)
        return 0
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    rc = 0
    for n in names:
        print(f"[generate_events] {n}", file=sys.stderr, flush=True)
        rc |= subprocess.call([sys.executable, os.path.abspath(__file__), "--in-process", "--only", n,
                               "--out", args.out], env=env)
    return rc


if __name__ == "__main__":
    sys.exit(main())
