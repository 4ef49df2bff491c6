"""Which checkpoints stay and which go: the pure retention engine and keep-best, metrics from event
files, the plan of a prune and its application, trees of runs (``fleet``), ``du``, ``rm`` and the
``checkpoint`` state file. Imports ``read`` and ``write``."""
