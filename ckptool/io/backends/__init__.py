"""The places that hold files, each a :class:`ckptool.io.base.Storage`: the local file system
(:mod:`~ckptool.io.backends.local`), object stores through fsspec
(:mod:`~ckptool.io.backends.remote`: its files, conditional writes, lock object and read-ahead
in the ``remote_*`` and ``prefetch`` modules), and which serves a path
(:mod:`~ckptool.io.backends.urls`)."""
