"""tests/robustness: hostile input, crashes, races. The fuzz engine lives in fuzz/ at the repo root."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_terminal_summary(terminalreporter):
    """The figures of this run (fuzz cases, kills, races, bit flips), for the CI log."""
    mods = {name.rsplit(".", 1)[-1]: mod for name, mod in list(sys.modules.items())
            if name.rsplit(".", 1)[-1].startswith("test_") and hasattr(mod, "__file__")}
    lines = []
    if "test_mutation" in mods:
        cases = getattr(mods["test_mutation"], "CASES", {})
        lines.append(f"fuzz cases: {sum(cases.values())} ({', '.join(f'{k} {v}' for k, v in cases.items())})")
    if "test_fuzz" in mods and mods["test_fuzz"].RESULT.get("summary"):
        for line in mods["test_fuzz"].RESULT["summary"].report().splitlines():
            lines.append(line.strip())
    if "test_crash" in mods:
        k = mods["test_crash"].KILLS
        line = f"SIGKILLs survived: {k['event']} at disk events, {k['random']} at random moments"
        by = k.get("by_command") or {}
        if by:
            line += " (" + ", ".join(f"{cmd} {e}" + (f" + {r}" if r else "") for cmd, (e, r) in by.items()) + ")"
        lines.append(line)
    if "test_races" in mods:
        r = mods["test_races"].RACES
        lines.append(f"races: {r['saves']} saves by a concurrent writer, {r['prunes']} prunes, "
                     f"{r['polls']} state polls")
    if "test_bitflips" in mods:
        f = mods["test_bitflips"].FLIPS
        lines.append(f"bit flips: {f['flips']} tried, {f['caught']} caught, {f['harmless']} harmless footer bits")
    if any(lines):
        terminalreporter.write_sep("-", "robustness figures")
        for line in lines:
            terminalreporter.write_line(line)
