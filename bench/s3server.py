#!/usr/bin/env python3
"""A local S3-compatible server modelled on an object store, for the remote bench rows.

    python bench/s3server.py ROOT [--port 0] [--latency 0.05] [--rate-mib 90] [--every-request]

Serves the directory ROOT as buckets (``ROOT/<bucket>/<key>``) on 127.0.0.1,
speaking enough of S3 for s3fs: HeadBucket, HeadObject, GetObject (whole or
one ``Range: bytes=a-b``), ListObjectsV2 (prefix, delimiter, paging), and the
writes ckptool's prune sends (ckptool/io/backends/remote_cas.py): PutObject
(the whole body; ``If-None-Match: *``: 412 PreconditionFailed when the key
exists; ``If-Match: ETAG``: 412 when it is absent or at another ETag),
DeleteObject (``If-Match`` as PutObject's; else 204, also when absent) and
DeleteObjects (``POST /<bucket>?delete``, a key's ``<ETag>`` its condition: an
``<Error>`` PreconditionFailed for that key; Quiet or not). Writes go to the
files under ROOT (a temporary file outside the buckets, then ``os.replace``); a
write's condition is checked and the write done under one server lock, so two
conditional writes of a key never both win. An object's ETag is the md5 of its
path, size and modification time in ns, which each write sets past the last
write's, so it changes on every write (the same in PutObject's answer, HEAD,
GET and listings). Every object response waits ``--latency`` seconds before its
first byte (S3's first-byte latency) and then sends at most ``--rate-mib`` MiB/s
on its connection (S3's per-connection throughput); with ``--every-request``
HEADs, listings and writes wait too (the fleet rows: a request's cost, whatever
it asks); bytes come from the files (``sendfile``), so the server is never the
bottleneck. It counts what it serves: ``GET /__stats__`` answers
``{"requests", "gets", "puts", "deletes", "deleted", "bytes",
"max_in_flight"}`` (``requests``: every request but these; ``deletes``:
DeleteObject and DeleteObjects requests, ``deleted`` the keys they removed;
``max_in_flight``: GETs of objects being answered at once) and
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
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
SLICE = 256 << 10  # bytes sent between pacing checks
TMP = ".s3server-tmp"  # ROOT/TMP: writes' temporary files, outside every bucket's listing


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = self.gets = self.bytes = self.max_in_flight = self.in_flight = 0
        self.puts = self.deletes = self.deleted = 0

    def doc(self) -> dict:
        return {"requests": self.requests, "gets": self.gets, "puts": self.puts, "deletes": self.deletes,
                "deleted": self.deleted, "bytes": self.bytes, "max_in_flight": self.max_in_flight}


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

    def _body(self) -> bytes:
        """The request's body (a botocore that frames it as ``aws-chunked``: unframed)."""
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "aws-chunked" not in (self.headers.get("Content-Encoding") or ""):
            return data
        out, pos = bytearray(), 0
        while True:  # "<hex size>[;chunk-signature=...]\r\n<bytes>\r\n" ..., "0\r\n" then trailers
            eol = data.index(b"\r\n", pos)
            n = int(data[pos:eol].split(b";")[0], 16)
            if not n:
                return bytes(out)
            out += data[eol + 2:eol + 2 + n]
            pos = eol + 4 + n

    def _wait(self) -> None:
        if self.server.every_request:
            time.sleep(self.server.latency)

    # -- writes ---------------------------------------------------------------

    def _target(self, bucket: str, key: str) -> str | None:
        """Where key ``key`` of ``bucket`` lives (None: no such bucket, or a key that is no file's name)."""
        base = os.path.join(self.server.root, bucket)
        path = os.path.realpath(os.path.join(base, key))
        if not bucket or bucket == TMP or not os.path.isdir(base) or not key or key.endswith("/") \
                or not path.startswith(os.path.realpath(base) + os.sep):
            return None
        return path

    def _no_target(self, bucket: str) -> None:
        if bucket and bucket != TMP and os.path.isdir(os.path.join(self.server.root, bucket)):
            self._error(400, "InvalidRequest")  # the bucket itself, or a key that names no file
        else:
            self._error(404, "NoSuchBucket")

    @staticmethod
    def _same(tag: str, etag: str) -> bool:
        return tag.strip().removeprefix("W/").strip('"') == etag.strip('"')

    def _refused(self, path: str, if_match: str | None, if_none_match: str | None) -> bool:
        """Whether the object at ``path`` fails the request's conditions (call under the write lock)."""
        etag = self._etag(path)
        if if_none_match is not None and (if_none_match.strip() != "*" or etag is not None):
            return True  # only "*" is S3's: "only if there is none"
        return if_match is not None and (etag is None or not self._same(if_match, etag))

    def _etag(self, path: str) -> str | None:
        try:
            return self._meta(path, os.stat(path))["ETag"]
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _put_file(self, path: str, data: bytes) -> str:
        """Write ``data`` at ``path`` (under the write lock), its modification time past the last
        write's (so its ETag is new); its ETag."""
        srv = self.server
        tmp_dir = os.path.join(srv.root, TMP)
        os.makedirs(tmp_dir, exist_ok=True)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            srv.last_ns = max(time.time_ns(), srv.last_ns + 1)
            os.utime(tmp, ns=(srv.last_ns, srv.last_ns))
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return self._meta(path, os.stat(path))["ETag"]

    def _remove(self, path: str) -> bool:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return False
        with self.server.stats.lock:
            self.server.stats.deleted += 1
        return True

    def _write_target(self, kind: str) -> tuple[str | None, bytes]:
        """A write request begun: counted, its body read, the latency waited; the file it names
        under ROOT and the body (None: no such bucket or key, answered already)."""
        self._count(kind)
        data = self._body()
        self._wait()
        bucket, key, _ = self._split()
        path = self._target(bucket, key)
        if path is None:
            self._no_target(bucket)
        return path, data

    def do_PUT(self) -> None:
        path, data = self._write_target("puts")
        if path is None:
            return
        with self.server.write_lock:
            refused = self._refused(path, self.headers.get("If-Match"), self.headers.get("If-None-Match"))
            etag = None if refused else self._put_file(path, data)
        if etag is None:
            self._error(412, "PreconditionFailed")
            return
        self._send(200, headers={"ETag": etag})

    def do_DELETE(self) -> None:
        path, _ = self._write_target("deletes")
        if path is None:
            return
        with self.server.write_lock:
            refused = self._refused(path, self.headers.get("If-Match"), None)
            if not refused:
                self._remove(path)
        if refused:
            self._error(412, "PreconditionFailed")
            return
        self._send(204)

    def _delete_objects(self, bucket: str, body: bytes) -> None:
        """DeleteObjects: ``<Delete><Quiet>?<Object><Key><ETag>?</Object>...</Delete>``."""
        try:
            doc = ET.fromstring(body)
        except ET.ParseError:
            self._error(400, "MalformedXML")
            return
        local = {el: el.tag.rsplit("}", 1)[-1] for el in doc.iter()}
        quiet = any(local[el] == "Quiet" and (el.text or "").strip().lower() == "true" for el in doc)
        objects = []
        for el in doc:
            if local[el] == "Object":
                fields = {local[c]: c.text or "" for c in el}
                objects.append((fields.get("Key", ""), fields.get("ETag")))
        out = [f'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="{NS}">']
        with self.server.write_lock:
            for key, etag in objects:
                path = self._target(bucket, key)
                if path is None or self._refused(path, etag, None):
                    code = "PreconditionFailed" if path is not None else "InvalidRequest"
                    out.append(f"<Error><Key>{escape(key)}</Key><Code>{code}</Code><Message>{code}</Message></Error>")
                    continue
                self._remove(path)
                if not quiet:
                    out.append(f"<Deleted><Key>{escape(key)}</Key></Deleted>")
        out.append("</DeleteResult>")
        self._send(200, "".join(out).encode())

    # -- methods --------------------------------------------------------------

    def do_POST(self) -> None:
        if self.path.startswith("/__stats__"):
            self._body()
            with self.server.stats.lock:
                self.server.stats.reset()
            self._send(200, b"{}", "application/json")
            return
        bucket, key, query = self._split()
        self._count("deletes" if "delete" in query and not key else None)
        body = self._body()
        self._wait()
        if key or "delete" not in query:
            self._error(501, "NotImplemented")
            return
        if not os.path.isdir(os.path.join(self.server.root, bucket)) or bucket == TMP:
            self._error(404, "NoSuchBucket")
            return
        self._delete_objects(bucket, body)

    def do_HEAD(self) -> None:
        self._count()
        self._wait()
        bucket, key, _ = self._split()
        if not key:
            ok = os.path.isdir(os.path.join(self.server.root, bucket))
            self._send(200 if ok else 404, head=True)
            return
        path = self._file(bucket, key)
        try:
            st = os.stat(path) if path is not None else None
        except FileNotFoundError:  # deleted since
            st = None
        if path is None or st is None:
            self._error(404, "NoSuchKey", head=True)
            return
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

    def _count(self, kind: str | None = None) -> None:
        with self.server.stats.lock:
            self.server.stats.requests += 1
            if kind is not None:
                setattr(self.server.stats, kind, getattr(self.server.stats, kind) + 1)

    @staticmethod
    def _meta(path: str, st: os.stat_result) -> dict:
        etag = hashlib.md5(f"{path}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
        return {"Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True), "ETag": f'"{etag}"',
                "Content-Type": "binary/octet-stream", "Accept-Ranges": "bytes"}

    def _object(self, path: str) -> None:
        try:
            f = open(path, "rb")  # these bytes, whatever a write does meanwhile (it replaces the file)
        except FileNotFoundError:  # deleted since
            self._error(404, "NoSuchKey")
            return
        stats = self.server.stats
        with stats.lock:
            stats.gets += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            st = os.fstat(f.fileno())
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
            f.close()
            with stats.lock:
                stats.in_flight -= 1

    def _list(self, bucket: str, query: dict) -> None:
        self._wait()
        base = os.path.join(self.server.root, bucket)
        if not os.path.isdir(base) or bucket == TMP:
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
            try:
                st = os.stat(os.path.join(base, k))
            except FileNotFoundError:  # deleted since the walk
                continue
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
        self.write_lock = threading.Lock()  # a write's condition checked and the write done under it
        self.last_ns = 0  # the modification time the last write set (each write's is past it)


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
