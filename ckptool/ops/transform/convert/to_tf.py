"""``convert`` to a TF checkpoint: a little-endian V2 entry copied as its stored bytes (CRC kept,
never decoded) unless it is cast; every other tensor encoded from its value."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ckptool.ops.transform.convert.cast import value_of

if TYPE_CHECKING:
    from ckptool.format.cast import Overflows
    from ckptool.ops.read.source import Spec
    from ckptool.ops.transform.convert.formats import ConvertResult


def to_tf(dst: str, specs: list[Spec], result: ConvertResult, num_shards: int, force_ids: tuple[bool, Sequence[str]],
          progress: Callable[[int, int], None] | None, casts: dict[str, str], over: Overflows, sync: bool) -> None:
    from ckptool.ops.write.writer import BundleWriter

    done = 0
    force, ids = force_ids
    with BundleWriter(dst, num_shards=num_shards, force=force, sync=sync, sources=ids) as w:
        for s in specs:
            if s.raw is not None and s.dtype not in casts:
                s.raw.write_to(w, s.name)
                done += s.raw.nbytes
            elif s.stored is not None:
                w.add(s.name, s.stored)
                done += len(s.stored)
            else:
                arr = value_of(s, casts, over, result)
                w.add(s.name, arr)
                done += getattr(arr, "nbytes", 0)
            if progress:
                progress(done, 0)
        over.check(dst)  # before finish: an error here leaves nothing behind
        res = w.finish()
    result.tensors = res.variables
    result.nbytes = res.nbytes
    result.files = list(res.files)


__all__ = ["to_tf"]
