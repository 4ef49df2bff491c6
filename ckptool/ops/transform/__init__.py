"""Making new checkpoints from old ones: convert (sources, ``.safetensors`` files, casting a source
tensor), save from arrays, rename and strip (``rewrite-names``), average. The pure rules they share
are codecs in format/: the cast rules (``ckptool.format.cast``), the optimizer-slot table
(``ckptool.format.slots``). Imports ``read``, ``write`` and ``retain`` (``save`` records its
checkpoint as prune would)."""
