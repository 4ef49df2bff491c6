"""``python -m ckptool.shim [--debug] SCRIPT [ARGS]``: run a script that reads checkpoints
through ``tf.train`` on a machine without TensorFlow.

SCRIPT runs as ``python SCRIPT ARGS`` would run it (``__main__``, ``sys.argv``, its
directory first on ``sys.path``), except that ``import tensorflow`` (and
``tensorflow.compat.v1``, ``from tensorflow import train`` ...) gives
:mod:`ckptool.compat.tf`, said once on stderr when the script first imports it. A part of
TensorFlow that is not offered fails with one message naming it. An uncaught error prints
one line (``--debug``: the traceback); the exit status is the script's.

In a notebook or a program of your own, :func:`install` does the same redirection::

    import ckptool.shim
    ckptool.shim.install()
    import tensorflow as tf        # ckptool.compat.tf
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
from types import ModuleType

PROG = "ckptool.shim"
USAGE = f"usage: python -m {PROG} [--debug] SCRIPT [ARGS...]"

#: The TensorFlow modules offered, and the ckptool module each one is.
ALIASES = {
    "tensorflow": "ckptool.compat.tf",
    "tensorflow.train": "ckptool.compat.tf.train",
    "tensorflow.errors": "ckptool.compat.tf.errors",
    "tensorflow.dtypes": "ckptool.compat.tf.dtypes",
    "tensorflow.compat": "ckptool.compat.tf.compat",
    "tensorflow.compat.v1": "ckptool.compat.tf.compat.v1",
    "tensorflow.compat.v1.train": "ckptool.compat.tf.compat.v1.train",
    "tensorflow.compat.v1.errors": "ckptool.compat.tf.errors",
    "tensorflow.compat.v1.dtypes": "ckptool.compat.tf.dtypes",
}


class TensorFlowRedirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta-path finder that answers ``tensorflow`` and its offered submodules with
    :mod:`ckptool.compat.tf`'s, and refuses the rest by name."""

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce
        self.announced = False

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "tensorflow" and not fullname.startswith("tensorflow."):
            return None
        if fullname not in ALIASES:
            offered = ", ".join(sorted(ALIASES))
            raise ModuleNotFoundError(f"{fullname} is not offered by ckptool.compat.tf, which stands in for "
                                      f"TensorFlow's checkpoint readers only (modules: {offered}); "
                                      "install TensorFlow for the rest", name=fullname)
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.announce and not self.announced:
            self.announced = True
            print(f"{PROG}: 'import tensorflow' gives ckptool.compat.tf (TensorFlow's checkpoint readers, "
                  "without TensorFlow)", file=sys.stderr)
        return importlib.import_module(ALIASES[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        pass  # the ckptool module is already initialised


def install(announce: bool = False) -> TensorFlowRedirect:
    """Make ``import tensorflow`` give :mod:`ckptool.compat.tf` in this process (first on
    ``sys.meta_path``, so an installed TensorFlow is not used). Must run before
    TensorFlow is imported; returns the finder (``sys.meta_path.remove`` undoes it)."""
    if any(n == "tensorflow" or n.startswith("tensorflow.") for n in sys.modules):
        if not isinstance(sys.modules.get("tensorflow"), ModuleType) or \
                sys.modules["tensorflow"].__name__ != ALIASES["tensorflow"]:
            raise RuntimeError("TensorFlow is already imported in this process; install the shim before it")
    for finder in sys.meta_path:
        if isinstance(finder, TensorFlowRedirect):
            return finder
    finder = TensorFlowRedirect(announce)
    sys.meta_path.insert(0, finder)
    return finder


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    """Run SCRIPT under the shim; the exit status is the script's (2: usage, 1: an uncaught error)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = False
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-h", "--help"):
            print(USAGE + "\n\n" + (__doc__ or "").split("\n\n", 1)[1].split("\n\n")[0], file=sys.stdout)
            return 0
        if opt == "--debug":
            debug = True
        elif opt == "--":
            break
        else:
            print(f"{USAGE}\n{PROG}: error: unknown option {opt}", file=sys.stderr)
            return 2
    if not args:
        print(f"{USAGE}\n{PROG}: error: no SCRIPT given", file=sys.stderr)
        return 2
    script = args[0]
    if not os.path.isfile(script):
        print(f"{PROG}: error: {script}: no such file", file=sys.stderr)
        return 2
    install(announce=True)
    sys.argv = args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the script's own error: one line, as the CLI reports
        if debug:
            import traceback

            traceback.print_exc()
        else:
            print(f"{PROG}: error: {script}: {_one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
