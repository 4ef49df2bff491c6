"""Names and layout: the file-name rules (:mod:`~ckptool.io.layout.names`), which files form a
checkpoint and what a CHECKPOINT argument means (:mod:`~ckptool.io.layout.checkpoints`), one
directory's listing (:mod:`~ckptool.io.layout.listing`), trees of runs
(:mod:`~ckptool.io.layout.walk`), a run's ``kept/`` (:mod:`~ckptool.io.layout.keptdir`) and
Keras ModelCheckpoint series (``series_*``)."""
