"""docs/api/ is what docs/gen_api.py (pdoc, pinned in the test extra) makes of the docstrings
now: regenerated and compared byte for byte, as tests/cli/test_docs.py does for the man pages.
Regenerate with ``python docs/gen_api.py``."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _files(d: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_api_reference_is_current(tmp_path):
    for seed in ("1", "2"):  # the output must not depend on the hash seed (set/dict order)
        out = tmp_path / seed
        subprocess.run([sys.executable, str(ROOT / "docs" / "gen_api.py"), str(out)], check=True,
                       capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed})
    fresh, again = _files(tmp_path / "1"), _files(tmp_path / "2")
    assert fresh == again, "the API reference depends on the hash seed"
    committed = _files(ROOT / "docs" / "api")
    stale = sorted(n for n in set(fresh) | set(committed) if fresh.get(n) != committed.get(n))
    assert not stale, f"docs/api is stale ({', '.join(stale)}): run python docs/gen_api.py"
    assert "ckptool.html" in committed and "ckptool/compat/tf/train.html" in committed
    page = committed["ckptool/api.html"].decode()
    assert all(f'id="{name}"' in page for name in ("verify", "prune", "convert", "rewrite_names", "average", "save"))
