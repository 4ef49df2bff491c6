"""Optimizer state across the Keras 3 bridge: which tf.keras optimizer variable is which dataset of
Keras 3's ``optimizer/vars`` (and, mixed precision, ``optimizer/inner_optimizer/vars``), and
whether the target holds the source's state exactly (docs/FORMAT.md §14.2).

tf.keras >= 2.11 writes ``_iterations``, ``_learning_rate`` and ``_variables/1..`` (the legacy
optimizers ``iter``, ``learning_rate`` and per-variable slots); a ``LossScaleOptimizer`` adds
``loss_scale/{good_steps,current_loss_scale}`` beside its inner optimizer's variables. Keras 3
writes ``vars/0`` iterations, ``vars/1`` learning rate (none under a schedule), then the slots in
the same order; its ``LossScaleOptimizer`` writes its own iterations and learning rate (constants
Keras never changes), ``step_counter`` and ``dynamic_scale`` (once built), then the inner
optimizer's variables, which ``inner_optimizer/vars`` holds again. A template saved before its
optimizer was built holds the head only: the slots it will have are known from the optimizer's
config (a ``.keras`` template, ``--template-config``) or, for the optimizers whose slots do not
depend on their config, from its name, and must be what the source has, kind by kind (the kinds
come from the source's variable names: ``m``, ``v``, ``vhat``, ``average``, ...). Beside the slots,
Nadam's product goes last (:data:`TRAILING`; the layout is :mod:`ckptool.format.keras3`'s); Adafactor's
slots come from its own lists, with the placeholders Keras 3 writes for the variables it does not factor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ckptool.format.keras3 import uncounted
from ckptool.format.objgraph import ObjectGraph

#: legacy (tf.keras < 2.11) hyperparameters: Keras 3 keeps them in the config, not as state
HYPER = {"beta_1", "beta_2", "decay", "epsilon", "rho", "momentum", "initial_accumulator_value"}
#: the slot kinds (tf.keras's names) Keras 3 gives each trainable variable, per optimizer class
_KINDS: dict[str, list[str]] = {"Adam": ["m", "v"], "AdamW": ["m", "v"], "Adamax": ["m", "u"],
                                "Adadelta": ["accumulated_grad", "accumulated_delta_var"],
                                "Ftrl": ["accumulator", "linear"], "Adagrad": ["accumulator"], "Lion": ["m"],
                                "Nadam": ["m", "v"], "Adafactor": ["r", "c", "v"]}
#: variables an optimizer keeps beside its slots, by class: tf.keras's attribute names, which Keras 3
#: writes after the slots in this order (Nadam's running product of its momentum schedule)
TRAILING: dict[str, list[str]] = {"Nadam": ["_u_product"]}  # by name; their count: format.keras3.TRAILING_STATE
#: an optimizer's default name (``vars`` group's ``name`` attribute) -> its class, for the classes
#: whose slots do not depend on their config beyond amsgrad/use_ema (which change the kinds)
_BY_NAME = {"adam": "Adam", "adamw": "AdamW", "adam_w": "AdamW", "adamax": "Adamax", "adadelta": "Adadelta",
            "ftrl": "Ftrl", "adagrad": "Adagrad", "lion": "Lion", "nadam": "Nadam", "adafactor": "Adafactor"}
#: the legacy optimizers' slot names that the TF >= 2.11 ones renamed
_LEGACY = {"rms": "velocity", "mg": "average_gradient"}
BUILD_HINT = ("save the template after model.optimizer.build(model.trainable_variables), give a .keras "
              "template or --template-config (the compiled model's model.to_json()), or --skip-optimizer")


@dataclass
class TfOptimizer:
    """The variable nodes of a tf.keras optimizer: iterations, learning rate (None under a
    schedule), the slots in Keras 3's order with their kinds, the loss scale's ``(good_steps,
    current_loss_scale)``, what Keras 3 keeps as config (``ignored``), and every variable."""

    it: int | None
    lr: int | None
    slots: list[int]
    kinds: list[str]
    loss_scale: tuple[int, int] | None
    ignored: list[int]
    every: list[int]
    per_variable: int | None = None  # slots per trainable variable, where the names tell
    trailing: dict[str, int] = field(default_factory=dict)  # a TRAILING attribute name -> its variable


def tf_optimizer(g: ObjectGraph, opt: int, model_order: list[int], var_key: dict[int, str]) -> TfOptimizer:
    kids = dict(g.nodes[opt].children)
    slots: list[int] = []
    if "_iterations" in kids:
        it, lr = kids.get("_iterations"), kids.get("_learning_rate")
        lst = kids.get("_variables")
        if lst is not None:
            numbered = sorted(g.nodes[lst].children, key=lambda x: int(x[0]) if x[0].isdigit() else 1 << 30)
            for _, c in numbered:
                if c in var_key and c != it and c not in slots:
                    slots.append(c)
        ignored = [c for n, c in kids.items() if n == "_current_learning_rate" and c in var_key]
    else:
        it, lr = kids.get("iter"), kids.get("learning_rate")
        names: list[str] = []
        by_var: dict[int, dict[str, int]] = {}
        for s in g.nodes[opt].slot_variables:
            if s.slot_name not in names:
                names.append(s.slot_name)
            by_var.setdefault(s.original_variable_node_id, {})[s.slot_name] = s.slot_variable_node_id
        legacy: list[str] = []
        for v in model_order:
            mine = [n for n in names if n in by_var.get(v, {})]
            slots.extend(by_var[v][n] for n in mine)
            legacy += mine
        ignored = [c for n, c in kids.items() if n in HYPER and c in var_key]
    loss_scale = None
    ls = kids.get("loss_scale")
    if ls is not None:
        lk = dict(g.nodes[ls].children)
        if lk.get("good_steps") in var_key and lk.get("current_loss_scale") in var_key:
            loss_scale = (lk["good_steps"], lk["current_loss_scale"])
    every: list[int] = []
    seen, stack = {opt}, [opt]
    while stack:
        for _, c in g.nodes[stack.pop()].children:
            if c in var_key and c not in every:
                every.append(c)
            elif c not in seen:
                seen.add(c)
                stack.append(c)
    every += [s.slot_variable_node_id for s in g.nodes[opt].slot_variables
              if s.slot_variable_node_id in var_key and s.slot_variable_node_id not in every]
    factored = _factored(g, kids, var_key)
    per: int | None
    if factored is not None:
        slots, kinds, per = factored, ["r", "c", "v"] * (len(factored) // 3), 3
    elif "_iterations" in kids:
        kinds, per = _kinds(g, slots, model_order)
    else:  # legacy slots are named: m, v, ... per variable
        kinds, per = legacy, (len(names) if len(legacy) == len(names) * len(by_var) else None)
    trailing = {n: c for n, c in kids.items() if c in var_key and any(n in t for t in TRAILING.values())}
    return TfOptimizer(it if it in var_key else None, lr if lr in var_key else None, slots, kinds,
                       loss_scale, ignored, every, per, trailing)


def _factored(g: ObjectGraph, kids: dict[str, int], var_key: dict[int, str]) -> list[int] | None:
    """Adafactor's slots in Keras 3's order, ``r_i, c_i, v_i`` per variable, from tf.keras's lists
    ``_r``, ``_c``, ``_v``: a variable of rank < 2 has placeholders (int32 zeros) for ``r`` and ``c``,
    which tf.keras keeps out of ``_variables`` and Keras 3 writes in their places."""
    if not all(n in kids for n in ("_r", "_c", "_v")):
        return None
    lists = [[c for _, c in sorted((int(n), c) for n, c in g.nodes[kids[x]].children if n.isdigit())]
             for x in ("_r", "_c", "_v")]
    if len({len(x) for x in lists}) != 1 or not all(c in var_key for x in lists for c in x):
        return None
    return [c for trio in zip(*lists) for c in trio]


def _full_name(g: ObjectGraph, nid: int) -> str:
    return next((a.full_name for a in g.nodes[nid].attributes), "")


def _kinds(g: ObjectGraph, slots: list[int], model_order: list[int]) -> tuple[list[str], int | None]:
    """Each slot's kind from its name (``Adam/m/dense/kernel`` is kind ``m`` of ``dense/kernel``),
    and how many slots each variable has (None where the names do not tell)."""
    names = sorted({_full_name(g, v) for v in model_order} - {""}, key=len, reverse=True)
    kinds, owners = [], set()
    for s in slots:
        full = _full_name(g, s)
        own = next((n for n in names if full.endswith("/" + n)), None)
        if own is None:
            return ["" for _ in slots], None
        owners.add(own)
        kinds.append(full[:-len(own) - 1].rsplit("/", 1)[-1])
    distinct = list(dict.fromkeys(kinds))
    if owners and len(slots) == len(owners) * len(distinct):
        return kinds, len(distinct)
    return kinds, None


def optimizer_class(config: Any, label: str) -> str | None:
    """The optimizer's class from its config or, without one, its name (None: unknown)."""
    if isinstance(config, dict) and isinstance(config.get("config"), dict):
        return str(config.get("class_name", "")).rsplit(">", 1)[-1]
    return _BY_NAME.get(uncounted(label.lower()))


def trailing_state(tf: TfOptimizer, config: Any, label: str) -> tuple[list[int], str]:
    """The source's variables Keras 3 keeps after the slots (:data:`TRAILING`), in Keras 3's order;
    or a problem where the two optimizers do not keep the same ones."""
    cls = optimizer_class(config, label)
    want = TRAILING.get(cls or "", [])
    if sorted(want) != sorted(tf.trailing):
        what = f"{cls}" if cls else f"'{label}'"
        return [], (f"optimizer: the template's {what} keeps {want or 'no variables'} beside its slots, the source's "
                    f"optimizer {sorted(tf.trailing) or 'none'}; its state cannot be carried exactly "
                    "(--skip-optimizer converts the weights alone)")
    return [tf.trailing[n] for n in want], ""


def expected_kinds(config: Any, label: str) -> tuple[str, list[str] | None]:
    """``(what the optimizer is, the slot kinds it keeps per variable)`` from its config
    (``compile_config["optimizer"]``) or, without one, its name; None where unknown."""
    if isinstance(config, dict) and isinstance(config.get("config"), dict):
        cls = str(config.get("class_name", "")).rsplit(">", 1)[-1]
        c = config["config"]
        if c.get("gradient_accumulation_steps"):
            return f"{cls} with gradient accumulation", None
        if cls == "SGD":
            kinds = ["m"] if c.get("momentum") else []
        elif cls == "RMSprop":
            kinds = ["velocity"] + (["momentum"] if c.get("momentum") else []) + \
                (["average_gradient"] if c.get("centered") else [])
        elif cls in _KINDS:
            kinds = list(_KINDS[cls]) + (["vhat"] if c.get("amsgrad") else [])
        else:
            return cls, None
        return cls, (["average"] if c.get("use_ema") else []) + kinds
    known = _BY_NAME.get(uncounted(label.lower()))  # Keras numbers names: adam, adam_1, ...
    if known is None:
        return f"'{label}'", None
    return f"'{label}' (taken as {known} without amsgrad or EMA)", list(_KINDS[known])


def source_kinds(tf: TfOptimizer, expected: list[str] | None) -> list[str]:
    """The source's slot kinds per variable in tf.keras >= 2.11's names (the legacy ``rms``, ``mg``;
    a legacy SGD's ``momentum`` is the new one's ``m``)."""
    have = [_LEGACY.get(x, x) for x in dict.fromkeys(tf.kinds)]
    return ["m"] if expected == ["m"] and have == ["momentum"] else have


@dataclass
class KerasOptimizer:
    """A Keras 3 file's optimizer: its ``vars`` datasets in order, a LossScaleOptimizer's inner
    ones, the ``name`` attribute and the config when a template config gives it."""

    path: str
    vars: list[str]
    inner_path: str | None = None
    inner: list[str] | None = None
    label: str = ""
    config: Any = None


@dataclass
class OptimizerPlan:
    pairs: list[tuple[int, str]] = field(default_factory=list)
    added: list[tuple[int, str]] = field(default_factory=list)  # new Keras datasets (an unbuilt template)
    kept_tf: list[int] = field(default_factory=list)  # TF variables Keras keeps no place for (all zero)
    kept_keras: list[str] = field(default_factory=list)  # Keras's own constants (a loss scaler's head)
    zero_tf: list[int] = field(default_factory=list)  # TF slots written as zeros (the Keras side has no slot state)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def one_sided(tf_count: int, keras_has: bool, to_keras: bool, skip: bool, template: str) -> tuple[str, str, bool]:
    """``(problem, note, drop)`` where one side has no optimizer state or ``--skip-optimizer``:
    refused where the source's state would be lost unasked; a TF output drops its template's
    optimizer (``drop``: never the old moments beside new weights)."""
    fresh = "Keras will start the optimizer fresh"
    if skip and to_keras:
        return "", f"optimizer: left out as asked: the output keeps the template's optimizer values, and {fresh}", False
    if skip or not keras_has:
        if to_keras:
            return (f"optimizer: the template has no optimizer state (the model was saved uncompiled) and the source "
                    f"has {tf_count} optimizer variables; compile the model before saving the template, or "
                    "--skip-optimizer to convert the weights alone"), "", False
        why = "left out as asked" if skip else "the Keras file has no optimizer state"
        return "", f"optimizer: {why}: the output has none, and tf.keras will start the optimizer fresh", True
    if to_keras:
        return "", f"optimizer: the source has no optimizer state: the output keeps the template's, and {fresh}", False
    return (f"optimizer: the Keras file has optimizer state and the template {template} has none; "
            "--skip-optimizer converts the weights alone"), "", False


def _slots(tf: TfOptimizer, k: KerasOptimizer, what: str, kinds: list[str] | None, built: bool, to_keras: bool,
           is_zero: Callable[[list[int]], bool], out: OptimizerPlan) -> list[int] | None:
    """The source's slots the target keeps, its slot kinds checked against what the template's
    optimizer keeps per variable (``kinds``); None, with a problem in ``out``, where they differ
    or nothing says. Keras 3's SGD without momentum keeps none of tf.keras's momentum slots."""
    certain = isinstance(k.config, dict)  # a config, not a name, says what the optimizer keeps
    slots = list(tf.slots)
    have = source_kinds(tf, kinds)
    if built and not certain and {"average", "vhat"} & set(have):
        out.problems.append(f"optimizer: the source's slots are {have} per variable and nothing says whether the "
                            f"template's {what} lays out the same ones (amsgrad's and EMA's counts agree); give a "
                            ".keras template or --template-config (the compiled model's model.to_json()), or "
                            "--skip-optimizer")
        return None
    if kinds is not None and tf.per_variable is not None and kinds != have and (certain or not built):
        if not kinds and have == ["m"]:  # Keras 3's SGD has no momentum (tf.keras keeps the slots anyway)
            if to_keras:
                zero = " (all zero)" if is_zero(slots) else ""
                out.kept_tf += slots
                out.notes.append(f"optimizer: the template's SGD has no momentum and keeps no slots: the source's "
                                 f"{len(slots)} momentum slots{zero} are not carried")
            else:
                out.zero_tf += slots
                out.notes.append(f"optimizer: the Keras file's SGD has no momentum: the checkpoint's {len(slots)} "
                                 "momentum slots are written as zeros, as a fresh optimizer has them")
            return []
        hint = "" if certain else "; a config (a .keras template, --template-config) says what it keeps"
        out.problems.append(f"optimizer: the template's {what} keeps slots {kinds or 'none'} per variable, the "
                            f"source's optimizer has {have}; its state cannot be carried exactly "
                            f"(--skip-optimizer converts the weights alone){hint}")
        return None
    if kinds is None and {"average", "vhat"} & set(have):
        out.problems.append(f"optimizer: the source's slots are {have} per variable and nothing says how the "
                            f"template's {what} lays out its own; {BUILD_HINT}")
        return None
    return slots


def plan(tf: TfOptimizer, k: KerasOptimizer, to_keras: bool, is_zero: Callable[[list[int]], bool]) -> OptimizerPlan:
    """Pair the two optimizers' state; a problem where the target cannot hold the source's exactly."""
    out = OptimizerPlan()
    head = [t for t in (tf.it, tf.lr) if t is not None]
    inner = k.inner if k.inner is not None else k.vars
    inner_path = k.inner_path if k.inner_path is not None else k.path
    what, kinds = expected_kinds(k.config, k.label)
    built = len(inner) > len(head)
    slots = _slots(tf, k, what, kinds, built, to_keras, is_zero, out)
    if slots is None:
        return out
    extra, why = trailing_state(tf, k.config, k.label)
    if why:
        out.problems.append(why)
        return out
    if not built and slots:
        if not to_keras and extra:
            out.problems.append(f"optimizer: the Keras file's {what} is not built: its state cannot be carried exactly "
                                "(--skip-optimizer converts the weights alone)")
            return out
        if not to_keras:  # no slot state in the source (unbuilt, or a plain SGD): the TF slots start from zero
            out.zero_tf += slots
            out.notes.append(f"optimizer: the Keras file's {what} holds no slots (iterations and learning rate only): "
                             f"the checkpoint's {len(slots)} slot variables are written as zeros, as a fresh "
                             "optimizer has them")
            slots = []
        elif kinds is None or tf.per_variable is None:
            sgd = " (a plain SGD, momentum 0, keeps none even when built: only a config tells it)" \
                if optimizer_class(k.config, k.label) == "SGD" or uncounted(k.label) == "sgd" else ""
            out.problems.append(f"optimizer: the template's {what} holds no slots (saved before it was built, or one "
                                f"that keeps none) and nothing says which slots it will keep{sgd}; {BUILD_HINT}")
            return out
    if built and len(inner) != len(head) + len(slots) + len(extra):
        more = f" + {len(extra)}" if extra else ""
        out.problems.append(f"optimizer: the source has {len(head)} + {len(slots)}{more} variables (iterations, "
                            f"learning rate, slots{', ' + str(list(tf.trailing)) if extra else ''}), Keras "
                            f"{inner_path}/vars has {len(inner)}; its state cannot be carried exactly "
                            "(--skip-optimizer converts the weights alone)")
        return out
    state = head + slots + extra
    if k.inner is not None:  # else a source loss scale has no place: it is left (the mapping's tf_left)
        _loss_scaled(tf, k, state, to_keras, out)
    for i, t in enumerate(state):
        if i < len(inner):
            out.pairs.append((t, inner[i]))
        else:
            out.added.append((t, f"{inner_path}/vars/{i}"))
    if len(inner) < len(state):
        out.notes.append(f"optimizer: {inner_path}/vars holds no slots (the optimizer was not built before saving); "
                         f"the {len(slots)} slot variables of the template's {what} are added after its iterations "
                         "and learning rate, in Keras 3's order")
    return out


def _loss_scaled(tf: TfOptimizer, k: KerasOptimizer, state: list[int], to_keras: bool, out: OptimizerPlan) -> None:
    """Keras 3's LossScaleOptimizer ``vars``: its own iterations and learning rate (constants), then
    (built) ``step_counter``, ``dynamic_scale`` and the inner optimizer's variables again; unbuilt, the
    inner's head follows its own. The inner ``vars`` are the ones Keras loads last: the way back
    reads those."""
    outer = k.vars
    out.kept_keras += outer[:2]
    scaled = len(outer) == 4 + len(k.inner or [])
    if tf.loss_scale is None:  # a built scaler's step_counter and dynamic_scale have no source: left
        if not scaled and to_keras:
            out.problems.append(f"optimizer: the template is mixed precision (a LossScaleOptimizer, not built) and "
                                f"the source is not: its loss scale has no source; {BUILD_HINT}")
        out.kept_keras += outer[4 if scaled else 2:]
        return
    if not to_keras:
        if scaled:
            out.pairs += [(tf.loss_scale[0], outer[2]), (tf.loss_scale[1], outer[3])]
            out.kept_keras += outer[4:]
        else:  # the source's loss scale has no place in an unbuilt scaler: left
            out.kept_keras += outer[2:]
        return
    for i, t in enumerate(list(tf.loss_scale) + state):
        if 2 + i < len(outer):
            out.pairs.append((t, outer[2 + i]))
        else:
            out.added.append((t, f"{k.path}/vars/{2 + i}"))


__all__ = ["BUILD_HINT", "HYPER", "TRAILING", "KerasOptimizer", "OptimizerPlan", "TfOptimizer", "expected_kinds",
           "one_sided", "optimizer_class", "plan", "source_kinds", "tf_optimizer", "trailing_state"]
