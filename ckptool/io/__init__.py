"""Files: where they live, which of them form a checkpoint, how they are written safely, and
the control files of a run directory. Below ops/, above format/ (docs/ARCHITECTURE.md).

- :mod:`ckptool.io.base`: the protocols every backend implements (``Storage``, ``Reader``,
  ``Writer``, ``Files``, ``Dir``) and the ``ANY`` of a write that checks nothing;
- :mod:`ckptool.io.oserrors`: how a failure of the file system is said;
- :mod:`ckptool.io.backends`: the local file system, object stores through fsspec, and
  which of them serves a path;
- :mod:`ckptool.io.layout`: file names, which files form a checkpoint, listings, trees of
  runs, ``kept/``, Keras ModelCheckpoint series;
- :mod:`ckptool.io.safety`: the atomic write, the overwrite rule, directories held by
  descriptor;
- :mod:`ckptool.io.control`: the directory lock, the ``checkpoint`` state file, the
  ``.ckptool.toml`` policy file.
"""
