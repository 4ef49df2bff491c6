"""Issue 40, completion: each argument offers the files it accepts (checkpoint prefixes, never
a data shard; Keras 3 files; .safetensors/.npz/.npy where convert reads them; the written
suffixes for DST), ``ckptool man`` the command names; the scripts are what
``_CKPTOOL_COMPLETE=SHELL_source ckptool`` prints, and a real bash completes with them."""

import os
import pathlib
import shutil
import subprocess
import sys
import time

import click
import pytest
from click.shell_completion import ShellComplete

from ckptool.cli import completion, docs
from ckptool.cli.main import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ["ckpt-1.index", "ckpt-1.data-00000-of-00002", "ckpt-1.data-00001-of-00002", "w.safetensors", "w.npz",
         "a.npy", "m.weights.h5", "m.keras", "s.weights.json", "s_00000.weights.h5", "lone_00001.weights.h5",
         "notes.txt", "ckpt-1.index.bak", ".index", ".hidden.npz"]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    for name in FILES:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ckpt-9.index").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def items(args, incomplete=""):
    comp = ShellComplete(cli, {}, "ckptool", "_CKPTOOL_COMPLETE")
    return [(c.type, c.value) for c in comp.get_completions(args, incomplete)]


def values(args, incomplete=""):
    return [v for _, v in items(args, incomplete)]


TF = ["ckpt-1", "sub/"]
KERAS = ["lone_00001.weights.h5", "m.keras", "m.weights.h5", "s.weights.json"]  # s_00000: a shard of s.weights.json
ARRAYS = ["a.npy", "w.npz", "w.safetensors"]


@pytest.mark.parametrize("args", [["rewrite-names"], ["rewrite-names", "x", "y", "--template"],
                                  ["convert", "x", "y", "--template"]])
def test_what_is_read_completes_to_checkpoints_and_keras_files(tree, args):
    assert sorted(values(args)) == sorted(TF + KERAS)


@pytest.mark.parametrize("args", [["convert"], ["diff"], ["diff", "ckpt-1"], ["save", "out/ckpt", "--from"],
                                  ["save", "out/ckpt", "--from", "w.npz", "--from"], ["inspect"],
                                  ["list-variables"], ["verify"], ["verify", "sub"]])
def test_what_convert_reads_adds_the_array_files(tree, args):
    assert sorted(values(args)) == sorted(TF + KERAS + ARRAYS)


def test_convert_dst_offers_directories_and_the_written_suffixes(tree):
    assert values(["convert", "ckpt-1"]) == ["lone_00001.weights.h5", "m.keras", "m.weights.h5", "sub/", "w.npz",
                                            "w.safetensors"]
    assert values(["convert", "ckpt-1"], "w.s") == ["w.safetensors"]


@pytest.mark.parametrize("args", [["save"], ["average", "ckpt-1", "-o"], ["rewrite-names", "ckpt-1"]])
def test_a_new_checkpoint_goes_into_a_directory(tree, args):
    assert values(args) == ["sub/"]


@pytest.mark.parametrize("args", [["rm"], ["average"], ["prune", "x", "--keep"]])
def test_tf_only_arguments_offer_prefixes_and_directories(tree, args):
    assert values(args) == TF


def test_paths_go_into_directories_and_keep_what_was_typed(tree, monkeypatch):
    assert values(["inspect"], "sub/") == ["sub/ckpt-9"]
    assert values(["inspect"], "./s") == ["./s.weights.json", "./sub/"]
    assert values(["inspect"], "nowhere/x") == []
    assert values(["rewrite-names"], ".") == []  # a file named .index is no checkpoint's
    assert values(["convert"], ".h") == [".hidden.npz"]  # a dot file when its dot is typed
    monkeypatch.setenv("HOME", str(tree / "sub"))
    assert values(["inspect"], "~/ck") == ["~/ckpt-9"]
    assert {t for t, _ in items(["convert"])} == {"path"}  # the scripts hand these to the shell as file names


def test_directory_and_file_options_use_the_shells_own_completion(tree):
    assert items(["prune"]) == [("dir", "")]
    assert items(["diff", "a", "b", "--map"]) == [("file", "")]
    assert items(["prune", "x", "--metrics"]) == [("file", "")]


def test_man_completes_command_names():
    assert values(["man"], "pr") == ["prune"]
    assert values(["man"], "") == cli.list_commands(click.Context(cli))
    assert values(["man"], "re") == ["rewrite-names"]


def test_every_path_argument_has_a_completion():
    ctx = click.Context(cli, info_name="ckptool")
    missing = []
    for name in cli.list_commands(ctx):
        for param in cli.get_command(ctx, name).params:
            takes_path = isinstance(param, click.Argument) or (param.metavar or "").rstrip(".") in (
                "CHECKPOINT", "SRC", "TEMPLATE", "PREFIX", "PATH", "FILE", "DIR")
            if takes_path and not isinstance(param.type, click.Path) and param.name not in completion.ARGUMENTS.get(
                    name, {}):
                missing.append(f"{name} {param.name}")
    assert not missing, f"give these a completer in ckptool.cli.completion.ARGUMENTS: {missing}"
    for name, params in completion.ARGUMENTS.items():  # and the table names only what exists
        known = {p.name for p in cli.get_command(ctx, name).params}
        assert set(params) <= known, name


def test_the_suffixes_are_the_readers():
    from ckptool.ops.read.keras import SUFFIXES

    assert set(completion.KERAS) == set(SUFFIXES)


@pytest.mark.parametrize("shell,fname", [("bash", "ckptool.bash"), ("zsh", "_ckptool"), ("fish", "ckptool.fish")])
def test_the_committed_scripts_are_what_ckptool_prints(shell, fname):
    env = dict(os.environ, _CKPTOOL_COMPLETE=f"{shell}_source", PYTHONPATH=str(ROOT))
    got = subprocess.run([sys.executable, "-m", "ckptool"], env=env, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout == (ROOT / "completions" / fname).read_text() == docs.completions()[fname]
    assert "path" in got.stdout  # the type the paths come as


def test_the_readme_says_how_to_enable_it_in_each_shell():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for line in ('eval "$(_CKPTOOL_COMPLETE=bash_source ckptool)"', 'eval "$(_CKPTOOL_COMPLETE=zsh_source ckptool)"',
                 "_CKPTOOL_COMPLETE=fish_source ckptool > ~/.config/fish/completions/ckptool.fish"):
        assert line in readme


# --------------------------------------------------------------------------- real shells

#: per shell: how to start it, and the line that loads the completion script and makes ``ckptool``
#: a function printing its arguments (the completion itself runs the real ckptool, on PATH)
SHELL_SETUP = {
    "bash": (["bash", "--norc", "--noprofile", "-i"],
             "source '{root}/completions/ckptool.bash'; ckptool() {{ printf '<%s>' \"$@\"; echo ' ARGS'; }}"),
    "zsh": (["zsh", "-f", "-i"],
            "fpath=('{root}/completions' $fpath); autoload -U compinit; compinit -u; "
            "ckptool() {{ printf '<%s>' \"$@\"; echo ' ARGS'; }}"),
    "fish": (["fish", "--no-config", "-i"],
             "source '{root}/completions/ckptool.fish'; function ckptool; printf '<%s>' $argv; echo ' ARGS'; end"),
}


def _typed_into(shell: str, cwd: pathlib.Path, typed: list[str], tmp_path: pathlib.Path) -> list[list[str]]:
    """Type the lines of ``typed`` (tabs included) into an interactive ``shell`` on a terminal;
    the words each line ended as, as the shell completed them."""
    import pty
    import re
    import select

    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "ckptool").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ckptool "$@"\n')
    (bindir / "ckptool").chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "TERM": "xterm",
           "INPUTRC": "/dev/null", "PS1": "$ "}
    argv, setup = SHELL_SETUP[shell]
    pid, master = pty.fork()
    if pid == 0:  # the child: the shell, on the terminal
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    # the shell reads its input in order, each TAB's completion done before the next key: type
    # everything at once, then read until it exits
    keys = "".join(line + "\r" for line in [setup.format(root=ROOT)] + typed) + "exit\r"
    os.write(master, keys.encode())
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.5)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the shell exited
                break
            if not chunk:
                break
            out += chunk
    os.close(master)
    os.waitpid(pid, 0)
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\][^\x07]*\x07|\x1b[=>]", "", out.decode("utf-8", "replace"))
    return [m.split("><") for m in re.findall(r"<(.*)> ARGS", text.replace("\r", "\n")) if "%s" not in m]


TYPED = ["ckptool convert ckpt-1 w.saf\t", "ckptool inspect su\tck\t", "ckptool man pru\t",
         "ckptool list-variables my\tc\t", "ckptool save --from a.n\t"]
COMPLETED = [["convert", "ckpt-1", "w.safetensors"],
             ["inspect", "sub/ckpt-9"],  # no space after the directory's slash: on into it
             ["man", "prune"],
             ["list-variables", "my runs/c-1"],  # quoted as a file name
             ["save", "--from", "a.npy"]]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_real_shell_completes_with_the_script(shell, tree, tmp_path):
    if shutil.which(shell) is None or sys.platform == "win32":
        pytest.skip(f"needs {shell} and a pty")  # CI has bash; zsh and fish where installed
    (tree / "my runs").mkdir()
    (tree / "my runs" / "c-1.index").write_bytes(b"")
    typed = TYPED + (["ckptool inspect su\t"] if shell == "zsh" else [])  # zsh from $fpath: every TAB, not the first
    assert _typed_into(shell, tree, typed, tmp_path) == COMPLETED + ([["inspect", "sub"]] if shell == "zsh" else [])


def test_convert_options_offer_files_of_their_kinds_and_the_known_architectures(tree):
    """Issue 53: --config, --vocab, --template-config offer directories and files of the kinds they
    take; --arch the architectures the Hugging Face export knows."""
    for name in ("bert_config.json", "operative_config.gin", "vocab.txt", "spiece.model", "encoder.json", "x.bin"):
        (tree / name).write_bytes(b"")
    base = ["convert", "ckpt-1", "out", "--to", "hf"]
    assert sorted(values(base + ["--config"])) == ["bert_config.json", "encoder.json", "operative_config.gin",
                                                              "s.weights.json", "sub/"]
    assert sorted(values(base + ["--vocab"])) == ["encoder.json", "notes.txt", "spiece.model", "sub/", "vocab.txt"]
    assert sorted(values(base + ["--template-config"])) == ["bert_config.json", "encoder.json", "s.weights.json",
                                                                       "sub/"]
    from ckptool.ops.transform.hf import ARCHS

    archs = values(base + ["--arch"])
    assert {a.family for a in ARCHS} <= set(archs) and "bert" in archs
    assert values(base + ["--arch"], "gpt") == [a for a in archs if a.startswith("gpt")] != []


def test_series_completes_to_the_templates_found_never_a_metric_placeholder(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for e, v in ((1, 0.91), (2, 0.82), (3, 0.73)):
        (run / f"model-{e:02d}-{v:.2f}.keras").write_bytes(b"")
        (run / f"w-{e:02d}.weights.h5").write_bytes(b"")
        (run / f"tf-{e}.index").write_bytes(b"")  # a tf_keras TF-format series (save_weights_only)
        (run / f"tf-{e}.data-00000-of-00001").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    found = values(["prune", "run", "--series"])
    assert "w-{epoch:02d}.weights.h5" in found and "tf-{epoch}" in found
    assert "model-{epoch:02d}-{" in found and not any("{metric" in t for t in found)
    (tmp_path / "log.csv").write_text("epoch,loss,val_loss\n0,1,0.91\n")  # CSVLogger beside the run
    found = values(["prune", "run", "--series"])
    assert "model-{epoch:02d}-{val_loss:.2f}.keras" in found and "model-{epoch:02d}-{loss:.2f}.keras" in found
    assert values(["prune", "run", "--series"], "w-") == ["w-{epoch:02d}.weights.h5"]
