"""Writer without fsync vs raw bytes to one fresh file, same process (issue 21's write row).

    PYTHONPATH=. python bench/write_floor.py [MiB]
"""

import os
import shutil
import sys
import tempfile
import time

import numpy as np

import ckptool


def main() -> None:
    mib = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    arr = np.random.default_rng(0).random(mib << 17)  # float64: MiB * 2^20 bytes
    d = tempfile.mkdtemp(prefix="ckpt-bench-")
    try:
        raw, ours = [], []
        for i in range(3):
            t0 = time.perf_counter()
            with open(os.path.join(d, f"raw-{i}"), "xb") as f:
                f.write(memoryview(arr).cast("B"))
            raw.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ckptool.write(os.path.join(d, f"ckpt-{i}"), {"w": arr}, sync=False)
            ours.append(time.perf_counter() - t0)
        print(f"{mib} MiB, best of 3: raw {min(raw):.3f} s, ckptool.write(sync=False) {min(ours):.3f} s, "
              f"ratio {min(ours) / min(raw):.2f}x (target <= 1.25x)")
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
