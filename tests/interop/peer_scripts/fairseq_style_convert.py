"""A TF-to-fairseq/PyTorch converter's calls (the pattern of the TF-to-PyTorch converters around
fairseq and its peers): every variable of a checkpoint with its dtype map, bfloat16 ones cast to
float32 with ``tf.cast(...).numpy()``, names mapped to a PyTorch state dict and saved with torch.

    python fairseq_style_convert.py CKPT OUT.pt
"""

import sys

import numpy as np
import tensorflow as tf
import torch

ckpt, out = sys.argv[1], sys.argv[2]
reader = tf.train.load_checkpoint(ckpt)
dtypes = reader.get_variable_to_dtype_map()
state = {}
for name, shape in tf.train.list_variables(ckpt):
    dt = dtypes[name]
    if dt == tf.string or not (dt.is_floating or dt.is_integer):
        continue
    value = np.asarray(tf.train.load_variable(ckpt, name))
    if dt == tf.bfloat16 or dt.is_floating and dt != tf.float32:
        value = tf.cast(value, tf.float32).numpy()
    key = name.replace("/", ".").replace("kernel", "weight")
    state[key] = torch.from_numpy(value.T.copy() if name.endswith("kernel") else value.copy())
    print(f"{name} {dt.name} {shape} -> {key}")
torch.save(state, out)
print(tf.__version__, len(state))
