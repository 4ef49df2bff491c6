"""docs/json/<command>.schema.json documents every command's --json shape (issue 32): one shape
per concept (per-directory results are arrays, state entries are "entries", "none" is null).
The golden tests validate every golden document; this file covers the commands that have no
golden (they write or delete) and checks the schemas themselves."""

import json

import click
import jsonschema
import pytest
from test_golden import SCHEMAS, check_schema

from ckptool.cli.main import cli
from clirun import completed


def _json_commands():
    ctx = click.Context(cli, info_name="ckptool")
    names = []
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        if any(isinstance(p, click.Option) and "--json" in p.opts for p in cmd.params):
            names.append(name)
    return names


def test_every_json_command_has_a_valid_schema():
    names = _json_commands()
    assert {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")} == set(names)
    for name in names:
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def _doc(*argv):
    out = completed(*argv, "--json")
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_writing_and_deleting_commands_match_their_schemas(example, tmp_path):
    check_schema("verify", _doc("verify", example))
    check_schema("verify", _doc("verify", tmp_path, "--recursive"))
    check_schema("inspect", _doc("inspect", example, "--verify"))
    check_schema("inspect", _doc("inspect", example, "--tensor", "save_counter/.ATTRIBUTES/VARIABLE_VALUE"))
    check_schema("inspect", _doc("inspect", example, "--all-tensors"))
    check_schema("average", _doc("average", example, "--last", "2", "-o", tmp_path / "avg" / "ckpt"))
    check_schema("rewrite-names", _doc("rewrite-names", example / "ckpt-5", tmp_path / "small" / "ckpt-5",
                                       "--strip-optimizer"))
    check_schema("convert", _doc("convert", example / "ckpt-5", tmp_path / "w.npz"))
    check_schema("save", _doc("save", tmp_path / "out" / "ckpt", "--from", tmp_path / "w.npz", "--global-step", "7"))
    check_schema("diff", _doc("diff", example / "ckpt-4", example / "ckpt-5"))
    check_schema("state", _doc("state", example))
    check_schema("prune", _doc("prune", example, "--max-to-keep", "2"))
    check_schema("rm", _doc("rm", example / "ckpt-4"))
    check_schema("du", _doc("du", tmp_path))
    rec = _doc("prune", tmp_path, "--recursive")
    check_schema("prune", rec)


def test_one_shape_per_concept(example, tmp_path):
    du = _doc("du", tmp_path)
    rec = _doc("prune", tmp_path, "--recursive", "--dry-run")
    assert isinstance(du["directories"], list) and isinstance(rec["directories"], list)
    assert {d["directory"] for d in du["directories"]} == {d["directory"] for d in rec["directories"]}
    assert all(d["error"] is None for d in rec["directories"])
    inspected = _doc("inspect", example)["state"]
    state = _doc("state", example)
    assert [e["path"] for e in inspected["entries"]] == [e["path"] for e in state["entries"]]
    (example / "checkpoint").write_text('model_checkpoint_path: "ckpt-5"\nall_model_checkpoint_paths: "ckpt-5"\n')
    assert _doc("inspect", example)["state"]["last_preserved_timestamp"] is None
    assert _doc("state", example)["last_preserved_timestamp"] is None
    # issue 36: a state file without timestamps is a TF1 Saver's; prune writes back the times it used and
    # the last_preserved_timestamp that continues them (backdated a second before the oldest listed, as TF does)
    mtime = (example / "ckpt-5.index").stat().st_mtime
    lp = _doc("prune", example, "--max-to-keep", "5", "--dry-run")["last_preserved_timestamp"]
    assert lp == pytest.approx(mtime - 1.0)


def test_a_schema_rejects_the_old_shapes():
    with pytest.raises(jsonschema.ValidationError):
        check_schema("prune", {"root": ".", "dry_run": True, "directories": {"a": {}}, "total": {}})
    with pytest.raises(jsonschema.ValidationError):
        check_schema("state", {"directory": "d", "model_checkpoint_path": "c", "all_model_checkpoint_paths": [],
                               "all_model_checkpoint_timestamps": [], "last_preserved_timestamp": None,
                               "checkpoints": []})
