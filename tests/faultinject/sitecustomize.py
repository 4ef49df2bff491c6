"""Put on a child's PYTHONPATH by the crash tests: wraps the file-system calls that change the
disk (faults.install) when CKPTOOL_CRASH_AT or CKPTOOL_FAULT_LOG is set. Test side only:
nothing in ckptool/ reads these variables."""

import os

if os.environ.get("CKPTOOL_CRASH_AT") or os.environ.get("CKPTOOL_FAULT_LOG"):
    import faults

    faults.install()
