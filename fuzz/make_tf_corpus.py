"""Regenerate the small TF-written seed checkpoints under fuzz/corpus/ (needs TensorFlow).

    PYTHONPATH=. /path/to/tf/python fuzz/make_tf_corpus.py

Each one is a few hundred bytes to a few KB: a V2 bundle with several dtypes,
strings (empty and non-UTF-8) and a partitioned variable; a Saver(sharded=True)
bundle over two devices; and a legacy V1 single-file checkpoint.
"""

import os
import pathlib
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = pathlib.Path(__file__).parent / "corpus"


def v2_mixed(d):
    tf.compat.v1.reset_default_graph()
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.get_variable("f32", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
        tf.compat.v1.get_variable("i64", initializer=np.int64(-7))
        tf.compat.v1.get_variable("b16", initializer=tf.constant([1.5, -2.0], tf.bfloat16))
        tf.compat.v1.get_variable("c64", initializer=np.array([1 + 2j], np.complex64))
        tf.compat.v1.get_variable("flag", initializer=np.array([True, False]))
        tf.compat.v1.get_variable("empty", initializer=np.zeros((0, 2), np.float32))
        tf.Variable(tf.constant([b"", b"abc", b"\xff\x00z"]), name="strs")
        tf.compat.v1.get_variable("part", shape=[5, 2], dtype=tf.float32,
                                  initializer=tf.compat.v1.initializers.constant(3.0),
                                  partitioner=tf.compat.v1.fixed_size_partitioner(2))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            saver.save(s, str(d / "mixed"), write_meta_graph=False, write_state=False)


def v2_sharded(d):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            tf.compat.v1.get_variable("a", initializer=np.arange(4, dtype=np.int32))
        with tf.device("/cpu:1"):
            tf.compat.v1.get_variable("b", initializer=np.ones(3, np.float64))
        saver = tf.compat.v1.train.Saver(sharded=True)
        cfg = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
        with tf.compat.v1.Session(config=cfg) as s:
            s.run(tf.compat.v1.global_variables_initializer())
            saver.save(s, str(d / "sharded"), write_meta_graph=False, write_state=False)


def v1(d):
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.get_variable("w", initializer=np.arange(4, dtype=np.float32))
        tf.compat.v1.get_variable("s", initializer=np.int32(3))
        tf.Variable(tf.constant([b"x", b""]), name="t")
        saver = tf.compat.v1.train.Saver(write_version=tf.compat.v1.train.SaverDef.V1)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            saver.save(s, str(d / "v1.ckpt"), write_meta_graph=False, write_state=False)


def main():
    tf.compat.v1.disable_eager_execution()
    d = OUT / "tf"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    v2_mixed(d)
    v2_sharded(d)
    v1(d)
    for p in sorted(d.iterdir()):
        print(p.name, p.stat().st_size)


if __name__ == "__main__":
    main()
