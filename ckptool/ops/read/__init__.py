"""Reading checkpoints and every other source: what an open checkpoint offers (``checkpoint``),
opening one of any kind (``reader.open``; TF ones: ``tfopen``), the V2 bundle and V1 table readers
(``v2``, ``shards``, ``v1``), Keras 3 files (``keras``, ``keras_zip``), the sources convert reads
(``source``, ``spec``; ``.safetensors``: ``stfile``; ``.npz``/``.npy``: ``npfile``; a Hugging Face
folder: ``hffolder``; as checkpoints for every reading command: ``files``), bounded chunked reads
(``chunks``), what a streaming read tells storage (``prefetch``), the name filters every command
shares (``select``), "did you mean" (``suggest``), the cheap integrity check (``integrity``), a
directory's Keras ModelCheckpoint series (``series``), which tensors are moving averages
(``ema``) and work done in threads answered in order (``ordered``). Imports no other family.

The same concepts in the other layers: the byte codecs in :mod:`ckptool.format` (``bundle``,
``table``, ``tensors``, ``v1``, ``safetensors_meta``, ``keras3``: Keras 3's structure,
``keras_files``); the files in :mod:`ckptool.io` (which form a checkpoint:
``io.layout.checkpoints``; a series' names: ``io.layout.series_*``; the read-ahead itself:
``io.backends.prefetch``).
"""
