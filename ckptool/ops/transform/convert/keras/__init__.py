"""The Keras 3 bridge: ``convert --template`` (or a ``.weights.h5``/``.keras`` DST) between a Keras 2
TF checkpoint and a Keras 3 file, both ways.

:mod:`~ckptool.ops.transform.convert.keras.bridge` checks the options and writes the output;
:mod:`~ckptool.ops.transform.convert.keras.mapping` pairs the variables by structure, with the
layer order of :mod:`~ckptool.ops.transform.convert.keras.order` and the optimizer state of
:mod:`~ckptool.ops.transform.convert.keras.optim`; without a template,
:mod:`~ckptool.ops.transform.convert.keras.synth` lays out a ``.weights.h5`` from a SavedModel's
``keras_metadata.pb``; ``--ema`` reads through :mod:`~ckptool.ops.transform.convert.keras.averaged_weights`.
"""
