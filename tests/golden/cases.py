"""The golden cases: the ``--json`` output of every command on the bundled fixtures.

Each case is a name (the golden file ``tests/golden/<name>.json``) and a
function that, given a scratch directory, prepares what the command needs and
returns a list of steps ``(argv, expected exit code)``. The output of the last
step is the golden document; earlier steps set it up (a convert before a
list-variables of its result, say). Read-only commands run on tests/data and
examples/ in place; commands that write, or whose output depends on file ages,
run on copies with fixed modification times.
"""

from __future__ import annotations

import functools
import json
import os
import pathlib
import re
import shutil

REPO = pathlib.Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"
EXAMPLE = REPO / "examples" / "keras_adam"
GOLDEN = pathlib.Path(__file__).resolve().parent

#: every copied file gets this modification time (2023-11-14 22:13:20 UTC),
#: plus one second per checkpoint step order, so ages and orders are stable.
MTIME = 1_700_000_000

#: fixture -> the CHECKPOINT argument of that fixture, relative to tests/data
FIXTURES = {
    "bigendian": "bigendian/big",
    "ckpt_save": "ckpt_save",
    "dtensor": "dtensor",
    "dtypes": "dtypes/dtypes",
    "keras_adam": "keras_adam",
    "manager": "manager",
    "many": "many/many",
    "maxshard": "maxshard",
    "partitioned": "partitioned",
    "savedmodel": "savedmodel/model",
    "strings": "strings/strings",
    "tf1_saver": "tf1_saver",
    "tf1_sharded": "tf1_sharded",
    "v1_sharded": "v1/sharded",
    "v1_single": "v1/single",
    "variant": "variant/iter",
}


def _copy(src: pathlib.Path, dst: pathlib.Path) -> pathlib.Path:
    """Copy a fixture directory, giving every file a fixed mtime (older steps older)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("expected.json", "state.json"))
    files = sorted(p for p in dst.rglob("*") if p.is_file())
    for p in files:
        m = re.search(r"-(\d+)(?:\.|$)", p.name)
        t = MTIME + (int(m.group(1)) if m else 0)
        os.utime(p, (t, t))
    return dst


def _one(argv: list[str], code: int, tmp: pathlib.Path) -> list[tuple[list[str], int]]:
    return [(argv, code)]


def _fixture(name: str) -> str:
    return str(DATA / FIXTURES[name])


def _cases():
    cases = {}

    def case(name):
        def deco(fn):
            cases[name] = fn
            return fn
        return deco

    def one(name, *argv, code=0):
        cases[name] = functools.partial(_one, [*argv, "--json"], code)

    for fx in FIXTURES:
        if fx != "many":  # 20 000 names: inspect covers it
            one(f"list-variables__{fx}", "list-variables", _fixture(fx))
        one(f"inspect__{fx}", "inspect", _fixture(fx))
        one(f"inspect-verify__{fx}", "inspect", _fixture(fx), "--verify")
    one("list-variables__example_keras_adam", "list-variables", str(EXAMPLE))
    one("inspect__example_keras_adam", "inspect", str(EXAMPLE))
    for fx in ("keras_adam", "dtypes", "partitioned", "tf1_saver"):
        one(f"inspect-stats__{fx}", "inspect", _fixture(fx), "--stats")
    for fx in ("keras_adam", "ckpt_save", "dtensor"):
        one(f"inspect-tree__{fx}", "inspect", _fixture(fx), "--tree")
    one("inspect-tree__example_keras_adam", "inspect", str(EXAMPLE), "--tree")

    @case("inspect-tensor__keras_adam")
    def _(tmp):
        return [(["inspect", _fixture("keras_adam"), "--tensor",
                  "optimizer/_trainable_variables/0/.ATTRIBUTES/VARIABLE_VALUE", "--json"], 0)]

    @case("inspect-tensor__strings")
    def _(tmp):
        return [(["inspect", _fixture("strings"), "--tensor", "unicode", "--tensor", "binary",
                  "--tensor", "empty_2x0", "--json"], 0)]

    @case("inspect-tensor__partitioned")
    def _(tmp):
        return [(["inspect", _fixture("partitioned"), "--tensor", "emb/weights", "--json"], 0)]

    @case("diff__example_ckpt-3_ckpt-5")
    def _(tmp):
        return [(["diff", str(EXAMPLE / "ckpt-3"), str(EXAMPLE / "ckpt-5"), "--json"], 1)]

    @case("diff__manager_ckpt-4_itself")
    def _(tmp):
        return [(["diff", str(DATA / "manager" / "ckpt-4"), str(DATA / "manager" / "ckpt-4"), "--json"], 0)]

    for fx in ("ckpt_save", "manager", "tf1_saver", "keras_adam", "v1_single"):
        one(f"state__{fx}", "state", _fixture(fx))

    @case("state-rebuild-dry-run__manager")
    def _(tmp):
        d = _copy(DATA / "manager", tmp / "manager")
        return [(["state", str(d), "--rebuild", "--dry-run", "--json"], 0)]

    @case("du__fixtures")
    def _(tmp):
        for fx in ("manager", "tf1_saver", "ckpt_save", "v1_single"):
            _copy(DATA / FIXTURES[fx], tmp / "runs" / fx)
        return [(["du", str(tmp / "runs"), "--json"], 0)]

    for fx in ("manager", "tf1_saver", "ckpt_save"):
        @case(f"prune-dry-run__{fx}")
        def _(tmp, fx=fx):
            d = _copy(DATA / FIXTURES[fx], tmp / fx)
            return [(["prune", str(d), "--max-to-keep", "1", "--dry-run", "--json"], 0)]

    @case("rewrite-names-dry-run__keras_adam")
    def _(tmp):
        return [(["rewrite-names", _fixture("keras_adam"), str(tmp / "out" / "ckpt-1"),
                  "--strip-optimizer", "--dry-run", "--json"], 0)]

    @case("rewrite-names-dry-run__tf1_saver")
    def _(tmp):
        return [(["rewrite-names", _fixture("tf1_saver"), str(tmp / "out" / "model.ckpt-30"),
                  "--rule", "/=renamed/", "--dry-run", "--json"], 0)]

    for fmt in ("npz", "safetensors"):
        @case(f"convert-{fmt}__keras_adam")
        def _(tmp, fmt=fmt):
            return [(["convert", _fixture("keras_adam"), str(tmp / f"out.{fmt}"), "--skip-unsupported",
                      "--json"], 0)]

        @case(f"convert-{fmt}-and-back__keras_adam")
        def _(tmp, fmt=fmt):
            out, back = tmp / f"out.{fmt}", tmp / "back" / "ckpt-1"
            return [(["convert", _fixture("keras_adam"), str(out), "--skip-unsupported"], 0),
                    (["convert", str(out), str(back)], 0),
                    (["list-variables", str(back), "--json"], 0)]

    @case("convert-tf__npz")
    def _(tmp):
        out = tmp / "out.npz"
        return [(["convert", _fixture("dtypes"), str(out), "--skip-unsupported"], 0),
                (["convert", str(out), str(tmp / "back" / "ckpt-1"), "--json"], 0)]

    @case("save__npz")
    def _(tmp):
        out = tmp / "src.npz"
        return [(["convert", _fixture("manager"), str(out)], 0),
                (["save", str(tmp / "run" / "ckpt"), "--from", str(out), "--global-step", "7", "--json"], 0)]

    return cases


CASES = _cases()


def normalize(text: str, tmp: pathlib.Path, clock: tuple[float, float]) -> str:
    """The JSON document made stable: scratch and repository paths replaced, clock readings masked.

    ``clock`` is (time before the case ran, time after). A number inside that
    window is a reading of the clock (a timestamp the command took now), shown
    as ``<NOW>``; a value under a key naming an age (``latest_age_seconds``)
    depends on the clock too and is shown as ``<AGE>``. Timestamps read from
    the fixtures' files lie outside the window and are kept.
    """
    doc = json.loads(text)
    paths = sorted({str(tmp), os.path.realpath(tmp)}, key=len, reverse=True)
    lo, hi = clock[0] - 5, clock[1] + 5

    def fix_str(v: str) -> str:
        for p in paths:
            v = v.replace(p, "<TMP>")
        return v.replace(str(REPO), "<REPO>")

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
