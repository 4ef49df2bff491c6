"""verify and inspect --verify say a missing data shard once, and name a damaged slice of a
partitioned variable as users write it (name[0:3]), never by its key bytes (issue 32)."""

import json
import shutil

import numpy as np
import pytest

import ckptool
from clirun import completed

DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def one_shard_gone(tmp_path):
    p = tmp_path / "c"
    ckptool.write(str(p), {f"v{i}": np.full(3, i, np.float32) for i in range(67)}, num_shards=3, sync=False)
    (tmp_path / "c.data-00001-of-00003").unlink()
    with ckptool.open(str(p)) as ck:
        held = sorted(v.name for v in ck.variables() if ck.lookup(v.name).shard_id == 1)
    return p, held


def test_a_missing_shard_is_one_error(one_shard_gone):
    p, held = one_shard_gone
    out = completed("inspect", p, "--verify")
    assert out.returncode == 1
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("ckptool: error:")]
    # the file is named and said missing; its tensors are missing, not corrupt (issue 40)
    assert errors == [f"ckptool: error: {p}.data-00001-of-00003: missing (data shard 1 of 3); "
                      f"{len(held)} tensors are stored there",
                      f"ckptool: error: {p}: verification failed: {len(held)} of 67 tensors missing"]
    assert out.stdout == f"missing: {len(held)} of 67 tensors: {', '.join(held)}\n"
    assert "corrupt" not in out.stdout + out.stderr
    doc = json.loads(completed("inspect", p, "--verify", "--json").stdout)
    assert [(e["name"], e.get("tensors"), e.get("missing")) for e in doc["errors"]] == [
        ("", held, [f"{p}.data-00001-of-00003"])]
    doc = json.loads(completed("verify", p, "--json").stdout)
    assert doc["results"][0]["errors"][0]["missing"] == [f"{p}.data-00001-of-00003"]
    assert "corrupt" not in json.dumps(doc)
    out = completed("verify", p)
    assert out.returncode == 1 and len(out.stdout.splitlines()) == 2, out.stdout  # DAMAGED, then its one line


def test_a_damaged_slice_is_named_as_users_write_it(tmp_path):
    d = tmp_path / "p"
    shutil.copytree(DATA / "partitioned", d)
    data = next(d.glob("*.data-*"))
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0xFF  # the first bytes of the file: emb/bias's first slice
    data.write_bytes(bytes(raw))
    out = completed("inspect", d, "--verify")
    assert out.returncode == 1
    assert "checksum does not match for tensor 'emb/bias[0:3]'" in out.stderr, out.stderr
    assert "\\x00" not in out.stderr and "\\udc" not in out.stderr
    assert out.stdout == "corrupt: 1 of 4 tensors: emb/bias\n"
