"""What the README offers a contributor first is the quick loop; the full suite stays the
second `sh` block, the one CI runs (issue 32)."""

import pathlib
import re

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_the_quick_loop_comes_before_the_full_suite_and_is_not_run_by_ci():
    fences = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.M | re.S)
    commands = [(lang, body.strip()) for lang, body in fences]
    quick = commands.index(("shell", '.venv/bin/python -m pytest -q -m "not slow" -x'))
    full = commands.index(("sh", ".venv/bin/python -m pytest"))
    assert quick < full
    sh_blocks = [body for lang, body in commands if lang == "sh"]
    assert sh_blocks[1] == ".venv/bin/python -m pytest"  # .ci/run runs the first two sh blocks
    assert all("not slow" not in b for b in sh_blocks[:2])
