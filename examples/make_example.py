"""Regenerate examples/keras_adam with real TensorFlow (not needed to use ckptool).

    pip install tensorflow-cpu==2.21.0 && python examples/make_example.py

A small Keras model trained a few steps with Adam, saved by a
CheckpointManager (max_to_keep=3) five times: an object-based checkpoint
directory with optimizer slots, a `checkpoint` state file with timestamps,
and two checkpoints already rotated out.
"""

import os
import shutil

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "keras_adam")


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    tf.random.set_seed(0)
    rng = np.random.default_rng(0)
    model = tf.keras.Sequential([
        tf.keras.Input((8,)),
        tf.keras.layers.Dense(16, activation="relu", name="hidden"),
        tf.keras.layers.Dense(2, name="logits"),
    ])
    opt = tf.keras.optimizers.Adam(1e-2)
    model.compile(optimizer=opt, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = rng.normal(size=(64, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt)
    manager = tf.train.CheckpointManager(ckpt, OUT, max_to_keep=3)
    for _ in range(5):
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)
        manager.save()
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
