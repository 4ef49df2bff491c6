"""Unit tests of the one atomic write (ckptool.io.safety.atomic): AtomicFile, publish, write_bytes,
check_destination, and LocalDir.replace, which goes through them."""

from __future__ import annotations

import errno
import os
import re

import pytest

from ckptool.errors import CkptError, RefusedError
from ckptool.io.backends.local import LocalStorage
from ckptool.io.base import ANY
from ckptool.io.oserrors import os_error
from ckptool.io.safety import atomic
from ckptool.io.safety.atomic import AtomicFile, publish, write_bytes
from ckptool.io.safety.destination import check_destination
from ckptool.io.safety.dirfd import LocalDir


class Recording(LocalStorage):
    """The local file system, with every write-side call logged in order; ``fail_rename``
    (a target path) makes the rename onto it fail with ENOSPC; ``on_rename`` is called
    before each rename."""

    def __init__(self, fail_rename: str | None = None, on_rename=None):
        self.log: list[tuple[str, str]] = []
        self.fail_rename = fail_rename
        self.on_rename = on_rename

    def open_write(self, path):
        self.log.append(("open", path))
        return super().open_write(path)

    def fsync_file(self, f):
        self.log.append(("fsync", f.name))
        super().fsync_file(f)

    def rename(self, src, dst):
        self.log.append(("rename", dst))
        if self.on_rename is not None:
            self.on_rename(src, dst)
        if dst == self.fail_rename:
            raise OSError(errno.ENOSPC, "No space left on device")
        super().rename(src, dst)

    def fsync_dir(self, path):
        self.log.append(("fsync_dir", path))
        super().fsync_dir(path)


def _group(st, d, payloads):
    files = []
    for name, data in payloads:
        f = AtomicFile(st, str(d / name))
        f.write(data)
        files.append(f)
    return files


PAYLOADS = [("p.data-00000-of-00002", b"a" * 10), ("p.data-00001-of-00002", b"b" * 7), ("p.index", b"ix")]


def test_temporary_names_are_beside_the_target_and_registered_while_live(tmp_path):
    st = LocalStorage()
    target = str(tmp_path / "p.index")
    f = AtomicFile(st, target)
    assert re.fullmatch(re.escape(target) + r"\.tempstate\d+", f.name)
    assert os.path.dirname(f.name) == str(tmp_path)
    assert f.name in atomic.live_temporaries() and os.path.exists(f.name)
    f.write(b"xyz")
    assert not os.path.exists(target)  # nothing under the final name before publish
    publish([f])
    assert open(target, "rb").read() == b"xyz"
    assert os.listdir(tmp_path) == ["p.index"] and f.name not in atomic.live_temporaries()
    g = AtomicFile(st, target)
    assert g.name != f.name  # fresh every time
    g.discard()
    assert os.listdir(tmp_path) == ["p.index"] and atomic.live_temporaries() == []


def test_publish_renames_in_order_the_index_last_after_every_fsync(tmp_path):
    seen_at_index: list[str] = []

    def on_rename(src, dst):
        if dst.endswith(".index"):
            seen_at_index.extend(sorted(os.listdir(tmp_path)))

    st = Recording(on_rename=on_rename)
    files = _group(st, tmp_path, PAYLOADS)
    assert publish(files) is True
    ops = [op for op in st.log if op[0] != "open"]
    renames = [dst for op, dst in ops if op == "rename"]
    assert renames == [str(tmp_path / n) for n, _ in PAYLOADS]  # data first, index last
    first_rename = next(i for i, op in enumerate(ops) if op[0] == "rename")
    assert [op for op, _ in ops[:first_rename]] == ["fsync"] * 3  # every file durable before any rename
    assert ops[-1] == ("fsync_dir", str(tmp_path))  # the directory after the renames
    # when the index appears, both data shards already have their final names
    assert {"p.data-00000-of-00002", "p.data-00001-of-00002"} <= set(seen_at_index)
    assert sorted(os.listdir(tmp_path)) == sorted(n for n, _ in PAYLOADS)
    for name, data in PAYLOADS:
        assert (tmp_path / name).read_bytes() == data


def test_no_fsync_without_sync(tmp_path):
    st = Recording()
    f = AtomicFile(st, str(tmp_path / "x"), sync=False)
    f.write(b"1")
    publish([f])
    assert [op for op, _ in st.log] == ["open", "rename"]


def test_a_failed_index_rename_rolls_back_the_data_files(tmp_path):
    st = Recording(fail_rename=str(tmp_path / "p.index"))
    files = _group(st, tmp_path, PAYLOADS)
    with pytest.raises(CkptError) as e:
        publish(files)
    msg = str(e.value)
    assert msg.startswith(str(tmp_path / "p.index") + ": cannot rename into place") and "tempstate" not in msg
    assert os.listdir(tmp_path) == []  # no data file without its index, no temporary
    assert atomic.live_temporaries() == []


def test_the_rollback_removes_only_what_this_publish_renamed(tmp_path):
    (tmp_path / "p.data-00000-of-00002").write_bytes(b"old")  # there before, and not ours
    first = AtomicFile(LocalStorage(), str(tmp_path / "p.data-00000-of-00002"))
    first.write(b"new")
    publish([first])
    st = Recording(fail_rename=str(tmp_path / "p.index"))
    files = _group(st, tmp_path, PAYLOADS[1:])
    with pytest.raises(CkptError):
        publish(files)
    assert sorted(os.listdir(tmp_path)) == ["p.data-00000-of-00002"]
    assert (tmp_path / "p.data-00000-of-00002").read_bytes() == b"new"


def test_a_check_that_fails_publishes_nothing(tmp_path):
    files = _group(LocalStorage(), tmp_path, PAYLOADS)
    assert publish(files, check=lambda: False) is False
    assert os.listdir(tmp_path) == [] and atomic.live_temporaries() == []


def test_an_interrupt_while_writing_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with AtomicFile(LocalStorage(), str(tmp_path / "x")) as f:
            f.write(b"half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == [] and atomic.live_temporaries() == []


def test_the_context_manager_publishes_on_a_clean_exit(tmp_path):
    with AtomicFile(LocalStorage(), str(tmp_path / "x")) as f:
        f.write(b"whole")
    assert (tmp_path / "x").read_bytes() == b"whole" and f.published
    f.discard()  # a published file is not touched
    assert (tmp_path / "x").read_bytes() == b"whole"


def test_remove_live_temporaries_sweeps_what_is_being_written(tmp_path):
    f = AtomicFile(LocalStorage(), str(tmp_path / "x"))
    f.write(b"1")
    assert atomic.remove_live_temporaries() == 1
    assert os.listdir(tmp_path) == [] and atomic.live_temporaries() == []
    f.discard()


def test_write_bytes_replaces_and_honours_expect(tmp_path):
    st, target = LocalStorage(), str(tmp_path / "s")
    assert write_bytes(st, target, b"one", expect=None) is True  # absent, as expected
    assert write_bytes(st, target, b"two", expect=None) is False  # not absent any more
    assert write_bytes(st, target, b"two", expect=b"zzz") is False
    assert (tmp_path / "s").read_bytes() == b"one"
    assert write_bytes(st, target, b"two", expect=b"one") is True
    assert write_bytes(st, target, b"three", expect=ANY) is True
    assert os.listdir(tmp_path) == ["s"] and (tmp_path / "s").read_bytes() == b"three"


def test_local_dir_replace_is_the_same_atomic_write(tmp_path):
    renames: list[tuple[str, str]] = []
    real = os.replace

    def spy(src, dst, **kw):
        renames.append((src, dst))
        return real(src, dst, **kw)

    with LocalDir(str(tmp_path)) as d:
        assert d.replace("checkpoint", b"a", expect=None) is True
        assert d.replace("checkpoint", b"b", expect=b"x") is False
        os.replace = spy
        try:
            assert d.replace("checkpoint", b"b", expect=b"a") is True
        finally:
            os.replace = real
    assert os.listdir(tmp_path) == ["checkpoint"] and (tmp_path / "checkpoint").read_bytes() == b"b"
    ((src, dst),) = renames
    assert re.fullmatch(r"checkpoint\.tmp[0-9a-f]{32}", src) and dst == "checkpoint"


def test_local_dir_replace_names_the_file_on_a_disk_error(tmp_path, monkeypatch):
    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    with LocalDir(str(tmp_path)) as d:
        monkeypatch.setattr(os, "replace", full)
        with pytest.raises(CkptError, match=re.escape(str(tmp_path / "checkpoint")) + ": cannot .*No space"):
            d.replace("checkpoint", b"a")
    assert os.listdir(tmp_path) == [] and atomic.live_temporaries() == []


def test_check_destination_refuses_an_existing_target_without_force(tmp_path):
    st = LocalStorage()
    (tmp_path / "dst.index").write_bytes(b"x")
    with pytest.raises(RefusedError, match="already exists; not overwriting it without --force"):
        check_destination(st, [str(tmp_path / "dst.index")], force=False)
    check_destination(st, [str(tmp_path / "dst.index")], force=True)
    check_destination(st, [str(tmp_path / "new.index")], force=False)


def test_a_dangling_symlink_at_the_destination_is_an_existing_destination(tmp_path):
    # fuzz case 1645: convert wrote through runlink/ (a link to run/) onto run/ckpt-22.index, a
    # symlink to nothing, and replaced it without --force; anything at the name counts as there
    st = LocalStorage()
    os.symlink(tmp_path / "nowhere", tmp_path / "dst.index")
    os.symlink(tmp_path, tmp_path / "alias")
    for target in (tmp_path / "dst.index", tmp_path / "alias" / "dst.index"):
        with pytest.raises(RefusedError, match="already exists"):
            check_destination(st, [str(target)], force=False)
        check_destination(st, [str(target)], force=True)


def test_check_destination_refuses_the_source_itself_even_with_force(tmp_path):
    st = LocalStorage()
    (tmp_path / "src.index").write_bytes(b"x")
    os.symlink(tmp_path, tmp_path / "alias")
    for target in (tmp_path / "src.index", tmp_path / "alias" / "src.index"):
        with pytest.raises(RefusedError, match="is the source itself"):
            check_destination(st, [str(target)], force=True, sources=[str(tmp_path / "src.index")])


def test_os_error_keeps_a_storage_worded_missing_error():
    # the S3 writer says "no such bucket" as a MissingError (also a FileNotFoundError): the
    # one OSError wrapper must not reword it as a plain "no such file or directory"
    from ckptool.errors import MissingError

    own = MissingError("s3://b/ckpt.index: cannot write: no such bucket (or parent directory)")
    assert os_error("s3://b/ckpt.index", own, "write") is own
    plain = os_error("/x/ckpt.index", FileNotFoundError(2, "No such file"), "create")
    assert isinstance(plain, MissingError) and str(plain) == "/x/ckpt.index: no such file or directory"
