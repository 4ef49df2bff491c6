"""The reading half of OpenNMT-tf's ``onmt-average-checkpoints`` (``opennmt/utils/checkpoint.py``
``average_checkpoints``), making its calls: the state file's newest ``max_count`` checkpoints,
``tf.train.load_checkpoint(...).get_variable_to_shape_map()`` / ``get_variable_to_dtype_map()``,
a running average, the output directory made with ``tf.io.gfile``; written as .npz here.

    python opennmt_average.py MODEL_DIR OUTPUT_DIR MAX_COUNT
"""

import os
import sys

import numpy as np
import tensorflow as tf

model_dir, output_dir, max_count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if model_dir == output_dir:
    raise ValueError("Model and output directory must be different")
checkpoints_path = tf.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths
if len(checkpoints_path) > max_count:
    checkpoints_path = checkpoints_path[-max_count:]
num_checkpoints = len(checkpoints_path)
tf.get_logger().info("Averaging %d checkpoints...", num_checkpoints)
avg = {}
for i, checkpoint_path in enumerate(checkpoints_path):
    tf.get_logger().info("Reading checkpoint %s...", checkpoint_path)
    reader = tf.train.load_checkpoint(checkpoint_path)
    dtypes = reader.get_variable_to_dtype_map()
    for name in sorted(reader.get_variable_to_shape_map()):
        if not dtypes[name].is_floating or name.startswith(("_CHECKPOINTABLE", "save_counter")):
            continue
        value = reader.get_tensor(name)
        avg[name] = value / num_checkpoints if i == 0 else avg[name] + value / num_checkpoints
if not tf.io.gfile.exists(output_dir):
    tf.io.gfile.makedirs(output_dir)
latest = tf.train.latest_checkpoint(model_dir)
out = os.path.join(output_dir, os.path.basename(latest) + ".npz")
np.savez(out, **{n.replace("/", "|"): v for n, v in avg.items()})
print(sorted(tf.io.gfile.listdir(output_dir)), tf.io.gfile.isdir(output_dir), len(avg))
