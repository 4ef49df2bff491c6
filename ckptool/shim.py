"""``python -m ckptool.shim SCRIPT [ARGS]`` (or ``-m MODULE [ARGS]``): run a script that reads
checkpoints through ``tf.train`` on a machine without TensorFlow.

SCRIPT runs as ``python SCRIPT ARGS`` runs it (``__main__``, an absolute ``__file__``,
``sys.argv`` as given, the script's directory first on ``sys.path``), and ``-m MODULE`` as
``python -m MODULE`` does, except that ``import tensorflow`` (and ``tensorflow.compat.v1``,
``from tensorflow import train`` ...) gives :mod:`ckptool.compat.tf`, said once on stderr
when the script first imports it. A part of TensorFlow that is not offered fails with one
message naming it. An uncaught exception prints Python's traceback (from the script's own
frames) through ``sys.excepthook``; exit statuses are Python's (``sys.exit`` as called, 1
after an uncaught exception, killed by SIGINT after Ctrl-C).

In a notebook or a program of your own, :func:`install` does the same redirection::

    import ckptool.shim
    ckptool.shim.install()
    import tensorflow as tf        # ckptool.compat.tf
"""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys
import types
from collections.abc import Callable
from types import ModuleType
from typing import NoReturn

PROG = "ckptool.shim"
USAGE = f"usage: python -m {PROG} SCRIPT [ARGS...] | -m MODULE [ARGS...]"

#: The TensorFlow modules offered, and the ckptool module each one is.
ALIASES = {
    "tensorflow": "ckptool.compat.tf",
    "tensorflow.train": "ckptool.compat.tf.train",
    "tensorflow.errors": "ckptool.compat.tf.errors",
    "tensorflow.dtypes": "ckptool.compat.tf.dtypes",
    "tensorflow.version": "ckptool.compat.tf.version",
    "tensorflow.io": "ckptool.compat.tf.io",
    "tensorflow.io.gfile": "ckptool.compat.tf.io.gfile",
    "tensorflow.compat": "ckptool.compat.tf.compat",
    "tensorflow.compat.v1": "ckptool.compat.tf.compat.v1",
    "tensorflow.compat.v1.train": "ckptool.compat.tf.compat.v1.train",
    "tensorflow.compat.v1.errors": "ckptool.compat.tf.errors",
    "tensorflow.compat.v1.dtypes": "ckptool.compat.tf.dtypes",
    "tensorflow.compat.v1.version": "ckptool.compat.tf.version",
    "tensorflow.compat.v1.gfile": "ckptool.compat.tf.compat.v1.gfile",
    "tensorflow.compat.v1.logging": "ckptool.compat.tf.compat.v1.logging",
    "tensorflow.compat.v1.io": "ckptool.compat.tf.compat.v1.io",
    "tensorflow.compat.v1.io.gfile": "ckptool.compat.tf.io.gfile",
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


def _report(exc: BaseException, filename: str) -> None:
    """Python's report of an uncaught exception: ``sys.excepthook`` with the traceback from
    the first frame of ``filename`` on (the shim's own frames left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    if filename == "<frozen runpy>":  # from runpy's first frame, as Python shows `-m` tracebacks
        while tb is not None and tb.tb_frame.f_code.co_name != "_run_module_as_main":
            tb = tb.tb_next
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def _interrupted() -> NoReturn:
    """Leave as Python does after an uncaught KeyboardInterrupt: killed by SIGINT."""
    import atexit
    import signal

    atexit._run_exitfuncs()  # noqa: SLF001  (no public call runs the exit handlers now, as Python's exit does)
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
    raise SystemExit(130)  # pragma: no cover - where SIGINT does not end the process


def _run(filename: str, body: Callable[[], object]) -> int:
    """Run ``body`` (the script), reporting what escapes it as Python would; SystemExit passes."""
    try:
        body()
    except SystemExit:
        raise
    except KeyboardInterrupt as exc:
        _report(exc, filename)
        _interrupted()
    except BaseException as exc:  # the script's own error: Python's traceback, exit 1
        _report(exc, filename)
        return 1
    return 0


def run_script(args: list[str]) -> int:
    """``python SCRIPT ARGS``: ``args[0]`` run as ``__main__``."""
    script = args[0]
    path = os.path.join(os.getcwd(), script)  # absolute, not normalised: as Python makes __file__
    if not os.path.exists(path):
        print(f"{sys.executable}: can't open file {path!r}: [Errno 2] No such file or directory", file=sys.stderr)
        return 2
    sys.argv = list(args)
    where = os.path.dirname(os.path.realpath(path)) if os.path.isfile(path) else path
    if sys.path and sys.path[0] == os.getcwd():
        sys.path[0] = where  # `python -m ckptool.shim` put the current directory there; python SCRIPT does not
    else:
        sys.path.insert(0, where)
    if not os.path.isfile(path):  # a directory or zip with __main__.py
        return _run(os.path.join(script, "__main__.py"), lambda: runpy.run_path(script, run_name="__main__"))

    def body() -> None:
        with io.open_code(path) as f:
            source = f.read()
        main = types.ModuleType("__main__")
        main.__file__ = path
        main.__cached__ = None  # type: ignore[attr-defined]
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
        main.__builtins__ = builtins  # type: ignore[attr-defined]
        sys.modules["__main__"] = main
        exec(compile(source, path, "exec"), main.__dict__)  # noqa: S102  (running the user's script is the point)

    return _run(path, body)


def run_module(args: list[str]) -> int:
    """``python -m MODULE ARGS``: what Python itself calls for ``-m`` (runpy's
    ``_run_module_as_main``, its frames in tracebacks as in Python's), in a fresh ``__main__``."""
    sys.argv = list(args)
    sys.modules["__main__"] = types.ModuleType("__main__")
    # what `python -m` runs, private in runpy: the public run_module differs in tracebacks and __main__
    run_as_main = runpy._run_module_as_main  # type: ignore[attr-defined]  # noqa: SLF001
    return _run("<frozen runpy>", lambda: run_as_main(args[0], alter_argv=True))


def main(argv: list[str] | None = None) -> int:
    """Run SCRIPT (or ``-m MODULE``) under the shim; the exit status is the script's (2: usage)."""
    args = list(sys.argv[1:] if argv is None else argv)
    module = False
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-h", "--help"):
            print(USAGE + "\n\n" + (__doc__ or "").split("\n\n", 1)[1].split("\n\n")[0], file=sys.stdout)
            return 0
        if opt == "-m":
            module = True
            break
        if opt == "--":
            break
        if opt != "--debug":  # --debug: accepted and ignored (tracebacks are always Python's)
            print(f"{USAGE}\n{PROG}: error: unknown option {opt}", file=sys.stderr)
            return 2
    if not args:
        print(f"{USAGE}\n{PROG}: error: no {'MODULE' if module else 'SCRIPT'} given", file=sys.stderr)
        return 2
    install(announce=True)
    keep = sys.modules.get("__main__")  # this module, while the script replaces it
    try:
        return run_module(args) if module else run_script(args)
    finally:
        del keep


if __name__ == "__main__":
    sys.exit(main())
