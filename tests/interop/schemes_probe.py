"""tf.io.gfile and tf.train on schemes TF 2.21 has no file system for (foo://, ftp://, hdfs://,
http(s)://): every answer printed a line, under real TF (``schemes_probe.py tf``) or the shim
(``... shim``); sockets are stubbed so that any network use is recorded (and fails)."""

import os
import socket
import sys

calls = []


def _connect(self, *a, **k):
    calls.append(a)
    raise OSError("no network")


def _getaddrinfo(*a, **k):
    calls.append(("dns",) + a[:2])
    raise socket.gaierror("no dns")


socket.socket.connect = _connect
socket.getaddrinfo = _getaddrinfo
if sys.argv[1] == "tf":
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import tensorflow as tf
else:
    import ckptool.compat.tf as tf


def probe(name, f):
    try:
        return f"{name} -> {f()!r}"
    except Exception as e:  # noqa: BLE001  (each answer, whatever it is, is printed)
        return f"{name} !! {type(e).__name__} | {e}"


def calls_of(url):
    g = tf.io.gfile
    return [("exists", lambda: g.exists(url)), ("isdir", lambda: g.isdir(url)), ("listdir", lambda: g.listdir(url)),
            ("glob", lambda: g.glob(url + "/*")), ("glob1", lambda: g.glob(url)), ("makedirs", lambda: g.makedirs(url)),
            ("read", lambda: g.GFile(url + "/f").read()), ("write", lambda: g.GFile(url + "/f", "w").write("x")),
            ("size", lambda: g.GFile(url + "/f").size()), ("walk", lambda: list(g.walk(url))),
            ("latest", lambda: tf.train.latest_checkpoint(url)), ("state", lambda: tf.train.get_checkpoint_state(url)),
            ("cexists", lambda: tf.compat.v1.train.checkpoint_exists(url + "/ckpt-1")),
            ("list_variables", lambda: tf.train.list_variables(url)),
            ("load_checkpoint", lambda: tf.train.load_checkpoint(url)),
            ("NewCheckpointReader", lambda: tf.compat.v1.train.NewCheckpointReader(url + "/ckpt-1")),
            ("v1Exists", lambda: tf.compat.v1.gfile.Exists(url)),
            ("v1IsDirectory", lambda: tf.compat.v1.gfile.IsDirectory(url))]


out = []
for url in ["foo://bucket/dir", "ftp://host/dir", "hdfs://nn/dir", "http://example.com/dir", "https://example.com/dir",
            "Foo://x/y"]:
    out += [url + " " + probe(name, f) for name, f in calls_of(url)]
out.append(f"network: {calls}")
print("\n".join(out))
