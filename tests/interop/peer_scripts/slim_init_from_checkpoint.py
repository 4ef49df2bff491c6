"""What a TF-slim / ``tf.compat.v1.train.init_from_checkpoint`` user's script does before
restoring (the pattern of slim's ``train_image_classifier.py`` ``_get_init_fn`` and of BERT's
``get_assignment_map_from_checkpoint``): list the checkpoint, build the assignment map of the
variables to restore (excluded scopes dropped, a scope renamed), check each with ``has_tensor``
and its shape, read them through ``NewCheckpointReader``; the values go to .npz.

    python slim_init_from_checkpoint.py CKPT OUT.npz EXCLUDE_SCOPE
"""

import collections
import re
import sys

import numpy as np
import tensorflow as tf

ckpt, out, exclude = sys.argv[1], sys.argv[2], sys.argv[3]
if tf.io.gfile.isdir(ckpt):
    ckpt = tf.train.latest_checkpoint(ckpt)
tf.compat.v1.logging.info("Fine-tuning from %s", ckpt)
init_vars = tf.train.list_variables(ckpt)
assignment_map = collections.OrderedDict()
for name, _shape in init_vars:
    if name.startswith(exclude) or "Adam" in name or name == "global_step":
        continue
    m = re.match(r"^(.*):\d+$", name)
    assignment_map[name] = "renamed/" + (m.group(1) if m else name)
reader = tf.compat.v1.train.NewCheckpointReader(ckpt)
shapes = reader.get_variable_to_shape_map()
values = {}
for old, new in assignment_map.items():
    if not reader.has_tensor(old):
        tf.compat.v1.logging.warning("%s not in checkpoint", old)
        continue
    v = reader.get_tensor(old)
    if list(np.shape(v)) != shapes[old]:
        raise ValueError(old)
    values[new.replace("/", "|")] = v
tf.compat.v1.logging.warning("Restoring %d of %d variables", len(values), len(init_vars))
print(reader.has_tensor("nope"), sorted(values)[:3])
np.savez(out, **values)
