"""``convert SRC OUT_DIR --to hf``: pick the architecture, plan every tensor, settle the config, then
write the folder (:mod:`ckptool.ops.transform.hf.folder`).

The source is any convert source (:func:`ckptool.ops.read.source.open_specs`), or an
already open one passed as ``opened`` (a view of a source, such as its moving averages).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ckptool.errors import CkptError, UsageError
from ckptool.ops.transform.hf import ARCHS
from ckptool.ops.transform.hf.weightmap import AVERAGE, Arch, Plan, complete, describe, match, plan, short

if TYPE_CHECKING:
    from ckptool.ops.read.spec import Opened, Spec

_SHOWN = 5


@dataclass
class HfResult:
    dst: str
    arch: str
    architecture: str
    model_type: str
    dry_run: bool = False
    tensors: int = 0
    nbytes: int = 0
    files: list[str] = field(default_factory=list)
    mapping: list[tuple[str, str, tuple[int, ...], str]] = field(default_factory=list)  # tf, hf, shape, transform
    dropped: list[tuple[str, str]] = field(default_factory=list)  # tf, why
    unused: list[str] = field(default_factory=list)  # left out by --allow-unused
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"dst": self.dst, "format": "hf", "tensors": self.tensors, "bytes": self.nbytes,
                "files": list(self.files), "skipped": list(self.unused), "arch": self.arch,
                "architecture": self.architecture, "model_type": self.model_type, "dry_run": self.dry_run,
                "mapping": [{"tf": t, "hf": h, "shape": list(s), "transform": op} for t, h, s, op in self.mapping],
                "dropped": [{"tf": t, "why": w} for t, w in self.dropped], "notes": list(self.notes)}


def _norm(name: str) -> str:
    return re.sub(r"[-_. ]", "", name.lower())


def known() -> str:
    names = sorted({a.family for a in ARCHS} | {a.name for a in ARCHS})
    return ", ".join(names)


def candidates(arch: str | None) -> list[Arch]:
    """The archs ``--arch`` names: a family (its archs), an arch, an alias or a transformers class."""
    if arch is None:
        return list(ARCHS)
    want = _norm(arch)
    found = [a for a in ARCHS if _norm(a.family) == want]
    found = found or [a for a in ARCHS if want in (_norm(a.name), _norm(a.architecture), *map(_norm, a.aliases))]
    if not found:
        raise UsageError(f"unknown architecture {arch!r}; known: {known()}")
    return found


def _seen(arch: Arch, names: list[str]) -> list[str]:
    """The names ``arch``'s patterns look at: its rename's too (Keras's layer_with_weights-N read as layers)."""
    return names if arch.rename is None else [*names, *arch.rename(names).values()]


def detect(archs: list[Arch], specs: Sequence[Spec], src: str, named: bool) -> Arch:
    """The arch for these variables, looking at every name: of the archs whose ``detect`` patterns
    all match some name, the first that places every variable and leaves no weight of its model
    unfilled, else the first that leaves none unfilled, else the first (whose plan then says what
    is wrong); with ``--arch``, its family's last (most general) arch when none matches."""
    from ckptool.ops.transform.hf.coverage import unfilled

    names = [short(s.name) for s in specs]
    fits = [a for a in archs if all(any(re.search(p, n) for n in _seen(a, names)) for p in a.detect)
            and not any(re.search(p, n) for p in a.absent for n in _seen(a, names))]
    scored = []
    for a in fits:
        m = match(a, list(specs))
        scored.append((bool(unfilled(m)), bool(m.unplaced)))
    for want in ((False, False), (False, True)):
        for a, score in zip(fits, scored):
            if score == want:
                return a
    if fits:
        return fits[0]
    if named:
        return archs[-1]
    shown = ", ".join(repr(n) for n in names[:_SHOWN])
    raise CkptError(f"{src}: no known architecture in these variables ({shown}...); known: {known()} "
                    "(--arch names one)")


def same_rules(arch: Arch, model_type: str, where: str) -> Arch:
    """The arch with ``arch``'s rules whose model_type is ``model_type`` (T5 and mT5 share theirs)."""
    if model_type == arch.model_type:
        return arch
    for a in ARCHS:
        if a.rules is arch.rules and a.model_type == model_type:
            return a
    raise CkptError(f"{where}: model_type is {model_type!r}, but the checkpoint is {arch.name} "
                    f"(model_type {arch.model_type!r})")


def settle(arch: Arch, opened: Opened, config_path: str | None, src: str,
           allow_unused: bool) -> tuple[Arch, Plan, dict[str, Any]]:
    """The plan and the final config (``model_type``, ``architectures``, checked against the tensors)."""
    from ckptool.ops.transform.hf.config import read_config, translate
    from ckptool.ops.transform.hf.coverage import unfilled

    cfg: dict[str, Any] = {}
    where = config_path or ""
    if config_path:
        doc, is_hf = read_config(config_path)
        cfg = translate(doc, is_hf, arch)
        if is_hf:  # its model_type stays in cfg: the family's finish then knows it was said
            arch = same_rules(arch, str(cfg["model_type"]), config_path)
        if isinstance(cfg.get("id2label"), dict) and cfg.get("num_labels") is None:
            cfg["num_labels"] = len(cfg["id2label"])  # what transformers counts: checked against a head's rows
    for k, v in arch.defaults.items():
        cfg.setdefault(k, v)
    p = plan(arch, opened.specs, cfg)
    if p.unplaced and not allow_unused:
        more = f" and {len(p.unplaced) - _SHOWN} more" if len(p.unplaced) > _SHOWN else ""
        raise CkptError(f"{src}: no rule of {arch.name} places {', '.join(map(repr, p.unplaced[:_SHOWN]))}{more} "
                        "(--allow-unused leaves them out; --dry-run shows the mapping)")
    if not p.placed:
        raise CkptError(f"{src}: no variable is a weight of {arch.name}")
    missing = unfilled(p)
    if missing:
        more = f" and {len(missing) - _SHOWN} more" if len(missing) > _SHOWN else ""
        raise CkptError(f"{src}: no variable fills {', '.join(map(repr, missing[:_SHOWN]))}{more}, weights of "
                        f"{arch.architecture} ({arch.name}) that transformers would initialise at random; "
                        "the checkpoint is not this model (--arch names another)")
    complete(p, cfg, where)
    if arch.constants is not None:
        p.placed += arch.constants(p)
    arch = same_rules(arch, str(cfg.pop("model_type", arch.model_type)), where or src)
    p.arch = arch
    labels = cfg.pop("num_labels", None)
    if isinstance(labels, int) and "id2label" not in cfg:
        cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(labels)}
        cfg["label2id"] = {f"LABEL_{i}": i for i in range(labels)}
    floats = Counter(d for pl in p.placed if (d := pl.spec.dtype) in ("bfloat16", "float16", "float32", "float64"))
    cfg["dtype"] = floats.most_common(1)[0][0] if floats else "float32"
    final = {"architectures": [arch.architecture], "model_type": arch.model_type}
    final.update(sorted(cfg.items()))
    return arch, p, final


def convert_hf(src: str, dst: str, *, arch: str | None = None, config: str | None = None, vocab: str | None = None,
               max_shard_size: int | str | None = None, dry_run: bool = False, allow_unused: bool = False,
               force: bool = False, sync: bool = True, progress: Callable[[int, int], None] | None = None,
               jobs: int | None = None, opened: Opened | None = None, ema: bool = False) -> HfResult:
    """Write ``src`` as a Hugging Face folder ``dst`` (see the package doc); ``opened`` is an open
    view of ``src`` to export instead of opening it (it is not closed here). ``ema``: each
    variable exported with its moving average's value (:func:`ckptool.ops.transform.convert.averaged.ema_source`)."""
    from ckptool.ops.read.prefetch import prefetch
    from ckptool.ops.read.source import open_specs
    from ckptool.ops.transform.hf.config import beside
    from ckptool.ops.transform.hf.folder import parse_size, write_folder
    from ckptool.ops.transform.hf.tokenizer import tokenizer_files

    limit = parse_size(max_shard_size)
    own = opened is None
    source = open_specs(src) if opened is None else opened
    base = source
    reads: dict[str, str] = {}  # an exported name -> the tensor it reads (--ema: its average)
    try:
        if ema:
            from ckptool.ops.transform.convert.averaged import ema_source

            source, report = ema_source(source, where=src)
            reads = report.source if report is not None else {}
        chosen = detect(candidates(arch), source.specs, src, arch is not None)
        found = None
        if config is None and chosen.required:  # the release's config beside its checkpoint, as released
            config = found = beside(src)
        chosen, p, cfg = settle(chosen, source, config, src, allow_unused)
        result = HfResult(dst, chosen.name, chosen.architecture, chosen.model_type, dry_run, config=cfg)
        if found:
            result.notes.append(f"config: {found} (found beside the checkpoint; --config names another)")
        if ema:
            result.notes.append(f"--ema: {len(reads)} variables exported with their moving average's value")
        result.mapping = [(pl.name, pl.hf, pl.shape, ", ".join(filter(None, (
            "its moving average's value" if pl.spec.name in reads else "", describe(pl.op))))) for pl in p.placed]
        result.dropped = _averages(p, reads) if ema else list(p.dropped)
        result.unused = list(p.unplaced)
        extra = tokenizer_files(vocab, chosen.tokenizer, cfg, result.notes) if vocab else []
        result.tensors = len(p.placed)
        if dry_run:
            return result
        with prefetch(source.checkpoint, [reads.get(pl.spec.name, pl.spec.name) for pl in p.placed
                                          if pl.spec.stored is None], jobs):
            result.files, result.nbytes = write_folder(dst, p, cfg, extra, limit, force=force, sync=sync,
                                                       progress=progress, sources=_identity(source, src))
        return result
    finally:
        if own:
            base.close()


def _averages(p: Plan, reads: dict[str, str]) -> list[tuple[str, str]]:
    """Under ``--ema`` the moving averages are what is exported: each says which weight it becomes."""
    hf = {pl.spec.name: pl.hf for pl in p.placed}
    becomes = {short(avg): hf.get(raw, short(raw)) for raw, avg in reads.items()}
    return [(name, f"exported (--ema): its value is {becomes[name]}" if name in becomes
             else "moving average of no exported weight" if why == AVERAGE else why) for name, why in p.dropped]


def _identity(opened: Opened, src: str) -> list[str]:
    from ckptool.io.safety.destination import checkpoint_identity

    ck = opened.checkpoint
    return checkpoint_identity(ck) if ck is not None else [src]


__all__ = ["HfResult", "candidates", "convert_hf", "detect", "known"]
