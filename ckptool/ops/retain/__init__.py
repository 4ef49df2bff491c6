"""Which checkpoints stay and which go: the pure retention rule (``retention``) and keep-best
(``keep_best``; metric histories: ``history``, ``metrics``), the plan of a prune (``prune_plan``)
and its application (``prune``), the one deletion engine with its journal (``deletion``,
``journal``), ``kept/`` (``kept``), health (``health``), what a prune reports (``outcome``), trees
of runs (``fleet``), ``du``, ``rm``, the ``checkpoint`` state file (``state``) and Keras
ModelCheckpoint series (``series_prune``, ``series_best``). Imports ``read``, ``write`` and, for
``prune --verify``, ``inspect``.

The same concepts in the other layers: which files form a checkpoint, a run's ``kept/`` and the
walk of a tree: :mod:`ckptool.io.layout` (``checkpoints``, ``keptdir``, ``walk``); the lock, the
state file and the policy file: :mod:`ckptool.io.control`; a series' members read:
:mod:`ckptool.ops.read.series`.
"""
