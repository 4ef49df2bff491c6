"""bench/mutate.py's mutants still apply to the code they name (so the mutation run cannot rot
into a list of no-ops); the run itself is `python bench/mutate.py`."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_mutate", ROOT / "bench" / "mutate.py")
assert _spec is not None and _spec.loader is not None
mutate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mutate  # dataclasses look their module up
_spec.loader.exec_module(mutate)


@pytest.mark.parametrize("m", mutate.MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_once_and_its_tests_exist(m):
    source = (ROOT / m.path).read_text(encoding="utf-8")
    changed = mutate.mutate(source, m)
    assert changed != source and changed.count("\n") == source.count("\n")
    assert all((ROOT / t).is_file() for t in m.tests)
