#!/usr/bin/env python3
"""A local S3-compatible server modelled on an object store, for the remote bench rows.

    python bench/s3server.py ROOT [--port 0] [--latency 0.05] [--rate-mib 90] [--every-request]

Serves the directory ROOT as buckets (``ROOT/<bucket>/<key>``) on 127.0.0.1,
speaking enough of S3 for s3fs: HeadBucket, HeadObject, GetObject (whole or
one ``Range: bytes=a-b``), ListObjectsV2 (prefix, delimiter, paging). Every
object response waits ``--latency`` seconds before its first byte (S3's
first-byte latency) and then sends at most ``--rate-mib`` MiB/s on its
connection (S3's per-connection throughput); with ``--every-request`` HEADs and listings wait
too (the fleet rows: a request's cost, whatever it asks); bytes come from the files
(``sendfile``), so the server is never the bottleneck. It counts what it
serves: ``GET /__stats__`` answers ``{"requests", "gets", "bytes",
"max_in_flight"}`` (GETs of objects being answered at once) and
``POST /__stats__`` resets the counts. Loopback only. Prints its port on
stdout, then serves until killed.
"""

from __future__ import annotations

import argparse
import email.utils
import hashlib
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
SLICE = 256 << 10  # bytes sent between pacing checks


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = self.gets = self.bytes = self.max_in_flight = self.in_flight = 0

    def doc(self) -> dict:
        return {"requests": self.requests, "gets": self.gets, "bytes": self.bytes,
                "max_in_flight": self.max_in_flight}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a connection serves many requests, as S3's do
    server: Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    # -- plumbing -------------------------------------------------------------

    def _send(self, code: int, body: bytes = b"", ctype: str = "application/xml", head: bool = False,
              headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", "ckptool-bench")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _error(self, code: int, s3code: str, head: bool = False) -> None:
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{s3code}</Code>'
                f"<Message>{s3code}</Message></Error>").encode()
        self._send(code, body, head=head)

    def _split(self) -> tuple[str, str, dict]:
        u = urlsplit(self.path)
        parts = unquote(u.path).lstrip("/").split("/", 1)
        return parts[0], parts[1] if len(parts) > 1 else "", parse_qs(u.query, keep_blank_values=True)

    def _file(self, bucket: str, key: str) -> str | None:
        root = self.server.root
        path = os.path.realpath(os.path.join(root, bucket, key))
        if not path.startswith(root + os.sep) or not os.path.isfile(path):
            return None
        return path

    def _drain(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)

    # -- methods --------------------------------------------------------------

    def do_POST(self) -> None:
        self._drain()
        if self.path.startswith("/__stats__"):
            with self.server.stats.lock:
                self.server.stats.reset()
            self._send(200, b"{}", "application/json")
            return
        self._error(501, "NotImplemented")

    def do_PUT(self) -> None:
        self._drain()
        self._error(501, "NotImplemented")  # read-only: the bench reads

    def do_HEAD(self) -> None:
        self._count()
        if self.server.every_request:
            time.sleep(self.server.latency)
        bucket, key, _ = self._split()
        if not key:
            ok = os.path.isdir(os.path.join(self.server.root, bucket))
            self._send(200 if ok else 404, head=True)
            return
        path = self._file(bucket, key)
        if path is None:
            self._error(404, "NoSuchKey", head=True)
            return
        st = os.stat(path)
        self.send_response(200)
        for k, v in self._meta(path, st).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(st.st_size))
        self.end_headers()

    def do_GET(self) -> None:
        if self.path.startswith("/__stats__"):
            with self.server.stats.lock:
                body = json.dumps(self.server.stats.doc()).encode()
            self._send(200, body, "application/json")
            return
        self._count()
        bucket, key, query = self._split()
        if not key:
            self._list(bucket, query)
            return
        path = self._file(bucket, key)
        if path is None:
            self._error(404, "NoSuchKey")
            return
        self._object(path)

    def _count(self) -> None:
        with self.server.stats.lock:
            self.server.stats.requests += 1

    @staticmethod
    def _meta(path: str, st: os.stat_result) -> dict:
        etag = hashlib.md5(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
        return {"Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True), "ETag": f'"{etag}"',
                "Content-Type": "binary/octet-stream", "Accept-Ranges": "bytes"}

    def _object(self, path: str) -> None:
        stats = self.server.stats
        with stats.lock:
            stats.gets += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            st = os.stat(path)
            size = st.st_size
            start, end, code = 0, size, 200
            rng = self.headers.get("Range")
            if rng:
                m = RANGE.match(rng.strip())
                if not m or int(m.group(1)) >= size:
                    self._error(416, "InvalidRange")
                    return
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
                code = 206
            time.sleep(self.server.latency)  # first byte
            self.send_response(code)
            for k, v in self._meta(path, st).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(end - start))
            if code == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            self.wfile.flush()
            t0, sent, rate = time.perf_counter(), 0, self.server.rate
            with open(path, "rb") as f:
                while start + sent < end:
                    n = min(SLICE, end - start - sent)
                    done = self.connection.sendfile(f, start + sent, n)
                    if not done:
                        break
                    sent += done
                    ahead = t0 + sent / rate - time.perf_counter()
                    if ahead > 0:
                        time.sleep(ahead)
            with stats.lock:
                stats.bytes += sent
        finally:
            with stats.lock:
                stats.in_flight -= 1

    def _list(self, bucket: str, query: dict) -> None:
        if self.server.every_request:
            time.sleep(self.server.latency)
        base = os.path.join(self.server.root, bucket)
        if not os.path.isdir(base):
            self._error(404, "NoSuchBucket")
            return
        q = {k: v[0] for k, v in query.items()}
        if "location" in q:
            self._send(200, f'<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="{NS}"/>'.encode())
            return
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        max_keys = int(q.get("max-keys", "1000") or 1000)
        after = q.get("continuation-token") or q.get("start-after", "")
        keys = []
        for dirpath, _, files in os.walk(base):
            for name in files:
                k = os.path.relpath(os.path.join(dirpath, name), base).replace(os.sep, "/")
                if k.startswith(prefix):
                    keys.append(k)
        entries: list[tuple[str, bool]] = []  # (key or common prefix, is prefix)
        seen = set()
        for k in sorted(keys):
            rest = k[len(prefix):]
            if delim and delim in rest:
                cp = prefix + rest.split(delim, 1)[0] + delim
                if cp not in seen:
                    seen.add(cp)
                    entries.append((cp, True))
            else:
                entries.append((k, False))
        entries = [e for e in entries if e[0] > after] if after else entries
        page, truncated = entries[:max_keys], len(entries) > max_keys
        out = [f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{NS}">',
               f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount>"
               f"<MaxKeys>{max_keys}</MaxKeys><Delimiter>{escape(delim)}</Delimiter>"
               f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"]
        if truncated:
            out.append(f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>")
        for k, is_prefix in page:
            if is_prefix:
                out.append(f"<CommonPrefixes><Prefix>{escape(k)}</Prefix></CommonPrefixes>")
                continue
            st = os.stat(os.path.join(base, k))
            when = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
            etag = self._meta(os.path.join(base, k), st)["ETag"]
            out.append(f"<Contents><Key>{escape(k)}</Key><LastModified>{when}</LastModified>"
                       f"<ETag>{escape(etag)}</ETag><Size>{st.st_size}</Size>"
                       f"<StorageClass>STANDARD</StorageClass></Contents>")
        out.append("</ListBucketResult>")
        self._send(200, "".join(out).encode())


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, root: str, port: int, latency: float, rate: float, every_request: bool = False):
        super().__init__(("127.0.0.1", port), Handler)
        self.every_request = every_request
        self.root = os.path.realpath(root)
        self.latency = latency
        self.rate = rate
        self.stats = Stats()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds to first byte (default 0.05)")
    ap.add_argument("--rate-mib", type=float, default=90.0, help="MiB/s per connection (default 90)")
    ap.add_argument("--every-request", action="store_true",
                    help="the latency before every answer (HEAD, listings), not only objects' first bytes")
    args = ap.parse_args(argv)
    srv = Server(args.root, args.port, args.latency, args.rate_mib * (1 << 20), args.every_request)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
