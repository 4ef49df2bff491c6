"""The directory lock on an object store: the object ``DIR/.ckptool.lock``, written only if
absent (S3 ``If-None-Match: *``, GCS ``ifGenerationMatch=0``: :mod:`ckptool.io.backends.remote_cas`),
holding who took it and when it expires.

- Held: renewed every :data:`TTL` / 4 seconds by a conditional write at the version we wrote,
  so a prune of any length keeps it; a holder killed with ``kill -9`` leaves one that expires
  :data:`TTL` seconds later, and is then taken over by a conditional write at the stale
  version (two that race for it: one wins).
- Waiting: as the local flock, bounded by ``timeout``; then refused naming the holder (the one
  refusal, :func:`ckptool.io.control.lock.held_refusal`).
- Released: deleted only if still at our version.
- Re-entrant within a process, as :class:`ckptool.io.control.lock.DirLock`.
- A note: the body may carry a JSON value (``note``: prune's journal of what it is about to
  delete, written with the lock rather than as an object of its own). A holder killed with one
  leaves it in the lock object; whoever takes the expired lock over finds it in ``inherited``
  (and carries it in its own body until it releases the lock), and finishes it.
- A protocol with no conditional write cannot hold it: refused plainly.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Literal

from ckptool.errors import CkptError, CorruptError
from ckptool.format.json_doc import dump_json, load_json
from ckptool.io.backends import remote_cas
from ckptool.io.control.lock import LOCK_FILENAME, held_refusal

#: Seconds a lock object holds without renewal (a killed holder's is taken over after it).
TTL = 120.0
#: A lock object is a few hundred bytes; a larger one is not ours (read as expired).
LOCK_DOC_LIMIT = 64 << 10
#: The largest note a lock object carries (the rest of its body is a few hundred bytes).
NOTE_MAX = LOCK_DOC_LIMIT // 2
_POLL = 0.2

_held: dict[str, list[Any]] = {}  # lock URL -> [depth, RemoteLock]
_mutex = threading.Lock()


def _holder_doc() -> dict[str, Any]:
    return {"tool": "ckptool", "pid": os.getpid(), "host": socket.gethostname(),
            "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv[:3]))}


def _note(raw: bytes | None) -> Any:
    """The note a lock object's bytes carry (None: none, or not a lock object of ours)."""
    try:
        doc = load_json(raw or b"", "lock object", max_bytes=LOCK_DOC_LIMIT)
    except (CorruptError, ValueError):
        return None
    return doc.get("note") if isinstance(doc, dict) else None


def _who(raw: bytes | None) -> tuple[str, float]:
    """``(holder said in words, expiry time)`` of a lock object's bytes (unparsable: expired)."""
    try:
        doc = load_json(raw or b"", "lock object", max_bytes=LOCK_DOC_LIMIT)
        expires = float(doc["expires"])
        who = f"{doc.get('command') or 'ckptool'} (PID {doc.get('pid')} on {doc.get('host')})"
    except (CorruptError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return "an unreadable lock object", 0.0
    return who, expires


class RemoteLock:
    """``with RemoteLock(storage, directory, timeout): ...`` (``storage`` a RemoteStorage)."""

    def __init__(self, storage: Any, directory: str, timeout: float | None = 30.0,
                 on_wait: Any = None, note: Any = None, **_: object):
        self.storage = storage
        self.directory = directory
        self.path = storage.join(directory, LOCK_FILENAME)
        self.timeout = timeout
        self.on_wait = on_wait
        self._token: Any = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost = False  # a renewal found the lock taken over (we were stalled past TTL)
        self.note = note  # carried in the body
        self.inherited: Any = None  # the note of the expired lock object taken over
        self.contended = False  # the lock object was there when we first asked (held, or a killed holder's)

    def _body(self) -> bytes:
        doc = {**_holder_doc(), "expires": time.time() + TTL}
        if self.note is not None:
            doc["note"] = self.note
        return dump_json(doc, "lock object", compact=True)

    def set_note(self, note: Any) -> None:
        """Carry ``note`` from now on: the lock object rewritten at our version (a held lock)."""
        self.note = note
        token = remote_cas.put(self.storage, self.path, self._body(), self._token)
        if token is None:
            self.lost = True
            raise CkptError(f"{self.path}: the lock was taken over by another process (this one was stalled "
                            f"for over {TTL:.0f} s); stopping")
        self._token = token

    def __enter__(self) -> RemoteLock:
        if not remote_cas.supported(self.storage.protocol):
            raise remote_cas.refuse(self.storage.protocol, self.path, "a lock")
        with _mutex:
            entry = _held.get(self.path)
            if entry is not None:
                entry[0] += 1
                return self
        start = time.monotonic()
        while True:
            body = self._body()
            token = remote_cas.put(self.storage, self.path, body, None)
            if token is None:
                self.contended = True
                raw, stale = remote_cas.read(self.storage, self.path)
                who, expires = _who(raw)
                if raw is not None and expires < time.time():  # a killed holder's: take it over
                    inherited = _note(raw)
                    if inherited is not None:  # carried on until this holder has finished it
                        self.note = inherited
                        body = self._body()
                    token = remote_cas.put(self.storage, self.path, body, stale)
                    if token is not None:
                        self.inherited = inherited
                if token is None:
                    waited = time.monotonic() - start
                    if raw is not None and self.timeout is not None and waited >= self.timeout:
                        left = max(0.0, expires - time.time())
                        raise held_refusal(self.directory, self.timeout,
                                           f"{who}, for {left:.0f} s more unless renewed")
                    if self.on_wait is not None and raw is not None:
                        self.on_wait(waited)
                    time.sleep(_POLL if raw is not None else 0.0)
                    continue
            self._token = token
            break
        try:
            remote_cas.check_honoured(self.storage, self.path, body, token)
        except BaseException:
            self.release()
            raise
        with _mutex:
            _held[self.path] = [1, self]
        self._renewer = threading.Thread(target=self._renew, name="ckptool-lock-renew", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(TTL / 4):
            try:
                token = remote_cas.put(self.storage, self.path, self._body(), self._token)
            except CkptError:
                continue  # the store failed a request: the next renewal tries again
            if token is None:
                self.lost = True
                return
            self._token = token

    def release(self) -> None:
        """Stop renewing and delete the lock object if it is still at our version (else it
        expires by itself); ``__exit__`` calls it when the outermost hold ends. A journal inherited
        from a killed holder that was not finished (``inherited`` still set: a command that deletes
        nothing took the lock over) stays in it: the lock expires with it, never deleted."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        if self.inherited is not None:  # a killed holder's journal no command here finished: left to expire
            return  # with it, for the next deleting command to take over and finish (within TTL s)
        try:
            remote_cas.delete(self.storage, self.path, self._token)
        except CkptError:
            pass  # it expires by itself

    def release_along(self, paths: list[str]) -> dict[str, str] | None:
        """Delete ``paths`` (files of the locked directory) and release the lock in the same
        batch request, its object deleted only at our version (S3's ``DeleteObjects``): what
        :func:`ckptool.io.backends.remote_cas.delete_many` answers for ``paths``. None, nothing
        deleted and the lock still held, where the store has no batch delete (or botocore cannot
        send a key's version in one), or where this is not the outermost hold (a caller up the
        stack still needs it). A lock the batch did not
        delete is released as ever (or expires); a batch request that failed leaves it to expire,
        with the journal its note carries. Either way ``__exit__`` then does nothing."""
        st = self.storage
        if not (remote_cas.batches(st, [*paths, self.path]) and remote_cas.batch_versions_known(st)):
            return None
        with _mutex:
            entry = _held.get(self.path)
            if entry is None or entry[1] is not self or entry[0] != 1:
                return None
            del _held[self.path]
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()  # no renewal may change the version the batch deletes at
        ours = not self.lost and self.inherited is None
        failed = remote_cas.delete_many(self.storage, [*paths, self.path] if ours else paths,
                                        {self.path: self._token} if ours else None) or {}
        if ours and self.path in failed:
            self.release()  # a refused key: deleted at our version, alone (or left to expire)
        return {p: why for p, why in failed.items() if p != self.path}

    def __exit__(self, *exc: object) -> Literal[False]:
        with _mutex:
            entry = _held.get(self.path)
            if entry is None:
                return False
            entry[0] -= 1
            if entry[0]:
                return False
            del _held[self.path]
        entry[1].release()
        return False


def held(storage: Any, directory: str) -> RemoteLock | None:
    """The lock this process holds on ``directory`` (None: none)."""
    with _mutex:
        entry = _held.get(storage.join(directory, LOCK_FILENAME))
    return entry[1] if entry is not None else None


def held_elsewhere(storage: Any, directory: str) -> bool:
    """Whether another holder's lock object on DIR is live now (not ours, not expired), without
    taking it: ``prune --clean-temp --dry-run`` says nothing would go while a writer holds it."""
    path = storage.join(directory, LOCK_FILENAME)
    with _mutex:
        if path in _held:
            return False
    raw = storage.read_if_exists(path)
    return raw is not None and _who(raw)[1] >= time.time()


__all__ = ["LOCK_FILENAME", "NOTE_MAX", "TTL", "RemoteLock", "held", "held_elsewhere"]
