"""Looking inside checkpoints without changing them: the summary and directory state, tensor values
as JSON, statistics, the object tree, diff, and verification (one checkpoint or a tree of them).
Imports ``read`` only."""
