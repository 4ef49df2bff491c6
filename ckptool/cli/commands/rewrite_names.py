"""``ckptool rewrite-names``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ckptool.cli.common import (
    REMOTE_READS,
    checkpoint_argument,
    display_name,
    emit_json,
    json_option,
    no_sync_option,
    note,
    plural,
    stream_jobs_option,
    warn,
)

if TYPE_CHECKING:
    from ckptool.ops.transform.rename.assignment import Plan
    from ckptool.ops.transform.rename.rules import Rule


@click.command("rewrite-names", epilog=REMOTE_READS)
@checkpoint_argument("src")
@click.argument("dst", metavar="DST")
@click.option("--map", "map_file", metavar="FILE", type=click.Path(dir_okay=False, allow_dash=True),
              help="An assignment map: a JSON object {old: new}, read as init_from_checkpoint "
                   "reads it (a key ending in '/' maps a scope, '/' is the root; a key "
                   "'re:PATTERN' is a regular expression). '-' reads standard input.")
@click.option("--rule", "rules", multiple=True, metavar="OLD=NEW",
              help="One rule, as a map entry: 'old/name=new/name', 'old/=new/', '/=scope/', "
                   "or 're:PATTERN=REPL' (full match; \\1 or \\g<name> in REPL). Repeatable; "
                   "applied after --map's rules.")
@click.option("--drop", "drops", multiple=True, metavar="GLOB",
              help="Leave out every variable whose (old) name matches GLOB. Repeatable. Dropping every "
                   "variable (with --strip-optimizer too) is an error: nothing is written.")
@click.option("--strip-optimizer", is_flag=True,
              help="Leave out optimizer state. Name-based: the slots of TF1 optimizers (Adam, Adam_1, "
                   "beta1_power, beta2_power, Momentum, RMSProp, Adagrad, Ftrl, ...) and BERT/LAMB's "
                   "adam_m, adam_v; global_step is kept. Object-based: the optimizer objects and their "
                   "slot variables, from the object graph; model variables the optimizer also tracks are "
                   "kept (re-keyed under the model, as TF would key them). With --dry-run: lists what goes.")
@click.option("--template", metavar="CHECKPOINT",
              help="A checkpoint the target model wrote (e.g. its initial state): DST gets its "
                   "names, dtypes, shapes and object graph, with values from SRC through the rules. "
                   "A template variable SRC does not fill is an error (listed with the closest SRC "
                   "names) unless --allow-missing.")
@click.option("--allow-missing", is_flag=True,
              help="With --template: keep the template's value where SRC fills nothing (named on stderr).")
@click.option("--allow-unused", is_flag=True,
              help="Accept a rule, map key or --drop that matches no SRC name (default: an error).")
@click.option("--strict", is_flag=True,
              help="Fail, writing nothing, when a rule or --drop matches nothing, or (with "
                   "--template) when a template variable is missing, a SRC variable is unused, "
                   "or a shape or dtype differs.")
@click.option("--compact", is_flag=True,
              help="Copy the kept tensors' bytes into new data files, even for a pure rename "
                   "(the default whenever variables are dropped, so DST is smaller).")
@click.option("--link", is_flag=True,
              help="Hard-link SRC's data files (copied whole on another file system) and rebuild "
                   "only the index, even when variables are dropped: fast, but the dropped bytes stay "
                   "in the files. The default for a pure rename of a V2 bundle.")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--force", is_flag=True, help="Replace an existing checkpoint at DST.")
@stream_jobs_option()
@no_sync_option()
@json_option("Print the plan as JSON: {\"src\", \"dst\", \"tensors\": [{\"old\", \"new\"}], \"renamed\", "
             "\"dropped\", \"unmatched_rules\", \"object_graph\", \"fast_path\", ...}.")
def command(src: str, dst: str, map_file: str | None, rules: tuple[str, ...], drops: tuple[str, ...],
            strip_optimizer: bool, template: str | None, allow_missing: bool, allow_unused: bool, strict: bool,
            compact: bool, link: bool, dry_run: bool, force: bool, jobs: int | None, no_sync: bool,
            as_json: bool) -> None:
    """Write a copy of SRC at DST with its variables renamed.

    \b
    Rules are tried in order: an exact name, then the longest matching
    scope prefix, then the root rule, then regular expressions in the
    order given; a name no rule matches is kept. Two variables landing on
    one name is an error, and nothing is written. SRC is never modified.

    \b
    Object-based (TF2) checkpoints get their object graph edited to match:
    renamed objects move to their new paths, other paths to them and slot
    variables stay, so tf.train.Checkpoint restores them under the new
    structure.
    Tensor bytes are copied without decoding. A pure rename of a V2
    bundle hard-links its data files (or copies them whole) and rebuilds
    only the index; dropping variables (--drop, --strip-optimizer) writes
    new data files holding only what is kept, so DST is smaller (--link
    links anyway, --compact copies always).

    \b
    A rule matching no SRC name is an error (--allow-unused accepts it);
    with --template, so is a template variable SRC does not fill
    (--allow-missing keeps the template's value).

    \b
    Examples:
      ckptool rewrite-names old/model.ckpt-100 new/ckpt-100 --rule 'dense/=model/dense/'
      ckptool rewrite-names tf1/ tf2/ckpt-1 --map map.json --template init/ckpt-0
      ckptool rewrite-names bert/model.ckpt small/model.ckpt --strip-optimizer --dry-run
      ckptool rewrite-names run/ckpt-9 small/ckpt-9 --strip-optimizer
    """
    from ckptool.ops.transform.rename.rewrite import rewrite_names

    parsed = _parse_rules(map_file, rules)
    if not (parsed or drops or strip_optimizer or template):
        raise click.UsageError("nothing to do: give --map, --rule, --drop, --strip-optimizer or --template")
    from ckptool.cli.progress import progress_bar

    with progress_bar(f"rewrite-names -> {dst}") as bar:
        plan = rewrite_names(src, dst, parsed, drop=drops, strip_optimizer=strip_optimizer, strict=strict,
                             template=template, dry_run=dry_run, force=force, compact=compact, link=link,
                             allow_unused=allow_unused, allow_missing=allow_missing, sync=not no_sync,
                             progress=bar, jobs=jobs)
    _warn(plan, link, dry_run)
    if as_json:
        emit_json(plan.to_json())
        return
    _show(plan, dry_run)


def _parse_rules(map_file: str | None, rules: tuple[str, ...]) -> list[Rule]:
    """--map's rules, then each --rule's."""
    from ckptool.errors import UsageError
    from ckptool.ops.transform.rename.rules import parse_map, parse_rule

    parsed: list[Rule] = []  # a bad map or rule is a UsageError: one line naming the option, exit 2 (main())
    try:
        if map_file is not None:
            where = f"--map {map_file}"
            parsed += parse_map(read_map(map_file))
        for r in rules:
            where = "--rule"
            parsed.append(parse_rule(r))
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return parsed


def _warn(plan: Plan, link: bool, dry_run: bool) -> None:
    """On stderr: rules that matched nothing, what --link could not do, template values kept."""
    for rule in plan.unmatched_rules:
        warn(f"{rule} matches no variable")
    if link and plan.dropped and not dry_run:
        warn(f"--link: the bytes of the {len(plan.dropped)} dropped variables stay in the linked data files "
             "(DST takes no less space; --compact leaves them out)")
    if link and plan.fast_path and not plan.linked and not dry_run:
        warn("--link: the data files could not be hard-linked (another file system?); copied whole")
    if plan.template:
        for name in plan.template["missing"]:
            warn(f"{name} keeps the template's value (SRC fills nothing there)")


def _show(plan: Plan, dry_run: bool) -> None:
    """The plan, one line a renamed or dropped variable, and a summary line."""
    # the plan is the data of a dry run (stdout); after a real run it is status (stderr)
    def out(line):
        if dry_run:
            click.echo(line)
        else:
            note(line)
    width = max((len(display_name(o)) for o, n in plan.renames if o != n), default=0)
    rekeyed = set(plan.rekeyed)
    for old, new in plan.renames:
        if old != new:
            why = f"  {REKEYED}" if old in rekeyed else ""
            out(f"{display_name(old):<{width}}  ->  {display_name(new)}{why}")
    for name in plan.dropped:
        out(f"{display_name(name):<{width}}  (dropped)")
    verb = "would write" if dry_run else "wrote"
    renamed = sum(1 for o, n in plan.renames if o != n)
    how = ""
    if plan.fast_path and not dry_run:
        how = "; data files linked, index rebuilt" if plan.linked else "; data files copied whole, index rebuilt"
    # variables counted as list-variables lists them: the object graph tensor is one
    written = len(plan.renames) + (plan.object_graph != "none")
    graph = {"none": "name-based (no object graph)", "template": "object graph from the template"}.get(
        plan.object_graph, f"object graph {plan.object_graph}")
    note(f"# {verb} {plan.dst}: {plural(written, 'variable')}, {renamed} renamed, "
         f"{len(plan.dropped)} dropped; {graph}{how}")


#: the tag of a variable the object graph re-keyed (not a rule): kept, under the key TF would give it
REKEYED = "(kept; re-keyed: its old key ran through a dropped object)"


def read_map(path: str):
    """The assignment map JSON of ``--map FILE`` ("-": stdin), through the one bounded JSON reader
    (:func:`ckptool.format.json_doc.load_json`: size, depth, numbers, strings)."""
    from ckptool.errors import CkptError
    from ckptool.format.json_doc import load_json

    try:
        with click.open_file(path, "r", encoding="utf-8") as f:
            data = f.read(MAP_MAX_BYTES + 1)
    except OSError as exc:
        raise CkptError(f"{path}: cannot read the assignment map: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise CkptError(f"{path}: not a JSON assignment map: not UTF-8 at byte {exc.start}") from None
    return load_json(data, path, max_bytes=MAP_MAX_BYTES, what="a JSON assignment map")


#: An assignment map larger than this is refused (a map of a million names is under 200 MiB).
MAP_MAX_BYTES = 256 << 20
