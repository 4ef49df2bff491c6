"""Drop-in stand-ins for the parts of other libraries' APIs that read checkpoints.

:mod:`ckptool.compat.tf` answers ``tf.train.list_variables``, ``load_variable``,
``load_checkpoint`` and friends as TensorFlow 2.21 does, without TensorFlow::

    import ckptool.compat.tf as tf

    for name, shape in tf.train.list_variables("runs/"):
        print(name, shape, tf.train.load_variable("runs/", name).dtype)

``python -m ckptool.shim SCRIPT`` runs an unchanged script with ``import tensorflow``
resolving to it.
"""
