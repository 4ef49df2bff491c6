#!/usr/bin/env python
"""Write the moving-average fixtures in tests/data/ema/ with real TF, tf_keras and Keras 3.

    /work/tfvenv/bin/python tests/tf_fixtures/generate_ema.py [--out tests/data/ema]

``tf1/model.ckpt``
    a TF1 graph (two dense layers, a partitioned embedding, Adam) with
    ``tf.train.ExponentialMovingAverage(0.5)`` applied to the trainable variables, a few steps,
    saved by ``tf.compat.v1.train.Saver``: shadows named ``VAR/ExponentialMovingAverage``.
``tf_keras/ckpt``
    a tf_keras Sequential (Dense, BatchNormalization, Dense) trained with
    ``Adam(use_ema=True)``, ``model.save_weights`` (TF format): the averages are
    ``optimizer/_variables/1..6``, also the optimizer's ``_model_variables_moving_average``.
``tf_keras_ckpt/ckpt-1``
    the same model and optimizer through ``tf.train.Checkpoint(model=, optimizer=)``.
``keras3.keras``
    a Keras 3 model of the same shape trained with ``Adam(use_ema=True)``.
``expected.npz``
    the shadows' values as TF holds them: ``tf1/<var>`` (``ema.average(var)``), ``tf_keras/<i>``
    (``optimizer._model_variables_moving_average[i]``, model order), ``keras3/<i>``.
"""

import argparse
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

X = np.linspace(-1, 1, 32 * 4, dtype=np.float32).reshape(32, 4)
Y = np.sin(X[:, :2] * 3).astype(np.float32)


def _dense(x, n_in, n_out, name):
    with tf.compat.v1.variable_scope(name):
        w = tf.compat.v1.get_variable("kernel", (n_in, n_out))
        b = tf.compat.v1.get_variable("bias", (n_out,), initializer=tf.compat.v1.zeros_initializer())
    return tf.matmul(x, w) + b


def tf1(out, expected):
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(3)
        x = tf.compat.v1.placeholder(tf.float32, (None, 4))
        y = tf.compat.v1.placeholder(tf.float32, (None, 2))
        ids = tf.compat.v1.placeholder(tf.int32, (None,))
        emb = tf.compat.v1.get_variable("emb", (6, 4), partitioner=tf.compat.v1.fixed_size_partitioner(2))
        h = tf.nn.relu(_dense(x + tf.nn.embedding_lookup(emb, ids), 4, 5, "d1"))
        loss = tf.reduce_mean((_dense(h, 5, 2, "d2") - y) ** 2)
        step = tf.compat.v1.train.get_or_create_global_step()
        train = tf.compat.v1.train.AdamOptimizer(0.05).minimize(loss, global_step=step)
        ema = tf.compat.v1.train.ExponentialMovingAverage(0.5)
        with tf.control_dependencies([train]):
            op = ema.apply(tf.compat.v1.trainable_variables())
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            for _ in range(5):
                s.run(op, {x: X, y: Y, ids: np.arange(32) % 6})
            saver.save(s, os.path.join(out, "tf1", "model.ckpt"), write_meta_graph=False)
            for v in tf.compat.v1.trainable_variables():
                name = v.op.name.split("/part_")[0]
                value = s.run(ema.average(v))
                if "/part_" in v.op.name:  # a partitioned variable: its parts, concatenated as the reader shows it
                    expected.setdefault(f"tf1/{name}", []).append(value)
                else:
                    expected[f"tf1/{name}"] = value
    for k, v in list(expected.items()):
        if isinstance(v, list):
            expected[k] = np.concatenate(v, axis=0)


def tf_keras_model(tf_keras):
    tf_keras.utils.set_random_seed(4)
    m = tf_keras.Sequential([tf_keras.layers.Dense(5, activation="relu", input_shape=(4,)),
                             tf_keras.layers.BatchNormalization(), tf_keras.layers.Dense(2)])
    m.compile(optimizer=tf_keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5), loss="mse")
    return m


def tf_keras_files(out, expected):
    import tf_keras

    m = tf_keras_model(tf_keras)
    m.fit(X, Y, epochs=3, batch_size=8, verbose=0)
    m.save_weights(os.path.join(out, "tf_keras", "ckpt"))
    tf.train.Checkpoint(model=m, optimizer=m.optimizer).write(os.path.join(out, "tf_keras_ckpt", "ckpt-1"))
    for i, v in enumerate(m.optimizer._model_variables_moving_average):
        expected[f"tf_keras/{i}"] = v.numpy()


def keras3_file(out, expected):
    import keras

    keras.utils.set_random_seed(5)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5, activation="relu"),
                          keras.layers.BatchNormalization(), keras.layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5), loss="mse")
    m.fit(X, Y, epochs=3, batch_size=8, verbose=0)
    m.save(os.path.join(out, "keras3.keras"))
    for i, v in enumerate(m.optimizer._model_variables_moving_average):
        expected[f"keras3/{i}"] = np.asarray(v.numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "ema"))
    out = ap.parse_args().out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    expected = {}
    tf1(out, expected)
    tf_keras_files(out, expected)
    keras3_file(out, expected)
    np.savez(os.path.join(out, "expected.npz"), **expected)


if __name__ == "__main__":
    main()
