"""The formats ``convert`` writes, which one a DST names, and what a conversion reports."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import UsageError

TF, NPZ, SAFETENSORS = "tf", "npz", "safetensors"
FORMATS = (TF, NPZ, SAFETENSORS)
HF = "hf"  # a Hugging Face folder: ckptool.ops.transform.hf.export.convert_hf
#: Suffixes of formats ckptool does not write: a DST ending so is refused unless --to says.
FOREIGN = (".pt", ".pth", ".bin", ".h5", ".hdf5", ".keras", ".onnx", ".pb", ".pbtxt", ".pkl", ".pickle",
           ".npy", ".json", ".msgpack", ".gguf", ".tflite", ".zip", ".tar", ".gz", ".index", ".meta")
WRITES = ".safetensors, .npz, or a TF checkpoint prefix (no suffix, or e.g. model.ckpt)"


@dataclass
class ConvertResult:
    dst: str
    format: str
    tensors: int = 0
    nbytes: int = 0
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    cast: dict[str, str] = field(default_factory=dict)  # tensor -> "from->to"
    overflow: dict[str, int] = field(default_factory=dict)  # tensor -> values that became inf (allowed)
    ema: dict[str, Any] | None = None  # --ema: ckptool.ops.transform.convert.averaged.EmaReport.to_json()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"dst": self.dst, "format": self.format, "tensors": self.tensors, "bytes": self.nbytes,
               "files": list(self.files), "skipped": list(self.skipped)}
        if self.cast:
            doc["cast"] = dict(self.cast)
            doc["overflow"] = dict(self.overflow)
        if self.ema is not None:
            doc["ema"] = dict(self.ema)
        return doc


def target_format(dst: str, to: str | None) -> str:
    if to:
        return to
    low = dst.lower().rstrip("/")
    if low.endswith(".npz"):
        return NPZ
    if low.endswith(".safetensors"):
        return SAFETENSORS
    ext = os.path.splitext(low)[1]
    if ext in FOREIGN or low.endswith(".data") or ".data-0" in os.path.basename(low):
        raise UsageError(f"{dst}: ckptool does not write {ext or 'this'} files; it writes {WRITES} "
                         "(give --to tf|npz|safetensors to write this name anyway)")
    return TF


__all__ = ["FORMATS", "HF", "NPZ", "SAFETENSORS", "TF", "ConvertResult", "target_format"]
