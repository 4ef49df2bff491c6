"""A tf_keras ``training_config`` (what ``model.compile`` was given, as a SavedModel's
``keras_metadata.pb`` or a whole-model ``.h5`` records it) as the ``compile_config`` of a Keras 3
``config.json``: optimizer, learning-rate schedule, losses and metrics (pure JSON to JSON)."""

from __future__ import annotations

from typing import Any

from ckptool.errors import RefusedError
from ckptool.format.keras2_config import obj, untuple

#: tf_keras >= 2.11 optimizers Keras 3 has under the same name and arguments
OPTIMIZERS = {"Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "Ftrl", "Lion", "SGD", "RMSprop", "Nadam",
              "Adafactor"}
SCHEDULES = {"ExponentialDecay", "PiecewiseConstantDecay", "PolynomialDecay", "InverseTimeDecay", "CosineDecay",
             "CosineDecayRestarts"}
LOSSES = {"BinaryCrossentropy", "BinaryFocalCrossentropy", "CategoricalCrossentropy", "CategoricalFocalCrossentropy",
          "CategoricalHinge", "CosineSimilarity", "Hinge", "Huber", "KLDivergence", "LogCosh", "MeanAbsoluteError",
          "MeanAbsolutePercentageError", "MeanSquaredError", "MeanSquaredLogarithmicError", "Poisson",
          "SparseCategoricalCrossentropy", "SquaredHinge"}
#: tf_keras optimizer arguments Keras 3 does not take (jit_compile belongs to compile in Keras 3)
_OPT_GONE = ("jit_compile", "is_legacy_optimizer")
_REDUCTIONS = {"auto": "sum_over_batch_size", "sum_over_batch_size": "sum_over_batch_size", "sum": "sum",
               "none": None}


def _bare(cls: Any) -> str:
    return str(cls).rsplit(">", 1)[-1]


def optimizer(doc: Any, where: str) -> dict[str, Any]:
    """A tf_keras optimizer config (``{"class_name": "Custom>Adam", "config": {...}}``) as Keras 3's;
    a legacy optimizer or a class Keras 3 does not have is refused."""
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise RefusedError(f"{where}: no optimizer config to carry")
    cls, cfg = _bare(doc.get("class_name")), dict(doc["config"])
    if cls in ("LossScaleOptimizer", "LossScaleOptimizerV3"):  # mixed precision (tf_keras 2.11+ says V3)
        if cfg.get("dynamic") is False:
            raise RefusedError(f"{where}: a fixed loss scale: Keras 3's LossScaleOptimizer is dynamic only")
        inner = optimizer(cfg.get("inner_optimizer"), where)
        return obj("keras.optimizers", "LossScaleOptimizer",
                   {"name": "loss_scale_optimizer", "inner_optimizer": inner,
                    "initial_scale": cfg.get("initial_scale", 32768.0),
                    "dynamic_growth_steps": cfg.get("dynamic_growth_steps", 2000)})
    if cfg.get("is_legacy_optimizer") or cls not in OPTIMIZERS:
        kind = "legacy" if cfg.get("is_legacy_optimizer") else "not stock"
        raise RefusedError(f"{where}: the optimizer {cls} ({kind}) has no Keras 3 counterpart; convert without "
                           "--with-optimizer")
    for key in _OPT_GONE:
        cfg.pop(key, None)
    if isinstance(cfg.get("name"), str):
        cfg["name"] = cfg["name"].lower()  # Keras 3 names its optimizers in snake case ('adam')
    lr = cfg.get("learning_rate")
    if isinstance(lr, dict):
        sched = _bare(lr.get("class_name"))
        if sched not in SCHEDULES:
            raise RefusedError(f"{where}: the learning-rate schedule {sched} is not a stock Keras schedule")
        scfg = {k: v for k, v in dict(lr.get("config") or {}).items() if not (k == "name" and v is None)}
        cfg["learning_rate"] = obj("keras.optimizers.schedules", sched, scfg)  # name None: Keras 3 refuses it
    return obj("keras.optimizers", cls, cfg)


def _loss(x: Any, where: str) -> Any:
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, list):
        return [_loss(v, where) for v in x]
    if isinstance(x, dict) and "class_name" not in x:
        return {k: _loss(v, where) for k, v in x.items()}
    cls = _bare(x.get("class_name")) if isinstance(x, dict) else ""
    if cls not in LOSSES:
        raise RefusedError(f"{where}: the loss {cls or x!r} is not a stock Keras loss; convert without "
                           "--with-optimizer")
    cfg = {k: v for k, v in dict(x.get("config") or {}).items() if k != "fn"}
    if "reduction" in cfg:
        cfg["reduction"] = _REDUCTIONS.get(str(cfg["reduction"]), "sum_over_batch_size")
    return obj("keras.losses", cls, cfg)


def _metric(x: Any, where: str) -> Any:
    """tf_keras's compiled metrics: ``MeanMetricWrapper`` of a function as that function's name
    (what Keras 3 takes), others by class."""
    if x is None or isinstance(x, str):
        return x
    if isinstance(x, list):
        return [_metric(v, where) for v in x]
    if isinstance(x, dict) and "class_name" not in x:
        return {k: _metric(v, where) for k, v in x.items()}
    cfg = dict(x.get("config") or {}) if isinstance(x, dict) else {}
    cls = _bare(x.get("class_name")) if isinstance(x, dict) else ""
    if cls == "MeanMetricWrapper" and isinstance(cfg.get("fn"), str):
        return cfg["name"] if cfg.get("name") in ("accuracy", "acc") else cfg["fn"]
    return obj("keras.metrics", cls, cfg)


def _unnest(metrics: Any) -> Any:
    """tf_keras records a one-output model's metrics as a list holding one list."""
    return metrics[0] if isinstance(metrics, list) and len(metrics) == 1 and isinstance(metrics[0], list) else metrics


def compile_config(training: Any, where: str) -> dict[str, Any]:
    """The ``compile_config`` Keras 3 compiles a loaded model with."""
    training = untuple(training)
    if not isinstance(training, dict):
        raise RefusedError(f"{where}: the model was not compiled: no optimizer to carry")
    return {"optimizer": optimizer(training.get("optimizer_config"), where),
            "loss": _loss(training.get("loss"), where), "loss_weights": training.get("loss_weights"),
            "metrics": _metric(_unnest(training.get("metrics")), where),
            "weighted_metrics": _metric(_unnest(training.get("weighted_metrics")), where),
            "run_eagerly": False, "steps_per_execution": 1, "jit_compile": False}


__all__ = ["LOSSES", "OPTIMIZERS", "SCHEDULES", "compile_config", "optimizer"]
