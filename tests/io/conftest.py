"""The object stores of the remote tier, on 127.0.0.1: moto's S3 server and a GCS emulator
(gcp-storage-emulator, pure Python). Fixtures here serve tests/io/test_remote*.py.

What each honours of the conditional writes ckptool relies on (issue 39, item 7), as found:
moto 5.2 honours ``If-Match`` and ``If-None-Match: *`` on PutObject and ``If-Match`` on
DeleteObject, but checks and then writes, so two requests may interleave: the counting
middleware applies writes one at a time, as S3 does. gcp-storage-emulator 2026.7 ignores
``ifGenerationMatch`` entirely (a write at a wrong generation succeeds): the fixture adds
GCS's documented check to its upload and delete handlers (the server is single-threaded, so
the check and the write are one step), and ``honour_generations`` turns that off for the test
that shows ckptool refusing plainly on a store that ignores them.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest

os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")  # no gRPC probe of a bucket's kind

from ckptool.io.backends import remote  # noqa: E402
from clirun import run as run_cli  # noqa: E402


@pytest.fixture
def run(capsys):
    """``run(*argv, code=0)``: ckptool's CLI in-process; ``(stdout, stderr)``, the exit code asserted."""
    def go(*argv, code=0):
        rc, out, err = run_cli(capsys, *argv)
        assert rc == code, (argv, out, err)
        go.last_out = out
        return out, err
    return go


class Counter:
    """WSGI middleware around moto's app: every request, and the body bytes it answered."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        self.writes = threading.Lock()
        self.log: list[dict] = []
        self.delay = 0.0  # seconds added to each ranged GET (a store's first-byte latency)
        self.active = 0  # ranged GETs being answered now
        self.max_active = 0

    def __call__(self, environ, start_response):
        rec = {"method": environ["REQUEST_METHOD"], "path": environ.get("PATH_INFO", ""),
               "query": environ.get("QUERY_STRING", ""), "range": environ.get("HTTP_RANGE"), "bytes": 0}
        ranged = rec["method"] == "GET" and rec["range"] is not None
        with self.lock:
            self.log.append(rec)
            if ranged:
                self.active += 1
                self.max_active = max(self.max_active, self.active)
        try:
            if rec["method"] in ("PUT", "POST", "DELETE"):  # S3 applies each write atomically, its
                with self.writes:  # conditions checked in the same step; moto checks, then writes
                    chunks = list(self.app(environ, start_response))
                rec["bytes"] = sum(map(len, chunks))
                yield from chunks
                return
            if ranged and self.delay:
                import time

                time.sleep(self.delay)
            for chunk in self.app(environ, start_response):
                rec["bytes"] += len(chunk)
                yield chunk
        finally:
            if ranged:
                with self.lock:
                    self.active -= 1

    def reset(self) -> None:
        with self.lock:
            self.log.clear()
            self.max_active = 0

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.log)


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 (a free port), with the standard AWS_* variables
    pointing at it; yields (s3fs filesystem, bucket, counter)."""
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    pytest.importorskip("boto3")
    import logging

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    counter = Counter(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, counter, threaded=True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in [*env, "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"]}
    for k in saved:
        os.environ.pop(k, None)
    os.environ.update(env)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    remote.clear_cache()
    try:
        fs = remote.filesystem("s3")
        bucket = "ckptool-test"
        fs.mkdir(bucket)
        yield fs, bucket, counter
    finally:
        server.shutdown()
        thread.join(10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        s3fs.S3FileSystem.clear_instance_cache()
        remote.clear_cache()


@pytest.fixture
def s3(s3_server):
    fs, bucket, counter = s3_server
    prefix = f"{bucket}/t{uuid.uuid4().hex[:12]}"
    return fs, f"s3://{prefix}", counter




# --------------------------------------------------------------------------- GCS


def _honouring(handler, honour):
    """``handler`` of the emulator with GCS's ``ifGenerationMatch`` precondition (412 when the
    object is not at that generation; ``0``: when it exists)."""
    from http import HTTPStatus

    from gcp_storage_emulator.exceptions import NotFound

    def checked(request, response, storage, *args, **kwargs):
        want = (request.query.get("ifGenerationMatch") or [None])[0]
        if want is not None and honour["on"]:
            name = (request.query.get("name") or [None])[0] or request.params.get("object_id")
            try:
                now = str(storage.get_file_obj(request.params["bucket_name"], name).get("generation") or "0")
            except NotFound:
                now = "0"
            if now != str(want):
                response.status = HTTPStatus.PRECONDITION_FAILED
                return None
        return handler(request, response, storage, *args, **kwargs)

    return checked


@pytest.fixture(scope="session")
def gcs_server():
    """gcp-storage-emulator on 127.0.0.1 (a free port), reached by gcsfs through
    STORAGE_EMULATOR_HOST (subprocesses too); yields (gcsfs filesystem, bucket, honour flag)."""
    pytest.importorskip("gcsfs")
    pytest.importorskip("gcp_storage_emulator")
    import logging

    from gcp_storage_emulator import server as gse
    from gcp_storage_emulator.handlers import objects

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    honour = {"on": True}
    for _, methods in gse.HANDLERS:
        for verb, fn in list(methods.items()):
            if fn in (objects.insert, objects.delete):
                methods[verb] = _honouring(fn, honour)
    bucket = "ckptool-gcs-test"
    srv = gse.create_server("127.0.0.1", 0, in_memory=True, default_bucket=bucket)
    srv.start()
    httpd = srv._api._httpd
    loud = httpd.handle_error

    def quiet(request, address):  # a client that hung up early (a read cut short) is no failure
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            loud(request, address)

    httpd.handle_error = quiet
    host, port = httpd.server_address[:2]
    env = {"STORAGE_EMULATOR_HOST": f"http://{host}:{port}", "FSSPEC_GS_TOKEN": "anon",
           "FSSPEC_GS_PROJECT": "ckptool-test", "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import fsspec.config

    fsspec.config.set_conf_env(fsspec.config.conf)
    remote.clear_cache()
    try:
        yield remote.filesystem("gs"), bucket, honour
    finally:
        srv.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        fsspec.config.conf.pop("gs", None)
        remote.clear_cache()


@pytest.fixture
def gs(gcs_server):
    fs, bucket, _ = gcs_server
    return fs, f"gs://{bucket}/t{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["s3", "gs"])
def store(request):
    """``(filesystem, root URL)`` on each store of the tier in turn."""
    got = request.getfixturevalue(request.param)
    return got[0], got[1]
