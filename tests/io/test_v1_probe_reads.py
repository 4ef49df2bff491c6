"""The V1 probe (layout.is_v1_table) and the index probe read a file's footer, then only
the blocks it names: a large file that is no checkpoint, beside a V1 checkpoint, is never
read whole, whether through the library (a byte-counting storage) or through the commands
that probe every file of a directory (inspect, du, prune --dry-run)."""

import collections
import os
import shutil

import pytest

from ckptool.io.backends import local as S
from ckptool.io.layout import checkpoints as layout
from clirun import run

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "data")
BIG = 8 << 20


class CountingReader:
    def __init__(self, inner, counts):
        self.inner, self.counts, self.size = inner, counts, inner.size

    def read(self, offset, size):
        self.counts[self.inner.path] += size
        return self.inner.read(offset, size)

    def readinto(self, offset, buf):
        self.counts[self.inner.path] += len(memoryview(buf).cast("B"))
        return self.inner.readinto(offset, buf)

    def close(self):
        self.inner.close()


class CountingStorage(S.LocalStorage):
    def __init__(self):
        self.counts = collections.Counter()

    def open_reader(self, path):
        return CountingReader(super().open_reader(path), self.counts)

    def read_bytes(self, path):
        data = super().read_bytes(path)
        self.counts[path] += len(data)
        return data


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(os.path.join(DATA, "v1", "single", "v1ckpt"), d / "v1ckpt")
    junk = d / "blob.bin"  # no checkpoint; its tail is no sstable footer
    with open(junk, "wb") as f:
        f.write(os.urandom(1024) * (BIG // 1024))
    (d / "notes.index").write_bytes(b"x" * BIG)  # named like an index, is none
    return d


def test_probes_read_the_footer_only(run_dir):
    st = CountingStorage()
    blob, notes = str(run_dir / "blob.bin"), str(run_dir / "notes.index")
    assert not layout.is_v1_table(st, blob)
    assert not layout.is_index(st, notes)
    assert layout.is_v1_table(st, str(run_dir / "v1ckpt"))
    assert 0 < st.counts[blob] <= 48 and 0 < st.counts[notes] <= 48, st.counts
    found = layout.locate(str(run_dir), st)  # the directory probe: every file of DIR
    assert found.prefix.endswith("v1ckpt")
    assert st.counts[blob] <= 2 * 48 and st.counts[notes] <= 2 * 48, st.counts


@pytest.mark.parametrize("argv", [["inspect", "{D}"], ["du", "{D}"], ["prune", "{D}", "--dry-run", "--scan"]])
def test_commands_never_read_a_big_stray_file_whole(run_dir, capsys, monkeypatch, argv):
    counts = collections.Counter()
    orig = S.RangeReader.readinto

    def readinto(self, offset, buf):
        counts[os.path.basename(self.path)] += len(memoryview(buf).cast("B"))
        return orig(self, offset, buf)

    monkeypatch.setattr(S.RangeReader, "readinto", readinto)
    code, out, err = run(capsys, *[a.replace("{D}", str(run_dir)) for a in argv])
    assert code in (0, 1), err
    assert "Traceback" not in err
    assert counts["blob.bin"] < 4096 and counts["notes.index"] < 4096, counts
