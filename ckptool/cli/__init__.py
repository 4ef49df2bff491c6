"""The ``ckptool`` command line: click and rich live only in this package."""

from ckptool.cli.main import main

__all__ = ["main"]
