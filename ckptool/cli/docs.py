"""Generate man pages and shell completions from the click commands.

    python -m ckptool.cli.docs [ROOT]      # writes ROOT/man/man1/*.1 and ROOT/completions/*

The output depends only on the commands (no dates, no paths), so a test can
regenerate it and fail when the committed files are stale. Completion scripts
are click's, adapted (``ckptool.cli.completion``): they call back into ``ckptool``
(``_CKPTOOL_COMPLETE``), so each argument completes to the files it accepts and
``--tensor`` to the names in the checkpoint, as the callbacks there decide.
"""

from __future__ import annotations

import inspect
import os
import re
import sys

import click

from ckptool import __version__
from ckptool.cli.completion import SHELLS
from ckptool.cli.main import cli

PROG = "ckptool"
COMPLETE_VAR = "_CKPTOOL_COMPLETE"
MAN_DIR = "man/man1"  # MANPATH=man man ckptool-inspect

EXIT_STATUS = (
    "0 on success; 1 when the data or the file system is at fault (a missing, truncated or "
    "corrupt checkpoint, a failed verification, a refused operation); 2 for a usage error, "
    "including a bad argument ckptool finds (a regular expression, a rule, a --cast spec). "
    "diff, as diff(1): 0 equal, 1 different, 2 trouble (a side cannot be read). Errors are one "
    "line on standard error, starting 'ckptool: error:'."
)
ENVIRONMENT = [
    ("NO_COLOR", "Set (to any value): no colour in the output."),
    ("AWS_ENDPOINT_URL", "The endpoint of an S3-compatible store for s3:// paths."),
    (COMPLETE_VAR, "Used by the completion scripts to ask ckptool for completions."),
]


def _roff(text: str) -> str:
    """Escape text for roff: backslashes, and a leading '.' or "'" on a line."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in text.split("\n"))


def _paragraphs(help_text: str | None) -> str:
    """click help text to roff: blank lines split paragraphs; '\\b' blocks stay as they are."""
    out = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(help_text or "")):
        if block.startswith("\b"):
            lines = block.split("\n")[1:]
            out.append(".PP\n.nf\n" + _roff("\n".join(lines)) + "\n.fi")
        else:
            out.append(".PP\n" + _roff(" ".join(ln.strip() for ln in block.split("\n"))))
    return "\n".join(out)


def _option_lines(ctx: click.Context, cmd: click.Command) -> list[str]:
    out = []
    for param in cmd.get_params(ctx):
        if not isinstance(param, click.Option):
            continue
        rec = param.get_help_record(ctx)
        if rec is None:
            continue
        opts, help_text = rec
        out += [".TP", f"\\fB{_roff(opts)}\\fR", _roff(help_text or "")]
    return out


def _notes(cmd: click.Command) -> list[str]:
    """The command's epilog (what --help prints after the options) as a NOTES section."""
    return [".SH NOTES", _paragraphs(cmd.epilog)] if cmd.epilog else []


def _header(name: str, summary: str) -> list[str]:
    return [f'.TH "{name.upper()}" "1" "" "{PROG} {__version__}" "User Commands"', ".SH NAME",
            f"{_roff(name)} \\- {_roff(summary)}"]


def man_pages() -> dict[str, str]:
    """file name -> roff text, for ckptool.1 and one page per subcommand."""
    # make_context applies the group's context_settings (-h, --help), as a real run does
    root_ctx = cli.make_context(PROG, [], resilient_parsing=True)
    pages = {}
    names = cli.list_commands(root_ctx)
    lines = _header(PROG, cli.get_short_help_str(200).rstrip("."))
    lines += [".SH SYNOPSIS", f"\\fB{PROG}\\fR [\\fIOPTIONS\\fR] \\fICOMMAND\\fR [\\fIARGS\\fR]...",
              ".SH DESCRIPTION", _paragraphs(cli.help), ".SH OPTIONS", *_option_lines(root_ctx, cli),
              *_notes(cli), ".SH COMMANDS"]
    for name in names:
        cmd = cli.get_command(root_ctx, name)
        lines += [".TP", f"\\fB{PROG}\\-{_roff(name)}\\fR(1)", _roff(cmd.get_short_help_str(200))]
    lines += _tail(names)
    pages[f"{PROG}.1"] = "\n".join(lines) + "\n"
    for name in names:
        cmd = cli.get_command(root_ctx, name)
        ctx = cmd.make_context(name, [], parent=root_ctx, resilient_parsing=True)
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        lines = _header(f"{PROG}-{name}", cmd.get_short_help_str(200).rstrip("."))
        lines += [".SH SYNOPSIS", f"\\fB{PROG} {_roff(name)}\\fR {_roff(usage)}",
                  ".SH DESCRIPTION", _paragraphs(cmd.help), ".SH OPTIONS", *_option_lines(ctx, cmd),
                  *_notes(cmd)]
        lines += _tail([n for n in names if n != name], with_self=True)
        pages[f"{PROG}-{name}.1"] = "\n".join(lines) + "\n"
    return pages


def _tail(others: list[str], with_self: bool = False) -> list[str]:
    lines = [".SH EXIT STATUS", _roff(EXIT_STATUS), ".SH ENVIRONMENT"]
    for var, text in ENVIRONMENT:
        lines += [".TP", f"\\fB{var}\\fR", _roff(text)]
    see = ([f"\\fB{PROG}\\fR(1)"] if with_self else []) + [f"\\fB{PROG}\\-{_roff(n)}\\fR(1)" for n in others]
    return lines + [".SH SEE ALSO", ", ".join(see)]


def completions() -> dict[str, str]:
    """file name -> completion script (bash, zsh, fish): ckptool.cli.completion.SHELLS."""
    return {fname: cls(cli, {}, PROG, COMPLETE_VAR).source() for fname, cls in SHELLS.items()}


def generate() -> dict[str, str]:
    """Relative path -> content of every generated file."""
    out = {f"{MAN_DIR}/{k}": v for k, v in man_pages().items()}
    out.update({f"completions/{k}": v for k, v in completions().items()})
    return out


def write(root: str) -> list[str]:
    files = generate()
    for sub in (MAN_DIR, "completions"):
        d = os.path.join(root, sub)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):  # a removed command's page goes too
            if f"{sub}/{old}" not in files:
                os.remove(os.path.join(d, old))
    for old in os.listdir(os.path.join(root, "man")):  # pages of the old layout (man/*.1)
        if old.endswith(".1"):
            os.remove(os.path.join(root, "man", old))
    for rel, text in sorted(files.items()):
        with open(os.path.join(root, rel), "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    return sorted(files)


def install_man_pages(directory: str, pages: dict[str, str] | None = None) -> list[str]:
    """Write the man pages into ``directory`` (made if absent), each atomically; the ckptool pages
    already there are replaced, and a page of a command that no longer exists is removed."""
    from ckptool.io.backends.local import LOCAL
    from ckptool.io.safety.atomic import write_bytes

    pages = man_pages() if pages is None else pages
    os.makedirs(directory, exist_ok=True)
    for old in os.listdir(directory):
        if (old == f"{PROG}.1" or old.startswith(f"{PROG}-")) and old.endswith(".1") and old not in pages:
            os.remove(os.path.join(directory, old))
    written = []
    for name, text in sorted(pages.items()):
        path = os.path.join(directory, name)
        write_bytes(LOCAL, path, text.encode("utf-8"))
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for rel in write(sys.argv[1] if len(sys.argv) > 1 else "."):
        print(rel)
