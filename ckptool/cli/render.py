"""Human (text) output of the inspection commands. Data on stdout; totals and notes on stderr."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from ckptool.cli.common import (
    display_name,
    error,
    format_shape,
    human_bytes,
    human_count,
    human_time,
    note,
    plural,
    style,
)


def _table(header, rows, right=()) -> list[str]:
    """Columns padded with spaces (greppable, awk-able); the last column is not padded."""
    rows = [tuple(display_name(c) for c in r) for r in rows]  # one row, one line
    widths = [max([len(header[i])] + [len(r[i]) for r in rows]) for i in range(len(header))]

    last = len(header) - 1
    fmt = "  ".join("{:" + (">" if i in right else "<") + f"{widths[i]}}}" if i != last or i in right else "{}"
                    for i in range(len(header)))

    def line(cols):
        return fmt.format(*cols).rstrip()

    return [style(line(header), bold=True)] + [line(r) for r in rows]


def print_variables(variables) -> None:
    """NAME DTYPE SHAPE SIZE (bytes), one variable a line; the totals line, starting with '#',
    goes to stderr so that `grep`, `awk '{s+=$4}'` and `wc -l` see only the table."""
    rows = [(display_name(v.name), v.dtype, format_shape(v.shape), str(v.nbytes)) for v in variables]
    lines = _table(("NAME", "DTYPE", "SHAPE", "SIZE"), rows)
    for i in range(0, len(lines), 4096):  # a few large writes, not one per line
        click.echo("\n".join(lines[i:i + 4096]))
    params = sum(v.numel for v in variables)
    total = sum(v.nbytes for v in variables)
    note(f"# {plural(len(variables), 'variable')}, {plural(params, 'parameter')}, {human_bytes(total)}")


def _kv(pairs) -> None:
    width = max(len(k) for k, _ in pairs)
    for k, v in pairs:
        v = display_name(v)  # a value from a file (a .meta's TF version) stays on its line
        click.echo(f"{style(k.ljust(width), bold=True)}  {v}" if k else f"{' ' * width}  {v}")


def print_summary(doc: dict) -> None:
    kind = "object-based" if doc["object_based"] else "name-based"
    pairs = [("checkpoint", display_name(doc["prefix"])), ("format", f"{doc['format']}, {kind}")]
    if doc["format"] == "V2":
        pairs.append(("index", f"{display_name(doc['index']['path'])}  {human_bytes(doc['index']['bytes'])}"))
        shards = doc["shards"]
        total = sum(s["bytes"] or 0 for s in shards)
        pairs.append(("shards", f"{len(shards)}, {human_bytes(total)}"))
        for s in shards:
            size = "missing" if s["bytes"] is None else human_bytes(s["bytes"])
            pairs.append(("", f"{display_name(s['path'])}  {size}"))
    else:
        for i, f in enumerate(doc["files"]):
            pairs.append(("files" if i == 0 else "", f"{display_name(f['path'])}  {human_bytes(f['bytes'])}"))
    part = f" ({doc['partitioned']} partitioned)" if doc["partitioned"] else ""
    pairs += [("variables", f"{doc['variables']}{part}"),
              ("parameters", _count(doc["parameters"])),
              ("bytes", human_bytes(doc["bytes"]))]
    for i, (name, d) in enumerate(doc["dtypes"].items()):
        pairs.append(("dtypes" if i == 0 else "",
                      f"{name}: {plural(d['variables'], 'variable')}, {plural(d['parameters'], 'parameter')}, "
                      f"{human_bytes(d['bytes'])}"))
    if doc["format"] == "V2":
        b = doc["bundle"]
        pairs.append(("bundle", f"version {b['producer']} (min consumer {b['min_consumer']}), "
                                f"{b['endianness']}-endian"))
    keras = doc.get("keras")
    if keras:
        if keras["keras_version"]:
            cls = f", {keras['class_name']}" if keras["class_name"] else ""
            pairs.append(("keras", f"{keras['keras_version']}{cls}"))
        for i, lay in enumerate(keras["layers"]):
            cls = f" ({lay['class']})" if lay["class"] else ""
            pairs.append(("layers" if i == 0 else "", f"{lay['path'] or '/'}: {lay['name']}{cls}, "
                                                      f"{plural(len(lay['variables']), 'variable')}"))
    ema = doc.get("ema")  # convert --ema: which variables have a moving average
    if ema:
        without = f", {len(ema['without'])} without" if ema["without"] else ""
        pairs.append(("averages", ema.get("error") or f"{plural(ema['averaged'], 'variable')} with an exponential "
                                                      f"moving average ({ema['kind']}){without}; convert --ema"))
        shown = list(ema["pairs"].items())
        pairs += [("", f"{display_name(v)} <- {display_name(a)}") for v, a in shown[:10]]
        if len(shown) > 10:
            pairs.append(("", f"... {len(shown) - 10} more (--json lists them all)"))
    meta = doc.get("meta_graph")
    if meta:
        pairs.append(("meta graph", f"{display_name(meta['path'])}  {human_bytes(meta['bytes'])}"))
        if meta.get("tensorflow_version"):
            git = f" ({meta['tensorflow_git_version']})" if meta.get("tensorflow_git_version") else ""
            pairs.append(("tensorflow", f"{meta['tensorflow_version']}{git}"))
    state = doc.get("state") or doc.get("series")  # a Keras series is listed as a run's state is
    if state:
        pairs.append(("state" if doc.get("state") else "series", display_name(state["path"])))
    _kv(pairs)
    if state:
        rows = [(str(c["step"]) if c["step"] is not None else "-", human_time(c["timestamp"]), human_bytes(c["bytes"]),
                 c["status"], display_name(c["path"] or c["prefix"])) for c in state["entries"]]
        click.echo("")
        for line in _table(("STEP", "TIME", "SIZE", "STATUS", "PATH"), rows, right=(0, 2)):
            click.echo(line)


def _count(n: int) -> str:
    short = human_count(n)
    return str(n) if short == str(n) else f"{n} ({short})"


def print_tensor(name: str, dtype: str, shape, value, full: bool) -> None:
    import shutil
    import sys

    import numpy as np

    click.echo(style(f"{display_name(name)}  {dtype}  {format_shape(shape)}", bold=True))
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else 75
    opts: dict[str, Any] = {"threshold": sys.maxsize if full else 1000, "max_line_width": max(40, width)}
    if value.dtype.names:  # quantized: show the integers
        value = value[value.dtype.names[0]]
    click.echo(np.array2string(np.asarray(value), **opts) if value.shape else _scalar(value))


def print_object_graph_value(name: str, dtype: str, shape, nbytes: int, root, title: str) -> None:
    """The object graph tensor: its tree (``root``, when asked for by name), else a pointer to
    ``--tree``; never its serialized bytes on one line."""
    click.echo(style(f"{display_name(name)}  {dtype}  {format_shape(shape)}", bold=True))
    if root is None:
        click.echo(f"(the serialized object graph, {human_bytes(nbytes)}: shown by inspect --tree)")
    else:
        print_tree(root, None, title)


def _scalar(value) -> str:
    item = value.reshape(()).item() if hasattr(value, "reshape") else value
    return repr(item) if isinstance(item, bytes) else str(value.reshape(()) if hasattr(value, "reshape") else value)


def _num(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    return f"{x:.6g}"


def print_stats(rows: Iterable[dict]) -> None:
    table = [(display_name(r["name"]), r["dtype"], format_shape(r["shape"]), _num(r["min"]), _num(r["max"]),
              _num(r["mean"]), _num(r["std"]), _num(r["nan"]), _num(r["inf"]), _num(r["zeros"])) for r in rows]
    for line in _table(("NAME", "DTYPE", "SHAPE", "MIN", "MAX", "MEAN", "STD", "NAN", "INF", "ZEROS"), table,
                       right=(3, 4, 5, 6, 7, 8, 9)):
        click.echo(line)


def print_verify(report) -> None:
    for p in report.problems:
        error(p.error)
    if report.ok:
        click.echo(f"ok: {plural(report.tensors, 'tensor')}, {human_bytes(report.bytes)} read, every checksum matches")
    else:
        for word, names in (("missing", report.lost()), ("corrupt", report.corrupt())):
            if names:
                click.echo(f"{word}: {len(names)} of {plural(report.tensors, 'tensor')}: "
                           + ", ".join(display_name(n) for n in names))


def print_tree(root, depth: int | None, title: str) -> None:
    lines: list[tuple[str, str, str, str]] = []  # (tree text, dtype+shape, params, bytes)

    def tensor_cols(t):
        return f"{t['dtype']} {format_shape(t['shape'])}", str(t["parameters"]), human_bytes(t["bytes"])

    def items_of(node):
        items: list[tuple[str | None, tuple[str, str, str] | None, Any]] = []  # (label, cols, node or None)
        for a in node.attributes:
            items.append((f"{display_name(a['name'])}", tensor_cols(a), None))
        for s in node.slots:
            items.append((f"{display_name(s['slot'])} (slot of {display_name(s['optimizer'] or '?')})",
                          tensor_cols(s), None))
        for c in node.children:
            items.append((None, None, c))
        return items

    def walk(node, prefix: str, level: int):  # depth first, without recursion (graphs can be deep)
        frames = [[items_of(node), 0, prefix, level]]
        while frames:
            frame = frames[-1]
            items, i, prefix, level = frame
            if (depth is not None and level >= depth) or i >= len(items):
                frames.pop()
                continue
            frame[1] = i + 1
            label, cols, child = items[i]
            last = i == len(items) - 1
            branch = prefix + ("└── " if last else "├── ")
            deeper = prefix + ("    " if last else "│   ")
            if child is None:
                lines.append((branch + label, *cols))
            elif child.alias_of is not None:
                ds = f"{child.tensor['dtype']} {format_shape(child.tensor['shape'])}" if child.tensor else ""
                lines.append((branch + f"{display_name(child.name)} -> {display_name(child.alias_of)}", ds, "", ""))
            else:
                lines.append((branch + _node_label(child, depth, level + 1), *_node_cols(child)))
                frames.append([items_of(child), 0, deeper, level + 1])

    lines.append((_node_label(root, depth, 0, title), *_node_cols(root)))
    walk(root, "", 0)
    w0 = max(len(x[0]) for x in lines)
    w1 = max(len(x[1]) for x in lines)
    w2 = max(len(x[2]) for x in lines)
    for text, ds, params, size in lines:
        click.echo(f"{text.ljust(w0)}  {ds.ljust(w1)}  {params.rjust(w2)}  {size}".rstrip())
    note(f"# {plural(root.parameters, 'parameter')}, {human_bytes(root.bytes)}; "
         f"subtree totals include the slot variables an optimizer owns")


def _node_label(node, depth, level, title=None) -> str:
    label = display_name(title if title is not None else node.name)
    if node.owned_slots:
        label += f" (+{plural(node.owned_slots, 'slot')})"
    has_more = bool(node.children or node.attributes or node.slots)
    if depth is not None and level >= depth and has_more:
        label += " …"
    return label


def _node_cols(node):
    ds = f"{node.tensor['dtype']} {format_shape(node.tensor['shape'])}" if node.tensor else ""
    return ds, str(node.parameters), human_bytes(node.bytes)


def print_diff(report) -> None:
    rows = []
    for v in report.removed:
        rows.append(("-", display_name(v["name"]), f"{v['dtype']} {format_shape(v['shape'])}"))
    for v in report.added:
        rows.append(("+", display_name(v["name"]), f"{v['dtype']} {format_shape(v['shape'])}"))
    for c in report.changed:
        a, b = c["a"], c["b"]
        parts = []
        if a["dtype"] != b["dtype"]:
            parts.append(f"dtype {a['dtype']} -> {b['dtype']}")
        if a["shape"] != b["shape"]:
            parts.append(f"shape {format_shape(a['shape'])} -> {format_shape(b['shape'])}")
        rows.append(("~", display_name(c["name"]), ", ".join(parts)))
    for v in report.values:
        m = "" if v.max_abs_diff is None else f", max abs diff {v.max_abs_diff:.6g}"
        differ = "differs" if v.differing == 1 else "differ"
        rows.append(("~", display_name(v.name), f"values: {v.differing} of {plural(v.count, 'element')} {differ}{m}"))
    rows.sort(key=lambda r: (r[1], r[0]))
    colors = {"-": "red", "+": "green", "~": "yellow"}
    width = max([len(r[1]) for r in rows] + [0])
    for mark, name, what in rows:
        click.echo(style(f"{mark} {name.ljust(width)}  {what}", fg=colors[mark]))
    changed = len(report.changed) + len(report.values)
    note(f"# {len(report.added)} added, {len(report.removed)} removed, {changed} changed, "
         f"{report.unchanged} unchanged")
