"""tests/robustness: hostile input, crashes, races. The fuzz engine lives in fuzz/ at the repo root."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
