"""The control files of a run directory: its lock (:mod:`~ckptool.io.control.lock`), TF's
``checkpoint`` state file (:mod:`~ckptool.io.control.state`) and the ``.ckptool.toml`` policy
file (:mod:`~ckptool.io.control.policy`)."""
