"""Conditional writes on an object store: the state file's compare-and-swap and the lock object.

An object store has no rename and no advisory lock, so "replace the state file only if it
still holds what was read" must be the store's own conditional write, never a read, a
compare and then a plain PUT (two prunes at once would both pass the compare):

- ``s3://``: the ETag read with the bytes (one GET), then ``PutObject`` with ``If-Match:
  ETAG``, or ``If-None-Match: *`` for "only if there is none" (S3 has honoured both since
  2024); HTTP 412 (or 409, a concurrent conditional write) means someone else wrote first.
- ``gs://``: the object's generation, then an upload with ``ifGenerationMatch=GEN`` (``0``:
  only if there is none); 412 means someone else wrote first.
- ``memory://``: one process's memory, made atomic by a lock.

A store reached by any other protocol offers neither, and the writes that need one are
refused plainly (:func:`refuse`). A store that accepts the headers and ignores them (an old
S3-compatible server) is caught by :func:`check_honoured`, which the lock object runs once
per bucket before anything is written under it.
"""

from __future__ import annotations

import threading
from typing import Any

from ckptool.errors import RefusedError
from ckptool.io.backends.fsspec_private import gcs_endpoint, s3_call
from ckptool.io.backends.remote_files import request_errors

#: Protocols with conditional writes, as fsspec names them.
CONDITIONAL = ("s3", "s3a", "gs", "gcs", "memory")

_MEMORY = threading.Lock()
_PROVING = threading.Lock()
_honoured: dict[tuple[int, str], bool] = {}  # (id of the filesystem, bucket) -> the probe's answer


def supported(protocol: str) -> bool:
    return protocol in CONDITIONAL


def refuse(protocol: str, path: str, what: str) -> RefusedError:
    return RefusedError(f"{path}: {protocol}:// offers no conditional write (S3's If-Match, GCS's "
                        f"generation preconditions), so {what} could overwrite another process's change; "
                        "refusing")


def _lost(exc: BaseException) -> bool:
    """A precondition that failed (412) or a conditional write that lost a race (409)."""
    if isinstance(exc, FileExistsError):  # s3fs (If-None-Match) and gcsfs (any 412) say so
        return True
    resp = getattr(exc.__cause__, "response", None) or getattr(exc, "response", None) or {}
    code = (resp.get("Error") or {}).get("Code") if isinstance(resp, dict) else None
    status = (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode") if isinstance(resp, dict) else None
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)


def read(st: Any, path: str) -> tuple[bytes | None, Any]:
    """``(bytes, version token)`` of the object now (``(None, None)`` when absent); the token
    names exactly the version the bytes are of, or an older one (a later write then fails)."""
    fs, proto = st.fs, st.protocol
    if proto == "memory":
        with _MEMORY:
            data = st.read_if_exists(path)
        return data, data
    bucket, key, _ = fs.split_path(path)
    if proto in ("gs", "gcs"):
        with request_errors(path, "read"):
            try:
                gen = fs.info(path, refresh=True).get("generation")  # first: never newer than the bytes
                _, data = fs.call("GET", fs.url(path, generation=gen))
            except FileNotFoundError:
                return None, None
        return bytes(data), str(gen)
    import fsspec.asyn

    async def get() -> tuple[bytes | None, Any]:
        try:
            r = await s3_call(fs, "get_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None, None
        async with r["Body"] as body:
            data = await body.read()
        return bytes(data), r.get("ETag")

    with request_errors(path, "read"):
        got: tuple[bytes | None, Any] = fsspec.asyn.sync(fs.loop, get)
    return got


def listed_version(protocol: str, info: dict[str, Any], data: bytes) -> Any:
    """The version token of an object as a listing described it (S3's ``ETag``, GCS's
    ``generation``; memory://: the bytes read), None when the listing does not say: what
    :func:`read` returns, for bytes read after that listing."""
    if protocol == "memory":
        return data
    if protocol in ("gs", "gcs"):
        gen = info.get("generation")
        return str(gen) if gen not in (None, "") else None
    if protocol in ("s3", "s3a"):
        tag = info.get("ETag") or info.get("etag")
        return tag if isinstance(tag, str) and tag else None
    return None


def put(st: Any, path: str, data: bytes, token: Any) -> Any:
    """Write ``data`` only if the object is still at version ``token`` (None: only if there is
    none). The new version's token, or None when someone else wrote first."""
    fs, proto = st.fs, st.protocol
    if proto == "memory":
        with _MEMORY:
            if st.read_if_exists(path) != token:
                return None
            st.write_bytes_atomic(path, data)
        return data
    bucket, key, _ = fs.split_path(path)
    try:
        if proto in ("gs", "gcs"):
            from urllib.parse import quote

            doc = fs.call("POST", f"{gcs_endpoint(fs)}/upload/storage/v1/b/{quote(bucket)}/o", uploadType="media",
                          name=key, ifGenerationMatch=str(token or 0), data=data, json_out=True,
                          headers={"Content-Type": "application/octet-stream"})
            fs.invalidate_cache(path)
            return str(doc.get("generation"))
        _s3_conditions_known(fs, path)
        cond = {"IfNoneMatch": "*"} if token is None else {"IfMatch": token}
        out = fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, **cond)
        fs.invalidate_cache(path)
        return out.get("ETag") or "?"
    except Exception as exc:  # noqa: BLE001 - the store's answer, translated below unless a lost race
        fs.invalidate_cache(path)
        if _lost(exc):
            return None
        with request_errors(path, "write"):
            raise


def delete(st: Any, path: str, token: Any) -> bool:
    """Delete the object only if it is still at version ``token``; False when it is not (or gone)."""
    fs, proto = st.fs, st.protocol
    if proto == "memory":
        with _MEMORY:
            if st.read_if_exists(path) != token:
                return False
            st.remove(path)
        return True
    bucket, key, _ = fs.split_path(path)
    try:
        if proto in ("gs", "gcs"):
            fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=str(token))
        else:
            fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=token)
    except Exception as exc:  # noqa: BLE001 - the store's answer, translated below unless a lost race
        if _lost(exc) or isinstance(exc, FileNotFoundError):
            return False
        with request_errors(path, "delete"):
            raise
    finally:
        fs.invalidate_cache(path)
    return True


#: Keys a store's batch delete takes at once (S3's DeleteObjects).
BATCH = 1000


def batches(st: Any, paths: list[str]) -> bool:
    """Whether the store deletes ``paths`` in a batch (:func:`delete_many`): S3, one bucket, two
    keys or more (one goes by a plain DELETE)."""
    if st.protocol not in ("s3", "s3a") or len(paths) < 2:
        return False
    bucket = st.fs.split_path(paths[0])[0]
    return all(st.fs.split_path(p)[0] == bucket for p in paths)


def batch_versions_known(st: Any) -> bool:
    """Whether this botocore sends a key's version (its ETag) in ``DeleteObjects`` (an older one
    refuses the parameter): where it does not, a lock object is not released in a batch."""
    import fsspec.asyn

    client = fsspec.asyn.sync(st.fs.loop, st.fs.set_session)
    objects = client.meta.service_model.operation_model("DeleteObjects").input_shape.members["Delete"]
    return "ETag" in objects.members["Objects"].member.members


def delete_many(st: Any, paths: list[str], versions: dict[str, Any] | None = None) -> dict[str, str] | None:
    """Delete ``paths`` (one bucket) by the store's batch delete: S3's ``DeleteObjects``, a
    request per :data:`BATCH` keys; path -> the store's error for each that did not go. None
    when the store has no batch delete here (the caller deletes them one by one). A path of
    ``versions`` goes only if still at that version (its ETag), as :func:`delete`."""
    if not batches(st, paths):
        return None
    import fsspec.asyn

    fs = st.fs
    bucket = fs.split_path(paths[0])[0]
    by_key = {fs.split_path(p)[1]: p for p in paths}
    etags = {fs.split_path(p)[1]: v for p, v in (versions or {}).items()}
    failed: dict[str, str] = {}
    keys = list(by_key)
    for i in range(0, len(keys), BATCH):
        chunk = keys[i:i + BATCH]
        try:
            with request_errors(by_key[chunk[0]], "delete"):
                out = fsspec.asyn.sync(fs.loop, s3_call, fs, "delete_objects", Bucket=bucket,
                                       Delete={"Objects": [{"Key": k, **({"ETag": etags[k]} if k in etags else {})}
                                                           for k in chunk], "Quiet": True})
        finally:
            for k in chunk:
                fs.invalidate_cache(by_key[k])
        for err in out.get("Errors") or ():
            key = err.get("Key")
            if key in by_key:
                failed[by_key[key]] = f"{err.get('Code') or 'error'}: {err.get('Message') or ''}".rstrip(": ")
    return failed


def _s3_conditions_known(fs: Any, path: str) -> None:
    """botocore too old to send If-Match would drop it silently (s3fs filters unknown keywords)."""
    import fsspec.asyn

    client = fsspec.asyn.sync(fs.loop, fs.set_session)
    members = client.meta.service_model.operation_model("PutObject").input_shape.members
    if "IfMatch" not in members or "IfNoneMatch" not in members:
        raise RefusedError(f"{path}: this botocore cannot send S3's conditional writes (If-Match); "
                           "pip install -U botocore (1.35.20 or later); refusing")


def check_honoured(st: Any, path: str, data: bytes, token: Any) -> None:
    """Once per bucket: the object ``path`` (just written by us at ``token``) must refuse a write
    "only if absent" and one at a version it is not at. A store that takes either ignores the
    conditions: RefusedError, plainly."""
    if st.protocol == "memory":
        return
    bucket = st.fs.split_path(path)[0]
    key = (id(st.fs), bucket)
    with _PROVING:  # runs pruned at once: one proves it, the others wait for its answer
        if _honoured.get(key):
            return
        if put(st, path, data, None) is None and put(st, path, data, _wrong(st.protocol, token)) is None:
            _honoured[key] = True
            return
        _honoured[key] = False
        raise RefusedError(f"{path}: this {st.protocol}:// store accepts conditional writes but does not honour "
                           "them (a write 'only if absent' replaced an existing object), so two processes could "
                           "overwrite each other's state file; refusing")


def _wrong(protocol: str, token: Any) -> str:
    if protocol in ("gs", "gcs"):
        return str(int(token or 0) + 1_000_003)
    return '"00000000000000000000000000000000"' if token != '"00000000000000000000000000000000"' else '"1"'


__all__ = ["BATCH", "CONDITIONAL", "batch_versions_known", "batches", "check_honoured", "delete", "delete_many",
           "listed_version", "put", "read", "refuse", "supported"]
