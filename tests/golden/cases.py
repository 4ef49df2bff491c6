"""The golden cases: the ``--json`` output of every command on the bundled fixtures.

Each case is a name (the golden file ``tests/golden/<name>.json``) and a
function that, given a scratch directory, prepares what the command needs and
returns a list of steps ``(argv, expected exit code)``. The output of the last
step is the golden document; earlier steps set it up (a convert before a
list-variables of its result, say). Every command runs on a copy of its fixture
made in the scratch directory, with fixed modification times, so that nothing
is written into the repository and ages and orders do not depend on the
checkout.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import pathlib
import re
import shutil

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
GOLDEN = pathlib.Path(__file__).resolve().parent

#: every copied file gets this modification time (2023-11-14 22:13:20 UTC),
#: plus one second per checkpoint step order, so ages and orders are stable.
MTIME = 1_700_000_000

#: fixture -> the CHECKPOINT argument of that fixture, relative to the repository
FIXTURES = {
    "example_keras_adam": "examples/keras_adam",
    "bigendian": "tests/data/bigendian/big",
    "ckpt_save": "tests/data/ckpt_save",
    "dtensor": "tests/data/dtensor",
    "dtypes": "tests/data/dtypes/dtypes",
    "keras_adam": "tests/data/keras_adam",
    "manager": "tests/data/manager",
    "many": "tests/data/many/many",
    "maxshard": "tests/data/maxshard",
    "partitioned": "tests/data/partitioned",
    "savedmodel": "tests/data/savedmodel/model",
    "strings": "tests/data/strings/strings",
    "tf1_saver": "tests/data/tf1_saver",
    "tf1_sharded": "tests/data/tf1_sharded",
    "v1_sharded": "tests/data/v1/sharded",
    "v1_single": "tests/data/v1/single",
    "variant": "tests/data/variant/iter",
}


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """Copy a fixture directory (once), giving every file a fixed mtime (higher steps newer)."""
    if dst.exists():
        return dst
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("expected.json", "state.json"))
    for p in sorted(dst.rglob("*"), reverse=True):  # files before their directories
        m = re.search(r"-(\d+)(?:\.|$)", p.name)
        t = MTIME + (int(m.group(1)) if m and p.is_file() else 0)
        os.utime(p, (t, t))
    return dst


def _fixture(name: str, tmp: pathlib.Path, under: str = "") -> str:
    """The CHECKPOINT argument of fixture ``name``, in a copy made in ``tmp`` (file ages then are stable)."""
    src = REPO / FIXTURES[name]
    if src.is_dir():
        return str(_copy(src, tmp / under / name))
    return str(_copy(src.parent, tmp / under / name) / src.name)


def _one(cmd: str, fx: str, extra: tuple[str, ...], code: int, tmp: pathlib.Path) -> list[tuple[list[str], int]]:
    return [([cmd, _fixture(fx, tmp), *extra, "--json"], code)]


def _cases():
    cases = {}

    def case(name):
        def deco(fn):
            cases[name] = fn
            return fn
        return deco

    def one(name, cmd, fx, *extra, code=0):
        cases[name] = functools.partial(_one, cmd, fx, extra, code)

    for fx in FIXTURES:
        if fx != "many":  # 20 000 names: inspect covers it
            one(f"list-variables__{fx}", "list-variables", fx)
        one(f"inspect__{fx}", "inspect", fx)
        if fx != "example_keras_adam":
            one(f"inspect-verify__{fx}", "inspect", fx, "--verify")
    for fx in ("keras_adam", "dtypes", "partitioned", "tf1_saver"):
        one(f"inspect-stats__{fx}", "inspect", fx, "--stats")
    for fx in ("keras_adam", "ckpt_save", "dtensor", "example_keras_adam"):
        one(f"inspect-tree__{fx}", "inspect", fx, "--tree")
    for fx in ("ckpt_save", "manager", "tf1_saver", "keras_adam", "v1_single"):
        one(f"state__{fx}", "state", fx)

    @case("inspect-tensor__keras_adam")
    def _(tmp):
        return [(["inspect", _fixture("keras_adam", tmp), "--tensor",
                  "optimizer/_trainable_variables/0/.ATTRIBUTES/VARIABLE_VALUE", "--json"], 0)]

    @case("inspect-tensor__strings")
    def _(tmp):
        return [(["inspect", _fixture("strings", tmp), "--tensor", "unicode", "--tensor", "binary",
                  "--tensor", "empty_2x0", "--json"], 0)]

    @case("inspect-tensor__partitioned")
    def _(tmp):
        return [(["inspect", _fixture("partitioned", tmp), "--tensor", "emb/weights", "--json"], 0)]

    @case("diff__example_ckpt-3_ckpt-5")
    def _(tmp):
        ex = _fixture("example_keras_adam", tmp)
        return [(["diff", ex + "/ckpt-3", ex + "/ckpt-5", "--json"], 1)]

    @case("diff__manager_ckpt-4_itself")
    def _(tmp):
        return [(["diff", _fixture("manager", tmp) + "/ckpt-4", _fixture("manager", tmp) + "/ckpt-4", "--json"], 0)]


    @case("state-rebuild-dry-run__manager")
    def _(tmp):
        d = _fixture("manager", tmp)
        return [(["state", str(d), "--rebuild", "--dry-run", "--json"], 0)]

    @case("du__fixtures")
    def _(tmp):
        for fx in ("manager", "tf1_saver", "ckpt_save", "v1_single"):
            _fixture(fx, tmp, "runs")
        return [(["du", str(tmp / "runs"), "--json"], 0)]

    for fx in ("manager", "tf1_saver", "ckpt_save"):
        @case(f"prune-dry-run__{fx}")
        def _(tmp, fx=fx):
            d = _fixture(fx, tmp)
            return [(["prune", str(d), "--max-to-keep", "1", "--dry-run", "--json"], 0)]

    @case("prune-dry-run__manager_sidecars_policy")
    def _(tmp):
        # issue 17: files beside a checkpoint are not its own; the directory's policy file applies
        d = pathlib.Path(_fixture("manager", tmp))
        for name in ("ckpt-3.notes.txt", "ckpt-3.json", "ckpt-3.index.bak"):
            (d / name).write_text("user file\n")
        (d / ".ckptool.toml").write_text('keep = ["ckpt-4"]\n')
        return [(["prune", str(d), "--max-to-keep", "1", "--dry-run", "--json"], 0)]

    @case("prune-recursive-dry-run__fixtures")
    def _(tmp):
        for fx in ("manager", "tf1_saver", "ckpt_save", "v1_single"):
            _fixture(fx, tmp, "runs")
        return [(["prune", str(tmp / "runs"), "--recursive", "--max-to-keep", "1", "--dry-run", "--json"], 0)]

    @case("rewrite-names-dry-run__keras_adam")
    def _(tmp):
        return [(["rewrite-names", _fixture("keras_adam", tmp), str(tmp / "out" / "ckpt-1"),
                  "--strip-optimizer", "--dry-run", "--json"], 0)]

    @case("rewrite-names-dry-run__tf1_saver")
    def _(tmp):
        return [(["rewrite-names", _fixture("tf1_saver", tmp), str(tmp / "out" / "model.ckpt-30"),
                  "--rule", "/=renamed/", "--dry-run", "--json"], 0)]

    for fmt in ("npz", "safetensors"):
        @case(f"convert-{fmt}__keras_adam")
        def _(tmp, fmt=fmt):
            return [(["convert", _fixture("keras_adam", tmp), str(tmp / f"out.{fmt}"), "--skip-unsupported",
                      "--json"], 0)]

        @case(f"convert-{fmt}-and-back__keras_adam")
        def _(tmp, fmt=fmt):
            out, back = tmp / f"out.{fmt}", tmp / "back" / "ckpt-1"
            return [(["convert", _fixture("keras_adam", tmp), str(out), "--skip-unsupported"], 0),
                    (["convert", str(out), str(back)], 0),
                    (["list-variables", str(back), "--json"], 0)]

    @case("convert-tf__npz")
    def _(tmp):
        out = tmp / "out.npz"
        return [(["convert", _fixture("dtypes", tmp), str(out), "--skip-unsupported"], 0),
                (["convert", str(out), str(tmp / "back" / "ckpt-1"), "--json"], 0)]

    @case("save__npz")
    def _(tmp):
        out = tmp / "src.npz"
        return [(["convert", _fixture("manager", tmp), str(out)], 0),
                (["save", str(tmp / "run" / "ckpt"), "--from", str(out), "--global-step", "7", "--json"], 0)]

    @case("save__npz_object_based_sharded")
    def _(tmp):
        out = tmp / "src.npz"
        return [(["convert", _fixture("manager", tmp), str(out)], 0),
                (["save", str(tmp / "run" / "ckpt-1"), "--from", str(out), "--object-based", "--shards", "2",
                  "--no-state", "--json"], 0)]

    return cases


CASES = _cases()


def normalize(text: str, tmp: pathlib.Path, clock: tuple[float, float]) -> str:
    """The JSON document made stable: scratch and repository paths replaced, clock readings masked.

    ``clock`` is (time before the case ran, time after). A number inside that
    window is a reading of the clock (a timestamp the command took now), shown
    as ``<NOW>``, and so is a UTC time string in it; a value under a key naming an age (``latest_age_seconds``)
    depends on the clock too and is shown as ``<AGE>``. Timestamps read from
    the fixtures' files lie outside the window and are kept.
    """
    doc = json.loads(text)
    paths = sorted({str(tmp), os.path.realpath(tmp)}, key=len, reverse=True)
    lo, hi = clock[0] - 5, clock[1] + 5

    def fix_str(v: str) -> str:
        for p in paths:
            v = v.replace(p, "<TMP>")
        return _ISO.sub(lambda m: "<NOW>" if lo <= _iso_seconds(m.group(0)) <= hi else m.group(0),
                        v.replace(str(REPO), "<REPO>"))

    def fix(v, key=None):
        if isinstance(v, dict):
            return {fix_str(k): fix(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x, key) for x in v]
        if isinstance(v, str):
            return fix_str(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if key is not None and _AGE.search(key) and key != "min_age":
                return "<AGE>"
            if lo <= v <= hi:
                return "<NOW>"
        return v

    return json.dumps(fix(doc), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_AGE = re.compile(r"(^|_)age(_|$)")
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _iso_seconds(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
