"""``convert``: a checkpoint, ``.safetensors``, ``.npz`` or ``.npy`` source written as another format.

What it reads is a list of specs (:mod:`~ckptool.ops.read.source`; a ``.safetensors``
file: :mod:`~ckptool.ops.read.stfile`), seen through ``--ema`` or
``--strip-optimizer`` (:mod:`~ckptool.ops.transform.convert.averaged`) and cast as asked
(:mod:`~ckptool.ops.transform.convert.cast`). :mod:`~ckptool.ops.transform.convert.run` checks the
options and writes a TF checkpoint, ``.npz`` (:mod:`~ckptool.ops.transform.convert.to_npz`) or
``.safetensors`` (:mod:`~ckptool.ops.transform.convert.to_safetensors`); the format follows DST's
suffix (:mod:`~ckptool.ops.transform.convert.formats`, a suffix one slip away refused by
:mod:`~ckptool.ops.transform.convert.dst_suffix`). A Keras 3 file is the bridge's, both ways
(:mod:`~ckptool.ops.transform.convert.keras`); a Hugging Face folder (``--to hf``) is
:mod:`ckptool.ops.transform.hf`'s, which reads the same sources.
"""
