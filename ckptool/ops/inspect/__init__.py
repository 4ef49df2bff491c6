"""Looking inside checkpoints without changing them: the summary and directory state (``summary``),
tensor values as JSON (``values``), statistics (``stats``), the object tree (``tree``), ``diff``,
verification of one checkpoint or a tree of them (``verify``, ``verify_tree``) and a Keras series
(``series_view``). Imports ``read`` only.

The same concepts in the other layers: what is read and how: :mod:`ckptool.ops.read`; the bytes
checked (CRCs, tilings): :mod:`ckptool.format` (``tensors``, ``slices``); the tree walked:
``ckptool.io.layout.walk``.
"""
