"""Who holds a directory's lock (``DIR/.ckptool.lock``): for the messages of a writer that
waits for it or is refused it.

``flock`` itself does not say; on Linux ``/proc/locks`` lists each lock with the holder's
PID and the locked file's device and inode (``FLOCK ADVISORY WRITE PID MAJ:MIN:INODE``).
Elsewhere, or when the holder is in another PID namespace, nothing is known (None).
"""

from __future__ import annotations

import os

from ckptool.io.lock import LOCK_FILENAME

PROC_LOCKS = "/proc/locks"


def lock_holder(directory: str) -> int | None:
    """The PID holding ``directory``'s lock now, if the system says (else None)."""
    try:
        st = os.stat(os.path.join(directory or ".", LOCK_FILENAME))
        with open(PROC_LOCKS, encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK":  # "->": a waiter, not the holder
            continue
        try:
            pid = int(parts[4])
            major, minor, ino = (int(x, 16) if i < 2 else int(x) for i, x in enumerate(parts[5].split(":")))
        except ValueError:
            continue
        if (major, minor, ino) == want and pid > 0:
            return pid
    return None


def describe_holder(directory: str) -> str:
    """``PID 1234 (ckptool prune runs/)``, ``PID 1234``, or ``another process``."""
    pid = lock_holder(directory)
    if pid is None:
        return "another process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        argv = []
    if argv and os.path.basename(argv[0]).startswith("python") and len(argv) > 1:
        argv = argv[1:]
    if argv:
        argv[0] = os.path.basename(argv[0])
        shown = " ".join(" ".join(argv).split())  # one line, whatever the arguments hold
        return f"PID {pid} ({shown[:77] + '...' if len(shown) > 80 else shown})"
    return f"PID {pid}"


__all__ = ["describe_holder", "lock_holder"]
