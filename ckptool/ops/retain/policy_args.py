"""The policy arguments of ``prune``, ``prune --recursive`` and ``du``: each setting given,
or :data:`UNSET` (a ``.ckptool.toml`` may set it, else its default of :data:`POLICY_DEFAULTS`
applies), as the policy dict that :func:`ckptool.io.control.policy.resolve_policy` completes."""

from __future__ import annotations

from typing import Any

from ckptool.errors import CkptError


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: A policy argument not given: a .ckptool.toml may set it, else its default applies.
UNSET: Any = _Unset()
#: The defaults of the policy settings (CheckpointManager's max_to_keep; the rest off).
POLICY_DEFAULTS: dict[str, Any] = {"max_to_keep": 5, "keep_every_n_hours": None, "keep_steps_every": None,
                                   "min_age": None}


def policy_values(max_to_keep: Any = UNSET, keep_every_n_hours: Any = UNSET, keep_steps_every: Any = UNSET,
                  min_age: Any = UNSET, keep: tuple[str, ...] = (),
                  best: Any = None, series: str | None = None) -> tuple[dict[str, Any], set[str]]:
    """The policy dict of arguments (UNSET ones at their default) and the keys given explicitly."""
    given = {"max_to_keep": max_to_keep, "keep_every_n_hours": keep_every_n_hours,
             "keep_steps_every": keep_steps_every, "min_age": min_age}
    explicit = {k for k, v in given.items() if v is not UNSET}
    pol: dict[str, Any] = {k: (POLICY_DEFAULTS[k] if v is UNSET else v) for k, v in given.items()}
    pol["keep"] = list(keep)
    if best is not None:  # --keep-best (a ckptool.ops.retain.keep_best.BestSpec): explicit, as the flags
        pol.update(keep_best=best.n, metric=best.metric, mode=best.mode, metrics=best.metrics)
        explicit |= {"keep_best", "metric", "mode"} | ({"metrics"} if best.metrics is not None else set())
    if series is not None:  # a Keras ModelCheckpoint series (ckptool.ops.retain.series_prune): explicit, as a flag
        pol["series"] = series
        explicit.add("series")
    if pol["max_to_keep"] is not None and pol["max_to_keep"] < 0:
        raise CkptError(f"max_to_keep must be >= 0, not {pol['max_to_keep']}")
    if pol["keep_steps_every"] is not None and pol["keep_steps_every"] <= 0:
        raise CkptError(f"keep_steps_every must be > 0, not {pol['keep_steps_every']}")
    return pol, explicit


__all__ = ["POLICY_DEFAULTS", "UNSET", "policy_values"]
