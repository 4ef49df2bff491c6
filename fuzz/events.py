"""Event-file cases of the operation fuzzer: ``prune --keep-best`` over mutants of the
TF-written TensorBoard event files under tests/data/events/ (TF1 ``simple_value`` and
TF2 tensor summaries, with an ``eval/`` subdirectory each).

:func:`event_tree` puts one of the two runs' event files beside the checkpoints of a
case (in ``run/``, in a log directory named by ``--metrics``, or as one event file),
one or more of them mutated by :func:`mutate_events`: raw bytes, truncation, record
payloads mutated and re-framed with valid CRCs (so the Event parser sees them), Event
fields set to hostile values (steps, wall times, NaN/inf, tensor dtypes, shapes and
contents, tags), impossible record lengths, duplicated and reordered records. A
``--dry-run`` is held to changing nothing; a real prune to deleting only checkpoint files
(fuzz/retain_ops.py), never an event file.
"""

from __future__ import annotations

import json
import random

from ckptool.format import events as ev
from ckptool.format.coding import FIXED32, FIXED64, crc32c, mask_crc
from fuzz import engine

EVENTS = engine.ROOT / "tests" / "data" / "events"
#: steps at which the TF-written event files hold values (checkpoints are named from these)
EVENT_STEPS = tuple(range(100, 1001, 100))
GOOD_TAGS = ("loss", "eval/loss", "accuracy", "eval/accuracy", "learning_rate")
TAGS = GOOD_TAGS + ("nope", "", "*", "eval/", "/loss", "loss\n", "\nckptool: error: forged", "é", "a" * 300)
STEPS = (0, -1, 1, 100, 2**31, 2**63 - 1, -(2**63), 700, 1000)
FLOATS = (float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 5e-324, 0.5, 3.4e38)

_RUNS: dict[str, dict[str, bytes]] | None = None


def event_runs() -> dict[str, dict[str, bytes]]:
    """``{"tf1": {relpath: bytes}, "tf2": {...}}``: the TF-written event files."""
    global _RUNS
    if _RUNS is None:
        out = {}
        for run in ("tf1", "tf2"):
            d = EVENTS / run
            if d.is_dir():
                out[run] = {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("events.out.tfevents.*"))}
        _RUNS = out
    return _RUNS


def _records(data: bytes) -> list[bytes]:
    recs, _ = ev.read_records(data)
    return [bytes(r) for r in recs]


def _frame(records) -> bytes:
    return b"".join(ev.encode_record(r) for r in records)


def _mutate_event(rng: random.Random, payload: bytes) -> tuple[bytes, str]:
    """One Event proto with a field set to a hostile value (re-serialized)."""
    from ckptool.format.protos.event_pb2 import Event

    e = Event()
    try:
        e.ParseFromString(payload)
    except Exception:  # noqa: BLE001 - not an Event: mutate its bytes instead
        return engine.mutate_bytes(rng, payload)
    what = rng.choice(("step", "wall_time", "value", "tag", "dtype", "shape", "content", "drop", "many"))
    values = list(e.summary.value) if e.WhichOneof("what") == "summary" else []
    if what == "step" or not values:
        e.step = rng.choice(STEPS)
        return e.SerializeToString(), f"step {e.step}"
    if what == "wall_time":
        e.wall_time = rng.choice(FLOATS)
        return e.SerializeToString(), f"wall_time {e.wall_time}"
    v = rng.choice(values)
    if what == "value":
        x = rng.choice(FLOATS)
        if v.WhichOneof("value") == "tensor":
            v.tensor.float_val[:] = [x]
            v.tensor.tensor_content = b""
        else:
            v.simple_value = x
        return e.SerializeToString(), f"value {x}"
    if what == "tag":
        v.tag = rng.choice(TAGS)
        return e.SerializeToString(), f"tag {v.tag[:20]!r}"
    if what == "dtype":
        v.tensor.dtype = rng.choice((0, 1, 2, 3, 7, 9, 10, 14, 19, 21, 23, 99))
        return e.SerializeToString(), f"tensor dtype {v.tensor.dtype}"
    if what == "shape":
        del v.tensor.tensor_shape.dim[:]
        for size in rng.choice(((), (1,), (0,), (2,), (1, 1), (2**62,), (-1,))):
            v.tensor.tensor_shape.dim.add(size=size)
        v.tensor.tensor_shape.unknown_rank = rng.random() < 0.1
        return e.SerializeToString(), "tensor shape"
    if what == "content":
        v.tensor.tensor_content = rng.choice((b"", b"\0", b"\0" * 4, b"\xff" * 8, b"\0" * 3, b"x" * 100))
        return e.SerializeToString(), f"tensor_content {v.tensor.tensor_content[:8]!r}"
    if what == "drop":
        e.summary.ClearField("value")
        return e.SerializeToString(), "no values"
    for _ in range(rng.choice((2, 50))):
        e.summary.value.add().CopyFrom(v)
    return e.SerializeToString(), "a value repeated"


def mutate_events(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A mutant of one event file's bytes, and what was done."""
    kind = rng.choice(("bytes", "bytes", "truncate", "payload", "event", "event", "event", "length", "records",
                       "empty"))
    recs = _records(data)
    if kind == "truncate":
        cut = rng.randrange(len(data) + 1)
        return data[:cut], f"truncated at {cut}"
    if kind == "empty":
        return b"", "empty"
    if kind in ("payload", "event") and recs:
        i = rng.randrange(len(recs))
        recs[i], d = (engine.mutate_bytes(rng, recs[i]) if kind == "payload" else _mutate_event(rng, recs[i]))
        return _frame(recs), f"record {i}: {d}"
    if kind == "length" and recs:
        i = rng.randrange(len(recs))
        n = rng.choice((0, 1, 2**31, 2**31 + 1, 2**63, len(recs[i]) + 1, len(recs[i]) - 1))
        head = FIXED64.pack(n % 2**64)
        framed = head + FIXED32.pack(mask_crc(crc32c(head))) + recs[i] + FIXED32.pack(mask_crc(crc32c(recs[i])))
        return _frame(recs[:i]) + framed + _frame(recs[i + 1:]), f"record {i}: length field {n}"
    if kind == "records" and recs:
        how = rng.choice(("dup", "reverse", "drop"))
        if how == "dup":
            recs = recs + recs
        elif how == "reverse":
            recs = recs[::-1]
        else:
            del recs[rng.randrange(len(recs))]
        return _frame(recs), f"records {how}"
    return engine.mutate_bytes(rng, data)


def metrics_jsonl(rng: random.Random, steps) -> tuple[bytes, str]:
    lines = []
    for s in steps:
        v = rng.choice((0.5, s / 1000, float("nan"), "x", None, 1e308, True))
        doc = {"step": rng.choice((s, s, str(s), -1, 2**64, 1.5)), rng.choice(("loss", "loss", "acc")): v}
        lines.append(json.dumps(doc).encode())
    lines.append(rng.choice((b"", b"{", b"[]", b"\xff", b'{"step": 1}', b"null")))
    data = b"\n".join(lines) + b"\n"
    if rng.random() < 0.3:
        data, d = engine.mutate_bytes(rng, data)
        return data, f"metrics.jsonl mutated: {d}"
    return data, "metrics.jsonl"


def event_tree(rng: random.Random, files: dict, names: list[str]) -> tuple[list[str], str]:
    """Add event files (some mutated) for a keep-best case to ``files``; the --metrics
    arguments (maybe none) and a description."""
    runs = event_runs()
    run = rng.choice(sorted(runs)) if runs else None
    src = runs.get(run, {})
    where = rng.choice(("run", "run", "run", "logs", "one", "jsonl", "outside"))
    base = {"run": "run/", "logs": "run/logs/", "one": "run/", "outside": "outside/tb/", "jsonl": "run/"}[where]
    desc = [f"events {run} in {where}"]
    chosen = dict(src)
    if where == "one" and chosen:
        rel = rng.choice(sorted(chosen))
        chosen = {rel: chosen[rel]}
    victims = [r for r in sorted(chosen) if rng.random() < 0.6] or sorted(chosen)[:1]
    for rel in sorted(chosen):
        data = chosen[rel]
        if rel in victims and rng.random() < 0.9:
            data, d = mutate_events(rng, data)
            desc.append(f"{rel} <- {d}")
        files[base + rel] = data
    if rng.random() < 0.1:
        odd = base + "events.out.tfevents.0.odd"
        files[odd] = rng.choice(({"fifo": 1}, {"dir": 1}, {"symlink": "/dev/zero"}, {"sparse": 1 << 30},
                                 {"symlink": "../outside/precious"}))
        desc.append(f"{odd} is {files[odd]}")
    if where == "logs":
        return ["--metrics", "{D}/run/logs"], "; ".join(desc)
    if where == "outside":
        return ["--metrics", "{D}/outside/tb"], "; ".join(desc)
    if where == "one" and chosen:
        return ["--metrics", "{D}/" + base + sorted(chosen)[0]], "; ".join(desc)
    if where == "jsonl":
        files["run/metrics.jsonl"], d = metrics_jsonl(rng, [int(n.rsplit("-", 1)[1]) for n in names])
        desc.append(d)
        return ["--metrics", "{D}/run/metrics.jsonl"], "; ".join(desc)
    return [], "; ".join(desc)


def keep_best_argv(rng: random.Random, files: dict, names: list[str]) -> tuple[list[str], str]:
    """``prune {D}/run --keep-best N --metric TAG [--dry-run]`` with event files in ``files``."""
    extra, desc = event_tree(rng, files, names)
    if rng.random() < 0.7:  # reach the metric code: most cases get a sound state file, no policy file
        paths = "".join(f'all_model_checkpoint_paths: "{n}"\n' for n in names)
        files["run/checkpoint"] = f'model_checkpoint_path: "{names[-1]}"\n{paths}'.encode()
        files.pop("run/.ckptool.toml", None)
        desc += "; state valid"
    keep = rng.choice(("1", "1", "1", "1", "2", "2", "3")) if rng.random() < 0.9 else rng.choice(("0", "2" * 30))
    tag = rng.choice(GOOD_TAGS) if rng.random() < 0.75 else rng.choice(TAGS)
    a = ["prune", "{D}/run", "--keep-best", keep, "--metric", tag] + extra
    if rng.random() < 0.6:  # else a real prune: fuzz/retain_ops.py's deletion oracle holds it
        a.insert(6, "--dry-run")
    if rng.random() < 0.4:
        a += ["--mode", rng.choice(("min", "max", "max", "max", "max", "median"))]
    if rng.random() < 0.5:
        a += ["--max-to-keep", str(rng.choice((0, 1, 2)))]
    a += [o for o in ("--json", "--scan") if rng.random() < 0.4]
    return a, desc + "; argv " + " ".join(a)[:300]


__all__ = ["EVENT_STEPS", "event_runs", "event_tree", "keep_best_argv", "mutate_events"]
