"""Every single-bit flip in a checkpoint's files is caught, exhaustively.

Two small fixtures: one written by ckptool.write (float32, int64 scalar,
bfloat16, bool, strings with an empty and a non-UTF-8 element, a zero-size
tensor), one written by TensorFlow (fuzz/corpus/tf/mixed: eight variables
including strings and a partitioned variable). For every bit of every file
(index and data) the file is flipped in place and the checkpoint opened
in-process.

What "caught" means, precisely:

- caught: ``ckptool.open`` raises a CkptError, or ``Checkpoint.verify()``
  reports at least one tensor as corrupt;
- harmless: neither, and every variable (name, dtype, shape, bytes of the
  value) reads exactly as before the flip. This is allowed ONLY for index
  bytes that TensorFlow ignores too: the footer's zero padding after the two
  block handles, the footer's metaindex handle, and the metaindex block itself
  (13 bytes: an empty block and its trailer) -- a bundle's metaindex is empty
  and neither TF's ``Table::Open`` nor ckptool ever reads it; and a flip of a
  handle byte's continuation bit that re-encodes the index handle
  non-canonically to the same value (``0x0f 0x00`` -> ``0x8f 0x00``);
- silent corruption: neither, and some value, dtype, shape or name differs.
  There must be none.

Data files have no unprotected byte: every byte belongs to some tensor and
is covered by its CRC32C (strings also by their length checksum).
"""

import pathlib
import shutil

import numpy as np
import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.format import table as tbl
from fuzz.engine import CORPUS

pytestmark = pytest.mark.slow  # mutation suites: CI runs them; the inner loop does not

FOOTER = tbl.FOOTER_SIZE


def _own(directory: pathlib.Path) -> pathlib.Path:
    import ml_dtypes

    prefix = directory / "small"
    ckptool.write(str(prefix), {
        "w": np.array([1.5, -2.0, 0.25], np.float32),
        "step": np.int64(42),
        "h": np.array([3.0], ml_dtypes.bfloat16),
        "mask": np.array([True, False]),
        "names": np.array([b"", b"ab", b"\xff"], dtype=object),
        "nothing": np.zeros((0, 3), np.float32),
    }, sync=False)
    return prefix


def _tf(directory: pathlib.Path) -> pathlib.Path:
    for p in (CORPUS / "tf").glob("mixed.*"):
        shutil.copy(p, directory / p.name)
    return directory / "mixed"


def _observe(prefix: str):
    """'caught', or a comparable picture of everything the checkpoint says."""
    try:
        with ckptool.open(prefix) as ck:
            if any(err is not None for _, err in ck.verify()):
                return "caught"
            out = []
            for v in ck.variables():
                a = ck.read(v.name)
                body = [bytes(x) for x in a.ravel()] if a.dtype == object else a.tobytes()
                out.append((v.name, v.dtype, v.shape, str(a.dtype), body))
            return out
    except CkptError:
        return "caught"


def _footer_ignored_bits(index: bytes) -> set[int]:
    """Bit positions TF does not interpret: footer padding, metaindex handle, metaindex block."""
    n = len(index)
    start = n - FOOTER
    meta, pos = tbl.BlockHandle.decode(index, start, start + 40, "footer")
    _, end = tbl.BlockHandle.decode(index, pos, start + 40, "footer")
    ignored = set(range(start, pos)) | set(range(end, start + 40))
    ignored |= set(range(meta.offset, meta.offset + meta.size + tbl.TRAILER.size))  # the unread metaindex block
    return {b * 8 + k for b in ignored for k in range(8)}


def _same_index_handle(original: bytes, buf: bytearray, bit: int) -> bool:
    """A footer flip that re-encodes the index handle non-canonically (0x0f -> 0x8f 0x00)
    but to the same value: TF decodes it the same way."""
    start = len(original) - FOOTER
    if not start <= bit // 8 < start + 40:
        return False
    flipped = bytearray(original)
    flipped[bit // 8] ^= 1 << (bit % 8)
    try:
        return tbl.read_footer(bytes(flipped), "f")[1] == tbl.read_footer(original, "f")[1]
    except CkptError:
        return False


FLIPS = {"flips": 0, "caught": 0, "harmless": 0}


@pytest.mark.parametrize("make", [_own, _tf], ids=["ckptool-written", "tf-written"])
def test_every_single_bit_flip_is_caught(make, tmp_path):
    prefix = str(make(tmp_path))
    files = sorted(p for p in tmp_path.iterdir() if p.name.startswith(pathlib.Path(prefix).name + "."))
    total = sum(p.stat().st_size for p in files)
    assert total < 2048, f"fixture too big for an exhaustive sweep ({total} bytes)"
    clean = _observe(prefix)
    assert clean != "caught"
    flips = caught = harmless = 0
    silent, unexpected_harmless = [], []
    for path in files:
        original = path.read_bytes()
        allowed = _footer_ignored_bits(original) if path.suffix == ".index" else set()
        buf = bytearray(original)
        for bit in range(len(original) * 8):
            buf[bit // 8] ^= 1 << (bit % 8)
            path.write_bytes(buf)
            buf[bit // 8] ^= 1 << (bit % 8)
            flips += 1
            seen = _observe(prefix)
            if seen == "caught":
                caught += 1
            elif seen == clean:
                harmless += 1
                if bit not in allowed and not _same_index_handle(original, buf, bit):
                    unexpected_harmless.append((path.name, bit))
            else:
                silent.append((path.name, bit))
        path.write_bytes(original)
    print(f"{flips} flips over {total} bytes: {caught} caught, {harmless} harmless footer bits")
    FLIPS.update(flips=FLIPS["flips"] + flips, caught=FLIPS["caught"] + caught,
                 harmless=FLIPS["harmless"] + harmless)
    assert not silent, f"silent corruption from bit flips: {silent[:10]}"
    assert not unexpected_harmless, f"undetected flips outside the footer's ignored bytes: {unexpected_harmless[:10]}"
    assert flips == total * 8
    assert caught >= flips - (40 + 13) * 8


def test_verify_cli_catches_flips_in_data(tmp_path):
    """`inspect --verify` exits 1 naming the tensor whose bytes were flipped (when the command exists)."""
    from fuzz.engine import _cli

    prefix = _own(tmp_path)
    data = tmp_path / "small.data-00000-of-00001"
    original = data.read_bytes()
    with ckptool.open(str(prefix)) as ck:
        spans = {v.name: ck.entry(v.name.encode()) for v in ck.variables()}
    import contextlib
    import io

    for name, e in spans.items():
        if not e.size:
            continue
        buf = bytearray(original)
        buf[e.offset] ^= 0x10
        data.write_bytes(buf)
        from ckptool.cli.main import main

        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            with pytest.raises(SystemExit) as exc:
                main(["inspect", "--verify", str(prefix)])
        assert exc.value.code == 1, name
        assert name in err.getvalue(), err.getvalue()
    data.write_bytes(original)
    assert _cli(["inspect", "--verify", str(prefix)]) == 0
