"""Run one command and report its wall time and peak RSS (used by bench/run.py).

    python bench/launch.py REPORT_FILE ARGV...

A separate, tiny process on purpose: on Linux a child's ru_maxrss starts from
its parent's RSS at fork, so the harness (which holds numpy and workload
buffers) must not be the direct parent of a measured process. This launcher
is ~10 MB, below any python process it starts, so the child's peak is its own.
"""

import json
import os
import sys
import time

report, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
code = os.waitstatus_to_exitcode(status)
with open(report, "w") as f:
    json.dump({"wall": wall, "maxrss_kb": usage.ru_maxrss, "exit": code}, f)
sys.exit(code if code >= 0 else 1)
