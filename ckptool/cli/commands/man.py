"""``ckptool man``: the manual pages, shown or installed from the installed package itself."""

from __future__ import annotations

import click


def default_man_dir() -> str:
    """Where a regular ``pip install`` puts the pages: PREFIX/share/man/man1 (PREFIX: the
    install's data directory, the venv for a venv). man(1) searches it beside PREFIX/bin."""
    import os
    import sysconfig

    return os.path.join(sysconfig.get_path("data"), "share", "man", "man1")


@click.command("man")
@click.argument("command_name", metavar="[COMMAND]", required=False)
@click.option("--install", is_flag=True,
              help="Write every page (ckptool.1 and ckptool-COMMAND.1) into DIR instead of showing one; "
                   "replaces older ckptool pages there.")
@click.option("--dir", "directory", metavar="DIR", type=click.Path(file_okay=False),
              help="With --install: the directory to write (default: PREFIX/share/man/man1 of this "
                   "install, where a regular pip install puts them and man finds them).")
def command(command_name: str | None, install: bool, directory: str | None) -> None:
    """Show the manual page of COMMAND (or of ckptool), or install them all.

    \b
    The pages are generated from the commands themselves, so they match this
    version exactly and work from any install, editable ones included (pip
    install -e installs no data files). On a terminal, the page is shown by
    man -l; otherwise its roff source goes to stdout.

    \b
    After `.venv/bin/ckptool man --install`:
      MANPATH=.venv/share/man man ckptool-prune
    (plain `man ckptool-prune` finds them while .venv/bin is on PATH).
    """
    from ckptool.cli import docs
    from ckptool.cli.common import note, stdout_is_terminal

    pages = docs.man_pages()
    if install:
        if command_name:
            raise click.UsageError("--install writes every page: give no COMMAND")
        target = directory or default_man_dir()
        written = docs.install_man_pages(target, pages)
        note(f"wrote {len(written)} man pages to {target}")
        return
    if directory:
        raise click.UsageError("--dir goes with --install")
    name = f"{docs.PROG}-{command_name}.1" if command_name else f"{docs.PROG}.1"
    if name not in pages:
        import difflib

        close = difflib.get_close_matches(command_name or "", _commands(pages), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise click.UsageError(f"no command {command_name!r}{hint}")
    if stdout_is_terminal() and _show(pages[name]):
        return
    click.echo(pages[name], nl=False)


def _commands(pages: dict[str, str]) -> list[str]:
    return [p[len("ckptool-"):-2] for p in pages if p.startswith("ckptool-")]


def _show(text: str) -> bool:
    """The page through ``man -l`` (False when there is no man to run)."""
    import os
    import shutil
    import subprocess
    import tempfile

    man = shutil.which("man")
    if man is None:
        return False
    with tempfile.TemporaryDirectory(prefix="ckptool-man-") as d:
        path = os.path.join(d, "page.1")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return subprocess.run([man, "-l", path]).returncode == 0
