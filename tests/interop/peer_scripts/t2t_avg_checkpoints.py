"""The reading half of tensor2tensor's ``utils/avg_checkpoints.py``, making its calls: the last N
checkpoints from the state file, checked with ``checkpoint_exists`` (TF's deprecation notice),
every variable summed and divided (numpy), logged through ``tf.compat.v1.logging``; written as
.npz here (t2t writes a TF checkpoint with a Session, which the shim does not offer).

    python t2t_avg_checkpoints.py --prefix DIR --num_last_checkpoints N --output OUT.npz
"""

import argparse

import numpy as np
import tensorflow as tf

p = argparse.ArgumentParser()
p.add_argument("--prefix", required=True)
p.add_argument("--num_last_checkpoints", type=int, default=20)
p.add_argument("--output", required=True)
flags = p.parse_args()

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
checkpoint_state = tf.train.get_checkpoint_state(flags.prefix)
checkpoints = checkpoint_state.all_model_checkpoint_paths[-flags.num_last_checkpoints:]
checkpoints = [c for c in checkpoints if tf.compat.v1.train.checkpoint_exists(c)]
if not checkpoints:
    raise ValueError(f"None of the checkpoints exist: {checkpoints}")
var_list = tf.train.list_variables(checkpoints[0])
floats = tf.train.load_checkpoint(checkpoints[0]).get_variable_to_dtype_map()
var_values, var_dtypes = {}, {}
for name, shape in var_list:
    if not name.startswith("global_step") and floats[name].is_floating:
        var_values[name] = np.zeros(shape)
for checkpoint in checkpoints:
    reader = tf.train.load_checkpoint(checkpoint)
    for name in var_values:
        tensor = reader.get_tensor(name)
        var_dtypes[name] = tensor.dtype
        var_values[name] += tensor.astype(np.float64)
    tf.compat.v1.logging.info("Read from checkpoint %s", checkpoint)
for name in var_values:
    var_values[name] /= len(checkpoints)
np.savez(flags.output, **{n.replace("/", "|"): v.astype(var_dtypes[n]) for n, v in var_values.items()})
tf.compat.v1.logging.info("Averaged checkpoints saved in %s", flags.output)
