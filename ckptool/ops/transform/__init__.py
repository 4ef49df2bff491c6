"""Making new checkpoints from old ones: ``convert`` (the package :mod:`~ckptool.ops.transform.convert`:
its sources, targets and the Keras 3 bridge; a Hugging Face folder: :mod:`~ckptool.ops.transform.hf`),
rename and strip (``rewrite-names``: :mod:`~ckptool.ops.transform.rename`), save from arrays
(``save``, through ``sources``), average. The pure rules they share are codecs in format/: the cast
rules (``ckptool.format.cast``), the optimizer-slot table (``ckptool.format.slots``). Imports ``read``,
``write`` and ``retain`` (``save`` records its checkpoint as prune would)."""
