"""An OpenNMT-py-style converter from a TF checkpoint (``tools/convert_*`` scripts of OpenNMT-py and
the like): finds the checkpoint with ``tf.io.gfile.glob``, reads the vocabulary through
``tf.io.gfile.GFile``, each weight with ``tf.compat.v1.train.load_variable``; prints what it maps
and saves .npz.

    python opennmt_py_tf_convert.py DIR VOCAB OUT.npz
"""

import os
import sys

import numpy as np
import tensorflow as tf

directory, vocab_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
indexes = sorted(tf.io.gfile.glob(os.path.join(directory, "*.index")))
prefix = indexes[-1][: -len(".index")]
with tf.io.gfile.GFile(vocab_path) as f:
    vocab = [line.rstrip("\n") for line in f]
names = [n for n, _ in tf.compat.v1.train.list_variables(prefix)]
weights = {}
for n in names:
    if "embedding" in n or "kernel" in n or "bias" in n:
        weights[n.replace("/", "|")] = tf.compat.v1.train.load_variable(prefix, n)
print(os.path.basename(prefix), len(vocab), vocab[:2], len(weights), tf.version.VERSION)
np.savez(out, **weights)
