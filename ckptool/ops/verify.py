"""Verification: read every stored byte, check every checksum, collect each problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ckptool.errors import CkptError
from ckptool.format import bundle
from ckptool.ops.chunks import CHUNK_BYTES, _shown, entry_chunks


@dataclass
class Problem:
    name: str  # the tensor (or "" for the checkpoint as a whole)
    error: str

    def to_json(self) -> dict:
        return {"name": self.name, "error": self.error}


@dataclass
class VerifyReport:
    prefix: str
    tensors: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"prefix": self.prefix, "ok": self.ok, "tensors": self.tensors, "bytes": self.bytes,
                "errors": [p.to_json() for p in self.problems]}


def verify(ck, progress: Callable[[int, int], None] | None = None,
           chunk_bytes: int = CHUNK_BYTES) -> VerifyReport:
    """Read every stored byte and check every checksum; collect each problem.

    ``progress(done_bytes, total_bytes)`` is called as data is read. The
    index (every block CRC, every entry) was already checked when ``ck`` was
    opened; here each entry is parsed again so that one bad entry does not
    hide the others.
    """
    report = VerifyReport(ck.prefix)
    if ck.format != "V2":
        return _verify_v1(ck, report, progress)
    entries, owners = [], {}
    for key in ck.keys():
        try:
            e = ck.entry(key)
        except CkptError as exc:
            report.problems.append(Problem(_shown(key), str(exc)))
            continue
        entries.append(e)
    for e in entries:
        for sl in e.slices:
            owners[bundle.encode_tensor_name_slice(e.key, sl)] = _shown(e.key)
            try:
                ck._slice_entry(e, sl)
            except CkptError as exc:
                report.problems.append(Problem(_shown(e.key), str(exc)))
    plain = [e for e in entries if not e.slices]
    total = sum(e.size for e in plain)
    done = 0
    if progress:
        progress(0, total)
    for e in plain:
        name = owners.get(e.key, _shown(e.key))
        start = done

        def tick(n):
            nonlocal done
            done += n
            if progress:
                progress(done, total)

        try:
            if e.dtype.is_fixed:
                for _ in entry_chunks(ck, e, True, chunk_bytes, tick):
                    pass
            else:
                ck._read_plain(e, True)
        except CkptError as exc:
            report.problems.append(Problem(name, str(exc)))
        done = start + e.size
        if progress:
            progress(done, total)
        if e.key not in owners:
            report.tensors += 1
        report.bytes += e.size
    report.tensors += sum(1 for e in entries if e.slices)
    return report


def _verify_v1(ck, report: VerifyReport, progress) -> VerifyReport:
    variables = ck.variables()
    total = sum(v.nbytes for v in variables)
    done = 0
    for v in variables:
        try:
            ck.read(v.name, verify=True)
        except CkptError as exc:
            report.problems.append(Problem(v.name, str(exc)))
        done += v.nbytes
        report.tensors += 1
        report.bytes += v.nbytes
        if progress:
            progress(done, total)
    return report

