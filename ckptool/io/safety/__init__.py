"""Write safety: the one atomic write (:mod:`~ckptool.io.safety.atomic`), the overwrite rule
(:mod:`~ckptool.io.safety.destination`) and directories held by their descriptor, so that a
swapped symlink cannot redirect a write or a delete (:mod:`~ckptool.io.safety.dirfd`)."""
