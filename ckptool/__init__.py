"""ckptool: TensorFlow checkpoints without TensorFlow.

Read::

    import ckptool

    with ckptool.open("runs/") as ckpt:       # a prefix, a directory, a .index, a SavedModel
        for v in ckpt.variables():            # .name .dtype .shape .nbytes, sorted by name
            print(v.name, v.dtype, v.shape)
        step = ckpt["save_counter/.ATTRIBUTES/VARIABLE_VALUE"]   # numpy, bit-identical to TF

Write arrays with :func:`write`; the CLI's operations are functions returning result
objects: :func:`verify`, :func:`prune`, :func:`convert`, :func:`rewrite_names`,
:func:`average`, :func:`save`. Scripts written against ``tf.train`` run unchanged on
:mod:`ckptool.compat.tf` (``python -m ckptool.shim SCRIPT``). Every error raised on bad
input is a :class:`CkptError`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

from ckptool.errors import (  # noqa: E402
    ChecksumError,
    CkptError,
    CkptWarning,
    CorruptError,
    MissingError,
    RefusedError,
    TensorNotFoundError,
    UnsupportedError,
    UsageError,
)

if TYPE_CHECKING:  # the lazy names, for type checkers and IDEs
    from ckptool.api import average, convert, prune, rewrite_names, save, verify
    from ckptool.ops.read.reader import Checkpoint, Variable, open
    from ckptool.ops.write.writer import write

__all__ = [
    "open", "write", "Checkpoint", "Variable",
    "verify", "prune", "convert", "rewrite_names", "average", "save",
    "CkptError", "CorruptError", "ChecksumError", "MissingError", "TensorNotFoundError", "UnsupportedError",
    "RefusedError", "UsageError", "CkptWarning",
    "__version__",
]

_LAZY = {
    "open": "ckptool.ops.read.reader", "Checkpoint": "ckptool.ops.read.reader", "Variable": "ckptool.ops.read.reader",
    "write": "ckptool.ops.write.writer",
    "verify": "ckptool.api", "prune": "ckptool.api", "convert": "ckptool.api", "rewrite_names": "ckptool.api",
    "average": "ckptool.api", "save": "ckptool.api",
}


def __getattr__(name: str) -> Any:
    # Lazy: `ckptool --version` and `import ckptool` stay fast (no numpy/protobuf).
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ckptool' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
