"""Making new checkpoints from old ones: ``convert`` (the package :mod:`~ckptool.ops.transform.convert`:
its targets and the Keras 3 bridge; a Hugging Face folder: :mod:`~ckptool.ops.transform.hf`, whose
one weight-map engine is ``hf.weightmap``), rename and strip (``rewrite-names``:
:mod:`~ckptool.ops.transform.rename`), save from arrays (``save``), average. Imports ``read``,
``write`` and ``retain`` (``save`` records its checkpoint as prune would).

The same concepts in the other layers: what every transform reads: :mod:`ckptool.ops.read`
(``source``, ``spec``) and which tensors are moving averages: ``ops.read.ema``; what it writes:
:mod:`ckptool.ops.write`; the pure rules they share are codecs in :mod:`ckptool.format`: the cast
rules (``cast``), the optimizer-slot table (``slots``), Keras 3's structure (``keras3``), the object
graph (``objgraph``), JSON documents (``json_doc``).
"""
