"""The one exception family of ckptool.

Everything the library raises on bad input, missing files or refused
operations derives from :class:`CkptError`, so callers (and the CLI) catch a
single class. Subclasses also derive from the builtin that fits, so that
``except FileNotFoundError`` or ``except KeyError`` keep working.
"""

from __future__ import annotations


class CkptError(Exception):
    """Root of every error ckptool raises."""


class CorruptError(CkptError, ValueError):
    """A file is not what it claims to be: truncated, malformed, inconsistent."""


class ChecksumError(CorruptError):
    """A stored CRC32C does not match the bytes it covers."""


class MissingError(CkptError, FileNotFoundError):
    """A checkpoint, file or shard that is needed does not exist."""

    def __str__(self) -> str:  # OSError would render errno noise otherwise
        return str(self.args[0]) if self.args else ""


class ResourceError(CkptError, OSError):
    """The machine refused the run something it needs (too many open files): an error of the
    run, never a verdict on a checkpoint (``verify`` says "could not check", not "damaged")."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class TensorNotFoundError(CkptError, KeyError):
    """A tensor name is not in the checkpoint. ``name`` is the name asked for and ``suggestions``
    the checkpoint's names closest to it, best first (also in the message: "did you mean ...?")."""

    def __init__(self, *args: object, name: str | None = None, suggestions: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(*args)
        self.name = name
        self.suggestions = list(suggestions)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnsupportedError(CkptError):
    """Valid input that ckptool cannot handle (an unknown dtype, say)."""


class RefusedError(CkptError):
    """An operation that was refused to protect data (overwrite, delete-all)."""


class UsageError(CkptError, ValueError):
    """Bad input in arguments the library detects (a regex, a rule, a cast spec): exit 2."""


class CkptWarning(UserWarning):
    """Something odd but recoverable (a moved directory, a skipped file)."""
