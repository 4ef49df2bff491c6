"""Writing V2 checkpoints TensorFlow restores: the streaming bundle writer with its atomic publish
(``writer``; tensor values as a data file stores them are the codec ``ckptool.format.encode``).
Imports ``read`` only."""
