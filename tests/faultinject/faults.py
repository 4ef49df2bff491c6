"""Fault injection for the crash-safety tests (tests/robustness/test_crash.py); test side only.

Does nothing unless the environment says so; the environment is read once,
here, when this module is first imported.

``CKPTOOL_CRASH_AT=NAME[:COUNT]``
    :func:`crash_point` ``(NAME)`` SIGKILLs the process the COUNT-th time
    (default 1) it is reached.

Two families of names are built in once :func:`install` has wrapped the
file-system calls that change what is on disk (``os.replace``, ``os.rename``,
``os.remove``, ``os.unlink``, ``os.rmdir``, ``os.link``, ``os.symlink``,
``os.fsync``, and ``open``/``os.open`` for writing). Every such call is an
*event*:

- ``fs:N``: killed just before the N-th event happens;
- ``fs+:N``: killed just after the N-th event has happened.

So a harness that first counts the events of a run (``CKPTOOL_FAULT_LOG``)
can kill it at every point where the disk changes, in order.

``CKPTOOL_FAULT_LOG=PATH``
    Append one line per event and per crash point reached (``N name detail``).

A child started with ``tests/faultinject`` on its PYTHONPATH gets the hooks from
``sitecustomize``; :func:`run_armed` does the same in a process forked from one that has
ckptool imported (the crash tests' fork server), with the spec and log as arguments.
"""

from __future__ import annotations

import os
import signal

_SPEC = os.environ.get("CKPTOOL_CRASH_AT", "")
_LOG = os.environ.get("CKPTOOL_FAULT_LOG", "")


def _parse(spec: str):
    name, _sep, count = spec.rpartition(":") if ":" in spec else (spec, "", "1")
    try:
        return (name, int(count)) if name else None
    except ValueError:  # a malformed spec disables injection rather than crashing the tool
        return None


_TARGET = _parse(_SPEC)

_seen: dict[str, int] = {}
_installed = False


def active() -> bool:
    """Whether any fault injection or logging was asked for."""
    return bool(_TARGET or _LOG)


def _log(line: str) -> None:
    if _LOG:
        fd = _real_open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode("utf-8", "backslashreplace"))
        finally:
            _real_close(fd)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """SIGKILL this process here if ``CKPTOOL_CRASH_AT`` names this point (and count)."""
    if _TARGET is None and not _LOG:
        return
    n = _seen[name] = _seen.get(name, 0) + 1
    _log(f"{n} {name}")
    if _TARGET is not None and _TARGET[0] == name and _TARGET[1] == n:
        _die()


_real_open = os.open
_real_close = os.close


def _event(what: str, detail: str, call, *args, **kwargs):
    n = _seen["fs"] = _seen.get("fs", 0) + 1
    _log(f"{n} fs {what} {detail}")
    if _TARGET is not None and _TARGET == ("fs", n):
        _die()
    result = call(*args, **kwargs)
    if _TARGET is not None and _TARGET == ("fs+", n):
        _die()
    return result


def _wrap(name: str, describe):
    real = getattr(os, name)

    def wrapper(*args, **kwargs):
        return _event(name, describe(*args), real, *args, **kwargs)

    wrapper.__wrapped__ = real
    setattr(os, name, wrapper)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def install() -> None:
    """Wrap the file-system calls that change the disk, so that ``fs:N`` works."""
    global _installed
    if _installed:
        return
    _installed = True
    import builtins
    import io

    for name in ("replace", "rename"):
        _wrap(name, lambda src, dst, *a, **k: f"{src} -> {dst}")
    for name in ("remove", "unlink", "rmdir"):
        _wrap(name, lambda path, *a, **k: str(path))
    for name in ("link", "symlink"):
        _wrap(name, lambda src, dst, *a, **k: f"{src} -> {dst}")
    _wrap("fsync", lambda fd: str(fd))

    def os_open(path, flags, *args, **kwargs):
        if flags & _WRITE_FLAGS and str(path) != _LOG:
            return _event("open", str(path), _real_open, path, flags, *args, **kwargs)
        return _real_open(path, flags, *args, **kwargs)

    os.open = os_open
    real_builtin_open = builtins.open

    def builtin_open(file, mode="r", *args, **kwargs):
        if isinstance(mode, str) and any(c in mode for c in "wxa+") and not isinstance(file, int):
            return _event("open", str(file), real_builtin_open, file, mode, *args, **kwargs)
        return real_builtin_open(file, mode, *args, **kwargs)

    builtins.open = builtin_open
    io.open = builtin_open


def run_armed(args, spec: str = "", log: str = "", out: str = "") -> None:  # pragma: no cover
    """Run ``ckptool ARGS...`` in this process with ``CKPTOOL_CRASH_AT=spec`` and
    ``CKPTOOL_FAULT_LOG=log`` (stdout and stderr to the file ``out``), then end the
    process with the CLI's exit status. For children forked by the crash tests from a
    process that has ckptool imported (no interpreter start per kill); never returns."""
    global _TARGET, _LOG
    import sys
    import traceback

    code = 70
    try:
        if out:
            fd = _real_open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            _real_close(fd)
        _TARGET, _LOG = _parse(spec), log
        _seen.clear()
        install()
        from ckptool.cli.main import main as cli_main  # the product, unchanged

        try:
            cli_main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
