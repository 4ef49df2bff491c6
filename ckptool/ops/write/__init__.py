"""Writing: V2 checkpoints TensorFlow restores (the streaming bundle writer with its atomic publish:
``writer``) and ``.safetensors`` files (``stwrite``). Imports ``read`` only.

The same concepts in the other layers: tensor values as a data file stores them and a safetensors
header: :mod:`ckptool.format` (``encode``, ``table_build``, ``safetensors_meta``); the atomic
publish itself: ``ckptool.io.safety.atomic``.
"""
