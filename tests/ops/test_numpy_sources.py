"""Damaged ``.npz`` / ``.npy`` sources (``save --from``, ``convert``, read by
ops.read.source): zipfile's BadZipFile, EOFError and OSError, numpy's ValueError become a
CorruptError naming the file; never an escape, never click's "aborted" (exit 130) that
an EOFError would turn into."""

import io
import random

import numpy as np
import pytest

from ckptool.errors import CkptError
from ckptool.ops.transform.convert.run import convert
from ckptool.ops.transform.save import save
from clirun import run
from fuzz import engine


def _npz() -> bytes:
    buf = io.BytesIO()
    np.savez(buf, w=np.arange(4, dtype=np.float32), b=np.zeros((2, 2), np.int64))
    return buf.getvalue()


def _npy() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.arange(6, dtype=np.int16).reshape(2, 3))
    return buf.getvalue()


def _mutants(data: bytes, n: int):
    rng = random.Random(5)
    for i in range(n):
        if i % 3 == 0:
            yield data[: rng.randrange(len(data))]
        else:
            yield engine.mutate_bytes(rng, data)[0]


@pytest.mark.parametrize("suffix,make", [(".npz", _npz), (".npy", _npy)])
def test_damaged_numpy_files_are_ckpt_errors(tmp_path, suffix, make):
    refused = 0
    for i, data in enumerate(_mutants(make(), 120)):
        src = tmp_path / f"in{i}{suffix}"
        src.write_bytes(data)
        for fn, dst in ((lambda s, d: save(d, [s], state=False, sync=False), tmp_path / f"s{i}" / "ckpt"),
                        (lambda s, d: convert(s, d, sync=False), tmp_path / f"c{i}" / "ckpt")):
            try:
                fn(str(src), str(dst))
            except CkptError as exc:
                assert str(src) in str(exc)
                refused += 1
    assert refused > 60


def test_the_cli_says_error_not_aborted(tmp_path, capsys):
    data = _npz()
    cut = data[: len(data) // 3] + data[len(data) // 3 + 40:]  # a member's bytes gone: EOF inside it
    src = tmp_path / "in.npz"
    seen = set()
    for d in (cut, data[:-30], data[:60]):
        src.write_bytes(d)
        code, out, err = run(capsys, "save", tmp_path / "o" / "ckpt", "--from", src, "--no-state", "--force")
        assert code in (0, 1), err
        assert "aborted" not in err and "Traceback" not in err
        seen.add(code)
    assert 1 in seen
