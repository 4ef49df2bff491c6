"""``ckptool man``: the man pages from the installed commands, shown or installed where man(1)
finds them, for editable installs too (which install no data files; issue 32)."""

import os
import shutil
import subprocess
import sysconfig

import pytest

from ckptool.cli import docs
from ckptool.cli.commands.man import default_man_dir
from clirun import completed


def test_install_writes_every_page_and_man_finds_them(tmp_path):
    target = tmp_path / "share" / "man" / "man1"
    (target.parent).mkdir(parents=True)
    target.mkdir()
    (target / "ckptool-gone.1").write_text("an old command's page")
    (target / "other.1").write_text("not ours")
    out = completed("man", "--install", "--dir", target)
    assert out.returncode == 0, out.stderr
    pages = docs.man_pages()
    assert {p.name for p in target.iterdir()} == set(pages) | {"other.1"}
    for name, text in pages.items():
        assert (target / name).read_text(encoding="utf-8") == text
    assert f"wrote {len(pages)} man pages to {target}" in out.stderr
    if shutil.which("man") is None:
        pytest.skip("no man(1) here")
    found = subprocess.run(["man", "-w", "ckptool-prune"], capture_output=True, text=True,
                           env={"MANPATH": str(tmp_path / "share" / "man"), "PATH": os.environ.get("PATH", "")})
    assert found.stdout.strip() == str(target / "ckptool-prune.1"), found


def test_install_defaults_to_where_pip_puts_data_files():
    assert default_man_dir() == os.path.join(sysconfig.get_path("data"), "share", "man", "man1")


def test_man_command_prints_the_page_when_stdout_is_no_terminal():
    out = completed("man", "prune")
    assert out.returncode == 0 and out.stdout == docs.man_pages()["ckptool-prune.1"]
    assert completed("man").stdout == docs.man_pages()["ckptool.1"]


def test_man_of_an_unknown_command_suggests_one():
    out = completed("man", "prun")
    assert out.returncode == 2 and "no command 'prun'; did you mean 'prune'?" in out.stderr
    assert completed("man", "prune", "--install").returncode == 2
    assert completed("man", "--dir", "x").returncode == 2
