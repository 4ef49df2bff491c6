"""A whole tf_keras model as a Keras 3 ``.keras`` file, without its code (``convert model_dir/
model.keras``): :mod:`~ckptool.ops.transform.convert.keras.whole.model_config` reads what tf_keras recorded
of the model (a SavedModel's ``keras_metadata.pb``, a tf_keras ``.h5`` model's ``model_config``, or
``--template-config``) and translates it with
:mod:`ckptool.format.keras2_config` (lookup layers' vocabularies from the SavedModel's ``assets/``:
:mod:`~ckptool.ops.transform.convert.keras.whole.vocab`); a tf_keras whole-model ``.h5``
(``model.save("model.h5")``, read by :mod:`ckptool.ops.read.keras_legacy`) stands for the object graph
:mod:`~ckptool.ops.transform.convert.keras.whole.h5_source` builds from its ``weight_names``;
:mod:`~ckptool.ops.transform.convert.keras.whole.write` writes the zip, whose weights are laid out by
:mod:`~ckptool.ops.transform.convert.keras.synth`."""
