"""The operations, in five families (docs/ARCHITECTURE.md): ``read`` <- ``write`` <- ``inspect``,
``retain`` <- ``transform``. Each family is a sub-package whose ``__init__`` says what it owns; a
family imports only the families before it (tests/test_layers.py)."""
