"""The ``--json`` output of every command on the bundled fixtures, against tests/golden/*.json.

A change of shape (a key renamed, added or dropped, a value changed) shows as a
diff here. When the change is intended, regenerate the files and review the
diff of tests/golden/ in the commit:

    PYTHONPATH=$PWD python -m tests.golden.regen

The cases are in tests/golden/cases.py; they run through ckptool's own entry
point in-process (tests/clirun.py), exit codes included.
"""

import difflib
import json
import os
import pathlib
import time

import pytest
from golden.cases import CASES, GOLDEN, normalize

from clirun import run

REGEN = os.environ.get("CKPTOOL_GOLDEN_REGEN") == "1"
SCHEMAS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "json"


def check_schema(command: str, doc) -> None:
    """``doc`` (a --json document of ``command``) is valid against docs/json/<command>.schema.json."""
    import jsonschema

    schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def command_of(argv) -> str:
    return next(a for a in argv if not a.startswith("-"))
HOW = "PYTHONPATH=$PWD python -m tests.golden.regen"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name, tmp_path, capsys):
    steps = CASES[name](tmp_path)
    start = time.time()
    for argv, want in steps:
        code, out, err = run(capsys, *argv)
        assert code == want, f"ckptool {' '.join(argv)}: exit {code}, expected {want}\n{err}"
    check_schema(command_of(steps[-1][0]), json.loads(out))  # the raw document, before normalization
    got = normalize(out, tmp_path, (start, time.time()))
    path = GOLDEN / f"{name}.json"
    if REGEN:
        path.write_text(got, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no golden file {path.name}; create it with: {HOW}")
    want_text = path.read_text(encoding="utf-8")
    if got != want_text:
        diff = "".join(difflib.unified_diff(want_text.splitlines(True), got.splitlines(True),
                                            f"tests/golden/{path.name}", "ckptool output"))
        pytest.fail(f"ckptool {' '.join(steps[-1][0])}: --json output differs from the golden file.\n"
                    f"{diff}\nIf the change is intended, regenerate with: {HOW}", pytrace=False)


@pytest.mark.skipif(REGEN, reason="regen removes stale files itself")
def test_no_stale_golden_files():
    stale = sorted(p.name for p in GOLDEN.glob("*.json") if p.stem not in CASES)
    assert not stale, f"golden files without a case (remove them, or run {HOW}): {stale}"
