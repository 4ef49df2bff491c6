"""ckptool: TensorFlow checkpoints without TensorFlow.

    import ckptool
    with ckptool.open("runs/ckpt-5") as ckpt:
        ckpt.variables()
        ckpt.read("dense/kernel")
    ckptool.write("out/ckpt-1", {"w": array})
"""

from __future__ import annotations

__version__ = "0.1.0"

from ckptool.errors import (  # noqa: E402
    ChecksumError,
    CkptError,
    CkptWarning,
    CorruptError,
    MissingError,
    RefusedError,
    TensorNotFoundError,
    UnsupportedError,
)

__all__ = [
    "open", "write", "Checkpoint", "Variable", "CkptError", "CorruptError", "ChecksumError",
    "MissingError", "TensorNotFoundError", "UnsupportedError", "RefusedError", "CkptWarning",
    "__version__",
]


def __getattr__(name: str):
    # Lazy: `ckptool --version` and `import ckptool` stay fast (no numpy/protobuf).
    if name in ("open", "Checkpoint", "Variable"):
        from ckptool.ops.read import reader as checkpoint

        return getattr(checkpoint, name)
    if name == "write":
        from ckptool.ops.write.writer import write

        return write
    raise AttributeError(f"module 'ckptool' has no attribute {name!r}")
