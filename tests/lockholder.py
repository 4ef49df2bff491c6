"""A directory's lock held by another process, for tests of what waits for it or is refused."""

import contextlib
import multiprocessing


def _hold(d, ready, release):
    from ckptool.io.control.lock import DirLock

    with DirLock(str(d)):
        ready.set()
        release.wait(30)


@contextlib.contextmanager
def lock_held_elsewhere(d):
    """A forked child holds ``d``'s lock inside the block; yields the Event that lets it go
    (set on leaving the block in any case)."""
    ctx = multiprocessing.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold, args=(d, ready, release))
    child.start()
    try:
        if not ready.wait(30):
            raise TimeoutError("the lock-holding child did not take the lock")
        yield release
    finally:
        release.set()
        child.join(30)
