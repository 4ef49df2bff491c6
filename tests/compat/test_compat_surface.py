"""ckptool.compat.tf without TensorFlow, beyond the readers: the stale-cache cases (issue 38/39),
TF's errors for damaged data files, DType, tf.cast, tf.io.gfile and TF's logging. The same
behaviours are compared with real TF 2.21 in tests/interop/test_tf_shim_surface.py."""

import logging
import os
import pickle
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import ckptool
import ckptool.compat.tf as tf


@pytest.fixture
def ckpt(tmp_path):
    prefix = str(tmp_path / "run" / "ckpt")
    ckptool.write(prefix, {"w": np.arange(6, dtype=np.float32), "s": np.array([b"ab", b"c"], dtype=object)})
    return prefix


def _data(prefix):
    return prefix + ".data-00000-of-00001"


def test_load_variable_reads_each_shard_as_it_is_now(ckpt, tmp_path):
    good = open(_data(ckpt), "rb").read()
    assert tf.train.load_variable(ckpt, "w").tolist() == list(range(6))
    held = tf.train.load_checkpoint(ckpt)
    held.get_tensor("w")  # opens the shard, which it keeps (as TF's reader does)
    other = str(tmp_path / "other" / "ckpt")
    ckptool.write(other, {"w": np.ones(6, np.float32), "s": np.array([b"ab", b"c"], dtype=object)})
    os.replace(_data(other), _data(ckpt))  # replaced: a new file at the same name, same size
    with pytest.raises(tf.errors.OpError, match=r"^TensorBundle at .* shard 0 \(24 bytes\): Checksum does not match: "
                                                r"stored \d{8,} vs\. calculated on the restored bytes \d+$") as e:
        tf.train.load_variable(ckpt, "w")
    assert type(e.value) is tf.errors.OpError and e.value.error_code == tf.errors.UNKNOWN
    assert held.get_tensor("w").tolist() == list(range(6))  # still the file it opened
    os.remove(_data(ckpt))
    with pytest.raises(tf.errors.OpError) as e:
        tf.train.load_variable(ckpt, "w")
    assert str(e.value) == f"{_data(ckpt)}; No such file or directory"
    with open(_data(ckpt), "wb") as f:  # restored
        f.write(good)
    assert tf.train.load_variable(ckpt, "w").tolist() == list(range(6))
    with open(_data(ckpt), "r+b") as f:  # truncated in place
        f.truncate(10)
    with pytest.raises(IndexError, match="^Read less bytes than requested$"):
        tf.train.load_variable(ckpt, "w")
    with open(_data(ckpt), "r+b") as f:  # repaired in place
        f.write(good)
    assert tf.train.load_variable(ckpt, "w").tolist() == list(range(6))
    assert tf.train.load_variable(ckpt, "s").tolist() == [b"ab", b"c"]


def test_a_string_tensor_fails_as_tf_reads_it(ckpt):
    raw = bytearray(open(_data(ckpt), "rb").read())
    with tf.train.load_checkpoint(ckpt)._ckpt as c:  # noqa: SLF001  (where the string entry starts)
        offset = c.entry(b"s").offset
    raw[offset] ^= 0x01  # the first length
    open(_data(ckpt), "wb").write(raw)
    with pytest.raises(tf.errors.OpError, match=r"^The length checksum does not match: expected \d{8,} but actual "
                                                r"is \d{8,}$"):
        tf.train.load_variable(ckpt, "s")


def test_dtype_is_tfs():
    assert tf.float32 == np.float32 and tf.float32 == np.dtype("float32") and tf.bfloat16 == ml_dtypes.bfloat16
    assert tf.float32 == "float32" and tf.float32 == 1 and tf.float32 != np.float64 and tf.float32 != None  # noqa
    assert tf.as_dtype(np.float32) is tf.float32 and tf.as_dtype("half") is tf.float16 and hash(tf.float32) == 1
    assert tf.as_dtype(np.zeros(2)) is tf.float64 and tf.as_dtype(float) is tf.float32
    with pytest.raises(TypeError, match="Cannot convert the argument `type_value`: <class 'int'>"):
        tf.as_dtype(int)
    assert tf.float32.is_floating and tf.int8.is_integer and tf.complex64.is_complex and tf.bool.is_bool
    assert tf.float32.size == 4 and tf.complex128.real_dtype is tf.float64 and tf.int8.min == -128
    assert tf.as_dtype("float32_ref").base_dtype is tf.float32 and tf.float32.as_numpy_dtype is np.float32
    assert pickle.loads(pickle.dumps(tf.bfloat16)) is tf.bfloat16
    with pytest.raises(TypeError, match="Cannot find minimum value of <dtype: 'bool'>"):
        tf.bool.min  # noqa: B018
    assert not hasattr(tf, "float8_e4m3fn")  # TF 2.21 exports it under tf.dtypes.experimental only


def test_cast_returns_a_tensor_as_tfs():
    t = tf.dtypes.cast(np.array([1.7, -2.5]), tf.float32)
    assert t.numpy().dtype == np.float32 and t.numpy().tolist() == [1.7000000476837158, -2.5]
    assert repr(t) == "<tf.Tensor: shape=(2,), dtype=float32, numpy=array([ 1.7, -2.5], dtype=float32)>"
    assert t.shape == [2] and str(t.shape) == "(2,)" and isinstance(t, tf.Tensor) and tf.cast(t, tf.float32) is t
    assert tf.cast(2.7, tf.int32).numpy() == 2 and type(tf.cast(2.7, tf.int32).numpy()) is np.int32
    assert tf.cast(np.ones(2, ml_dtypes.bfloat16), "float32").numpy().dtype == np.float32
    with pytest.raises(tf.errors.UnimplementedError, match="Cast string to float is not supported"):
        tf.cast(np.array([b"a"]), tf.float32)
    with pytest.raises(ValueError, match="non-rectangular"):
        tf.cast([[1], [2, 3]], tf.float32)
    with pytest.raises(AttributeError, match="is not offered"):
        t.eval  # noqa: B018


def test_gfile_is_tfs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("hello\nworld\n")
    g = tf.io.gfile
    assert g.exists("a.txt") and g.isdir("sub") and not g.exists("none")
    assert sorted(g.glob("*")) == ["./a.txt", "./sub"] and g.glob("sub/*") == [] and g.glob("a.txt") == ["a.txt"]
    assert sorted(g.listdir(".")) == ["a.txt", "sub"]
    with g.GFile("a.txt") as f:
        assert f.read() == "hello\nworld\n"
    with g.GFile("a.txt", "rb") as f:
        assert f.readline() == b"hello\n"
    with pytest.raises(tf.errors.NotFoundError, match="^Could not find directory none$"):
        g.listdir("none")
    with pytest.raises(tf.errors.NotFoundError, match="^none; No such file or directory$"):
        g.GFile("none").read()
    g.makedirs("new/x")
    with pytest.raises(tf.errors.FailedPreconditionError, match="^a.txt is not a directory$"):
        g.makedirs("a.txt/z")
    assert tf.compat.v1.gfile.Exists("new/x") and tf.compat.v1.gfile.GFile is g.GFile


def test_logging_and_deprecation_lines_are_tfs(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""\
        import ckptool.compat.tf as tf
        tf.compat.v1.logging.info("hidden")
        tf.compat.v1.logging.warning("shown %d", 1)
        tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
        tf.get_logger().info("now shown")
        tf.compat.v1.train.checkpoint_exists("nope")
        tf.compat.v1.train.checkpoint_exists("nope")
        print(tf.__version__, tf.version.VERSION, tf.compat.v1.VERSION)
    """))
    env = dict(os.environ, PYTHONPATH=str(__import__("pathlib").Path(ckptool.__file__).parents[1]))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert p.stdout == "2.21.0 2.21.0 2.21.0\n"
    assert p.stderr.splitlines() == [
        "WARNING:tensorflow:shown 1", "INFO:tensorflow:now shown",
        f"WARNING:tensorflow:From {script}:6: checkpoint_exists (from tensorflow.python.checkpoint."
        "checkpoint_management) is deprecated and will be removed in a future version.",
        "Instructions for updating:", "Use standard file APIs to check for files with this prefix."]
    assert logging.getLogger("tensorflow") is tf.get_logger()


def test_gfile_reads_the_object_stores_ckptool_reads():
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/gfbucket/run/vocab.txt", b"x\ny\n")
    fs.mkdir("/gfbucket/run/sub")
    g = tf.io.gfile
    assert g.exists("memory://gfbucket/run/vocab.txt") and not g.exists("memory://gfbucket/run/none")
    assert g.isdir("memory://gfbucket/run") and not g.isdir("memory://gfbucket/run/vocab.txt")
    assert sorted(g.listdir("memory://gfbucket/run")) == ["sub", "vocab.txt"]
    assert g.glob("memory://gfbucket/run/*.txt") == ["memory://gfbucket/run/vocab.txt"]
    assert g.GFile("memory://gfbucket/run/vocab.txt").readlines() == ["x\n", "y\n"]
    with pytest.raises(tf.errors.NotFoundError, match="none; No such file or directory$"):
        g.GFile("memory://gfbucket/run/none").read()
    with pytest.raises(AttributeError, match="local files only"):
        g.GFile("memory://gfbucket/run/w.txt", "w").write("x")


def test_schemes_tf_has_no_file_system_for(monkeypatch, tmp_path):
    """Issue 53: foo://, ftp://, hdfs://, http(s):// as TF 2.21 answers (the interop tier compares
    with TF itself): UnimplementedError, isdir False, latest_checkpoint None; no socket opened."""
    import socket

    from ckptool.compat import tf as ctf

    opened = []

    def refuse(*a, **k):
        opened.append(a)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    g = ctf.io.gfile
    for url in ("foo://b/d", "ftp://h/d", "hdfs://n/d", "http://example.com/d", "https://example.com/d"):
        scheme = url.split("://")[0]
        for call, arg in ((g.exists, url), (g.glob, url + "/*"), (g.makedirs, url),
                          (lambda u: g.GFile(u).read(), url + "/f"), (lambda u: g.GFile(u, "w").write("x"), url + "/f"),
                          (ctf.compat.v1.train.checkpoint_exists, url)):
            with pytest.raises(ctf.errors.UnimplementedError, match=f"File system scheme '{scheme}' not implemented"):
                call(arg)
        assert g.isdir(url) is False and list(g.walk(url)) == []
        with pytest.raises(ctf.errors.NotFoundError, match="Could not find directory"):
            g.listdir(url)
        assert ctf.train.latest_checkpoint(url) is None and ctf.train.get_checkpoint_state(url) is None
        with pytest.raises(ValueError, match=f"Failed to get matching files on {url}: UNIMPLEMENTED"):
            ctf.train.list_variables(url)
    assert opened == []
    assert g.isdir(str(tmp_path)) and g.exists("file://" + str(tmp_path))  # local paths as before
