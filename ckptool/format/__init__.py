"""Pure parsing and encoding of TensorFlow's on-disk checkpoint formats.

Nothing in this package touches the file system beyond the buffers it is
handed, nor imports click or rich. See docs/FORMAT.md for the layouts.
"""
