"""Writing V2 checkpoints TensorFlow restores: tensor values as a data file stores them (``encode``)
and the streaming bundle writer with its atomic publish (``writer``). Imports ``read`` only."""
