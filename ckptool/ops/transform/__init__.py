"""Making new checkpoints from old ones: convert (sources, ``.safetensors`` files, casts), save from
arrays, rename and strip (``rewrite-names``), average, and the optimizer-slot table they share.
Imports ``read``, ``write`` and ``retain`` (``save`` records its checkpoint as prune would)."""
