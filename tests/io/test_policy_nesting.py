"""A `.ckptool.toml` nested thousands deep (tomllib recurses) is a CorruptError naming the
file, and a prune over it stops with one error line, exit 1, nothing deleted."""

import numpy as np
import pytest

import ckptool
from ckptool.errors import CorruptError
from ckptool.io.control.policy import parse_policy, read_policy
from clirun import run

DEEP = b"keep = " + b"[" * 20000 + b"]" * 20000 + b"\n"


def test_deep_nesting_is_a_corrupt_error_naming_the_file(tmp_path):
    with pytest.raises(CorruptError, match=r"run/\.ckptool\.toml"):
        parse_policy(DEEP, "run/.ckptool.toml")
    (tmp_path / ".ckptool.toml").write_bytes(b"keep = " + b"[" * 20000)  # unclosed too
    with pytest.raises(CorruptError, match=r"\.ckptool\.toml"):
        read_policy(str(tmp_path))


def test_prune_over_a_deep_policy_file_deletes_nothing(tmp_path, capsys):
    d = tmp_path / "run"
    d.mkdir()
    for s in (1, 2, 3):
        ckptool.write(str(d / f"ckpt-{s}"), {"w": np.full(4, s, np.float32)}, sync=False)
    (d / ".ckptool.toml").write_bytes(DEEP)
    before = sorted(p.name for p in d.iterdir())
    code, out, err = run(capsys, "prune", d, "--max-to-keep", "1", "--scan")
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckptool: error:") and ".ckptool.toml" in lines[0]
    assert "Traceback" not in err
    assert sorted(p.name for p in d.iterdir()) == before
