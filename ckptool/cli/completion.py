"""Shell-completion callbacks: checkpoint prefixes and tensor names."""

from __future__ import annotations

import os

from click.shell_completion import CompletionItem


def complete_checkpoint(ctx, param, incomplete: str):
    """Complete to directories and checkpoint prefixes (``x.index`` -> ``x``), not data shards."""
    d, base = os.path.split(incomplete)
    try:
        names = os.listdir(d or ".")
    except OSError:
        return []
    out = []
    for n in sorted(names):
        if not n.startswith(base):
            continue
        full = os.path.join(d, n)
        if os.path.isdir(full):
            # plain, not type="dir": the shell scripts would then complete directories only
            out.append(CompletionItem(full + "/"))
        elif n.endswith(".index"):
            out.append(CompletionItem(full[: -len(".index")]))
    return out


def complete_tensor(ctx, param, incomplete: str):
    """Complete tensor names from the command's CHECKPOINT argument."""
    # while an option's value is being completed click leaves the positional arguments
    # unprocessed, in ctx.args
    path = ctx.params.get("checkpoint") or next((a for a in ctx.args if not a.startswith("-")), None)
    if not path:
        return []
    try:
        import ckptool

        with ckptool.open(path) as ck:
            return [CompletionItem(n) for n in ck.names() if n.startswith(incomplete)]
    except Exception:
        return []
