"""Keep the best: which checkpoints score best by a metric (pure; no I/O).

``prune --keep-best N --metric TAG --mode min|max`` keeps, on top of what the
retention policy keeps, the N checkpoints whose metric value at their step is
best. A checkpoint with no value is no candidate. Ties go to the newer one.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ckptool.errors import CkptError

#: The reason prune gives for a checkpoint kept as one of the best.
BEST = "best"
MODES = ("min", "max")


@dataclass(frozen=True)
class BestSpec:
    """What to keep: the ``n`` best by ``metric`` (``mode`` min: lowest is best), the values
    from the event files under the directory or, with ``metrics``, from that JSON Lines file."""

    n: int
    metric: str
    mode: str = "min"
    metrics: str | None = None
    #: (series name, {step: value}) once read (prune reads them before it takes the lock)
    found: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise CkptError(f"keep_best must be a whole number >= 1, not {self.n!r}")
        if not isinstance(self.metric, str) or not self.metric:
            raise CkptError("keep_best needs a metric (--metric TAG)")
        if self.mode not in MODES:
            raise CkptError(f"mode must be min or max, not {self.mode!r}")
        if self.metrics is not None and (not isinstance(self.metrics, str) or not self.metrics):
            raise CkptError(f"metrics must be a path, not {self.metrics!r}")

    def to_json(self) -> dict[str, Any]:
        return {"keep_best": self.n, "metric": self.metric, "mode": self.mode, "metrics": self.metrics}


#: The keys of ``.ckptool.toml`` (and of prune's policy) that ask for keep-best.
BEST_KEYS = ("keep_best", "metric", "mode", "metrics")


def check_policy_value(key: str, value: object) -> bool:
    """Whether ``value`` is valid for the keep-best policy key ``key`` (``.ckptool.toml``'s rule:
    :func:`ckptool.io.control.policy.check_value`)."""
    from ckptool.io.control.policy import check_value

    return key in BEST_KEYS and not check_value(key, value)[0]


def best_settings(policy: Mapping[str, Any]) -> dict[str, Any]:
    """The keep-best settings of an effective policy, for the result's ``policy`` (keep_best 0:
    off; the metric a series template names when none is given, as :func:`spec_from_policy`)."""
    n = policy.get("keep_best") or 0
    metric = policy.get("metric") or (template_metric(policy.get("series")) if n else None)
    return {"keep_best": n, "metric": metric, "mode": policy.get("mode") or "min", "metrics": policy.get("metrics")}


def template_metric(series: object) -> str | None:
    """The one metric field of a series template (``val_loss`` of
    ``model-{epoch:02d}-{val_loss:.2f}.keras``), None when it names none or several."""
    from ckptool.io.layout.series_names import parse_template

    if not isinstance(series, str) or not series:
        return None
    try:
        t = parse_template(series)
    except CkptError:
        return None
    fields = [f for f in t.fields if f not in t.counters]
    return fields[0] if len(fields) == 1 else None


def spec_from_policy(policy: Mapping[str, Any], run_dir: str | None = None) -> BestSpec | None:
    """The BestSpec an effective policy asks for (None when ``keep_best`` is absent or 0).
    A relative ``metrics`` path is taken relative to ``run_dir`` (a ``.ckptool.toml``
    names each run's own file); give absolute paths for one file for all."""
    import os

    n = policy.get("keep_best")
    if not n:
        return None
    metric = policy.get("metric") or template_metric(policy.get("series"))
    if not metric:
        raise CkptError(f"keep_best = {n} needs a metric (--metric TAG, or metric = \"TAG\" in .ckptool.toml)")
    metrics = policy.get("metrics")
    if metrics and run_dir and not (os.path.isabs(metrics) or "://" in metrics):
        metrics = run_dir.rstrip("/") + "/" + metrics if "://" in run_dir else os.path.join(run_dir, metrics)
    return BestSpec(n, metric, policy.get("mode") or "min", metrics or None)


def mark_best(reasons: dict[str, list[str]], pins: Iterable[str], user_pinned: Container[str] = ()) -> None:
    """Say "best" for each kept checkpoint of ``pins`` in a retention Decision's ``reasons``
    (prune pins them as names; the reason the engine gives, "pinned", becomes "best" unless
    the user pinned it too)."""
    from ckptool.ops.retain.retention import PINNED

    for name in pins:
        why = reasons.get(name)
        if why is None:
            continue
        why = [r for r in why if r != PINNED or name in user_pinned]
        if BEST not in why:
            why.append(BEST)
        reasons[name] = why


def choose_best(candidates: Iterable[tuple[str, float | None]], n: int, mode: str) -> list[tuple[str, float]]:
    """The ``n`` best of ``candidates`` ((name, value) pairs, oldest first; value None for
    none), best first. Lower is better with ``mode`` "min", higher with "max"; of equal
    values the newer (later in the list) wins. NaN is no value."""
    if mode not in MODES:
        raise CkptError(f"mode must be min or max, not {mode!r}")
    scored = [(i, name, float(v)) for i, (name, v) in enumerate(candidates)
              if v is not None and not math.isnan(float(v))]
    sign = 1.0 if mode == "min" else -1.0
    scored.sort(key=lambda t: (sign * t[2], -t[0]))
    out: list[tuple[str, float]] = []
    seen = set()
    for _, name, v in scored:
        if name in seen:
            continue
        seen.add(name)
        out.append((name, v))
        if len(out) == n:
            break
    return out


__all__ = ["BEST", "BEST_KEYS", "MODES", "BestSpec", "best_settings", "check_policy_value", "choose_best", "mark_best",
           "spec_from_policy", "template_metric"]
