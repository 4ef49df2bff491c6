"""Rewrite tests/golden/*.json from the current code: ``PYTHONPATH=$PWD python -m tests.golden.regen``.

Runs tests/cli/test_golden.py with CKPTOOL_GOLDEN_REGEN=1 (each case writes its
file instead of comparing) and removes golden files that no case produces.
Review ``git diff tests/golden`` before committing the result.
"""

import os
import sys

import pytest

from tests.golden.cases import CASES, GOLDEN, REPO


def main() -> int:
    os.environ["CKPTOOL_GOLDEN_REGEN"] = "1"
    code = pytest.main(["-q", "-p", "no:cacheprovider", str(REPO / "tests" / "cli" / "test_golden.py")])
    for p in GOLDEN.glob("*.json"):
        if p.stem not in CASES:
            p.unlink()
            print(f"removed {p.name}")
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
