"""Shell completion: what each argument completes to, and the bash, zsh and fish scripts.

The scripts (``completions/``, or ``_CKPTOOL_COMPLETE=bash_source ckptool``) call back into
ckptool with the words typed; the callbacks here answer. A path the callbacks offer is of the
type ``path``: the scripts hand it to the shell as a file name (quoted, a directory completed
with a slash and no space after it), so ``runs/`` goes on into the directory.

- what rewrite-names and ``--template`` read: directories, checkpoint prefixes (``x.index`` ->
  ``x``; never a data shard) and Keras 3 files;
- what convert, inspect, list-variables, verify, diff and ``save --from`` read: those,
  ``.safetensors``, ``.npz`` and ``.npy`` (a Hugging Face folder is a directory);
- ``convert --config`` (.json, .gin), ``--vocab`` (.txt, .model, encoder.json), ``--template-config``
  (.json): directories and files of those kinds; ``--arch``: the architectures the export knows;
- ``prune --series``: the series templates the directory's file names show (metric fields
  named from a CSVLogger file, or left for the user to name);
- what convert writes (DST): directories and the suffixes it writes by name;
- where a new checkpoint goes (``save PREFIX``, ``average -o``, rewrite-names DST): directories;
- ``ckptool man``: the command names; ``inspect --tensor``: the checkpoint's tensor names;
  ``prune --keep``: checkpoint prefixes; ``prune --metrics``: any file (the shell's own).

:data:`ARGUMENTS` says which argument of which command takes which; :func:`attach` applies it
as a command is loaded (tests/cli/test_completion.py checks every path argument has one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import click
from click.shell_completion import BashComplete, CompletionItem, FishComplete, ZshComplete, add_completion_class

#: Keras 3 files (ckptool.ops.read.keras.SUFFIXES: the test checks they agree)
KERAS = (".weights.h5", ".keras", ".weights.json")
#: what convert, diff and save --from read besides checkpoints (ckptool.ops.read.source)
ARRAYS = (".safetensors", ".npz", ".npy")
#: what convert writes by its name (the rest of DST is a TF prefix)
WRITTEN = (".safetensors", ".npz", ".weights.h5", ".keras")

_KERAS_SHARD = re.compile(r"(.*)_\d{5}\.weights\.h5")  # X_00000.weights.h5, a shard of X.weights.json


def _paths(incomplete: str, suffixes: tuple[str, ...] = (), prefixes: bool = False) -> list[CompletionItem]:
    """Directories (with their slash), files ending in ``suffixes`` and, with ``prefixes``,
    checkpoint prefixes, as typed so far (``~`` kept as typed); dot files only when asked for."""
    d, base = os.path.split(incomplete)
    try:
        names = sorted(os.listdir(os.path.expanduser(d) or "."))
    except OSError:
        return []
    out = []
    for n in names:
        if not n.startswith(base) or (n.startswith(".") and not base.startswith(".")):
            continue
        full = os.path.join(d, n)
        low = n.lower()
        shard = _KERAS_SHARD.fullmatch(n)
        if os.path.isdir(os.path.expanduser(full)):
            out.append(CompletionItem(full + "/", type="path"))
        elif prefixes and n.endswith(".index") and len(n) > len(".index"):
            out.append(CompletionItem(full[: -len(".index")], type="path"))
        elif low.endswith(suffixes) and not (shard and f"{shard.group(1)}.weights.json" in names):
            out.append(CompletionItem(full, type="path"))
    return out


def complete_checkpoint(ctx, param, incomplete: str) -> list[CompletionItem]:
    """A TF checkpoint: directories and checkpoint prefixes (``x.index`` -> ``x``), not data shards."""
    return _paths(incomplete, prefixes=True)


def complete_readable(ctx, param, incomplete: str) -> list[CompletionItem]:
    """TF checkpoints and Keras 3 files (rewrite-names, ``--template``)."""
    return _paths(incomplete, KERAS, prefixes=True)


def complete_source(ctx, param, incomplete: str) -> list[CompletionItem]:
    """What ckptool.open reads (convert, inspect, list-variables, verify, diff, save --from):
    checkpoints, Keras 3 files, .safetensors, .npz, .npy."""
    return _paths(incomplete, KERAS + ARRAYS, prefixes=True)


def complete_written(ctx, param, incomplete: str) -> list[CompletionItem]:
    """convert's DST: directories and the files of the formats it writes by suffix."""
    return _paths(incomplete, WRITTEN)


def complete_directory(ctx, param, incomplete: str) -> list[CompletionItem]:
    """Where a new checkpoint goes (its prefix is new): directories."""
    return _paths(incomplete)


def complete_file(ctx, param, incomplete: str) -> list[CompletionItem]:
    """Any file or directory, by the shell's own completion (``--metrics``: a file or a log directory)."""
    return [CompletionItem(incomplete, type="file")]


def complete_command(ctx, param, incomplete: str) -> list[CompletionItem]:
    """ckptool's command names (``ckptool man``): the root group's."""
    root = ctx.find_root()
    group = root.command
    names = group.list_commands(root) if isinstance(group, click.Group) else []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_tensor(ctx, param, incomplete: str) -> list[CompletionItem]:
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


def complete_series(ctx, param, incomplete: str) -> list[CompletionItem]:
    """The series templates found in the command's DIR argument (``prune --series``; a tf_keras
    TF-format series by its prefixes too). A decimal field's metric is not in the file names: a
    CSVLogger file beside the series names the candidates (one template each), else the template
    is offered up to that field, for the user to name it (never a ``{metric:.3f}`` placeholder)."""
    directory = ctx.params.get("directory") or next((a for a in ctx.args if not a.startswith("-")), None) or "."
    try:
        from ckptool.io.layout.series_discover import discover

        found = [f.template for f in discover(sorted(os.listdir(directory)))]
        metrics = _logged_metrics(directory)
        out: list[str] = []
        for t in found:
            m = _METRIC_FIELD.search(t)
            if m is None:
                out.append(t)
            elif metrics:
                out += [t[:m.start()] + "{" + name + m.group(1) + "}" + t[m.end():] for name in metrics]
            else:
                out.append(t[:m.start() + 1])  # up to the field: the user names the metric
        return [CompletionItem(t) for t in dict.fromkeys(out) if t.startswith(incomplete)]
    except Exception:
        return []


_METRIC_FIELD = re.compile(r"\{metric(:[^}]*)?\}")


def _logged_metrics(directory: str) -> list[str]:
    """The metric columns of the CSVLogger files in ``directory`` and the one above it."""
    import csv

    from ckptool.io.backends.urls import storage_for

    names: list[str] = []
    for d in (directory, os.path.join(directory, os.pardir)):
        for n in sorted(os.listdir(d)):
            if n.lower().endswith(".csv") and os.path.isfile(os.path.join(d, n)):
                storage, path = storage_for(os.path.join(d, n))
                reader = storage.open_reader(path)
                try:
                    first = bytes(reader.read(0, min(reader.size, 64 << 10))).split(b"\n", 1)[0]
                finally:
                    reader.close()
                head = next(csv.reader([first.decode("utf-8-sig", "replace").rstrip("\r")]), [])
                if "epoch" in head:
                    names += [c for c in head if c != "epoch" and c.isidentifier()]
    return list(dict.fromkeys(names))


def complete_arch(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``convert --arch``: the architectures the Hugging Face export knows (families and names)."""
    try:
        from ckptool.ops.transform.hf.export import known

        return [CompletionItem(n) for n in known().split(", ") if n.startswith(incomplete)]
    except Exception:
        return []


def complete_hf_config(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``convert --config``: a release's config (bert_config.json, hparams.json, operative_config.gin)
    or an HF config.json, or their directory."""
    return _paths(incomplete, (".json", ".gin"))


def complete_vocab(ctx, param, incomplete: str) -> list[CompletionItem]:
    """``convert --vocab``: vocab.txt, a SentencePiece .model, GPT-2's encoder.json, or their directory."""
    return _paths(incomplete, (".txt", ".model", "encoder.json"))


def complete_json(ctx, param, incomplete: str) -> list[CompletionItem]:
    """A JSON file (``convert --template-config``: a Keras model's config)."""
    return _paths(incomplete, (".json",))


Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]

#: command -> {parameter name: completer}; parameters of click.Path type complete as the shell's
#: own file or directory names and need no entry.
ARGUMENTS: dict[str, dict[str, Completer]] = {
    "inspect": {"checkpoint": complete_source},
    "list-variables": {"checkpoint": complete_source},
    "verify": {"paths": complete_source},
    "diff": {"a": complete_source, "b": complete_source},
    "convert": {"src": complete_source, "dst": complete_written, "template": complete_readable,
                "arch": complete_arch, "hf_config": complete_hf_config, "vocab": complete_vocab,
                "template_config": complete_json},
    "save": {"prefix": complete_directory, "sources": complete_source},
    "average": {"inputs": complete_checkpoint, "out": complete_directory},
    "rewrite-names": {"src": complete_readable, "dst": complete_directory, "template": complete_readable},
    "rm": {"checkpoints": complete_checkpoint},
    "prune": {"pinned": complete_checkpoint, "metrics_path": complete_file, "series": complete_series},
    "man": {"command_name": complete_command},
}


def attach(name: str, command: click.Command) -> click.Command:
    """Give ``command``'s parameters their completers (:data:`ARGUMENTS`)."""
    wanted = ARGUMENTS.get(name, {})
    for param in command.params:
        if param.name in wanted:
            # click takes a completer only as Parameter(shell_complete=...): no public way to set one later
            param._custom_shell_complete = wanted[param.name]  # noqa: SLF001
    return command


# The scripts. click's own, but: a "path" item is a file name (bash `compopt -o filenames`, zsh
# `compadd -f`: quoted, a directory given its slash and no space; fish adds no space after a
# slash itself); a value may hold a comma; zsh's file on $fpath completes at every TAB, not only
# the first (click's tests zsh_eval_context, which says "loadautofunc" only while autoloading).
# Generated into completions/ by cli/docs.py.

_BASH = """\
%(complete_func)s() {
    local IFS=$'\\n'
    local response completion type value

    response=$(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD=$COMP_CWORD %(complete_var)s=bash_complete $1)

    for completion in $response; do
        type=${completion%%%%,*}
        value=${completion#*,}
        if [[ $type == 'dir' ]]; then
            COMPREPLY=()
            compopt -o dirnames
        elif [[ $type == 'file' ]]; then
            COMPREPLY=()
            compopt -o default
        elif [[ $type == 'path' ]]; then
            compopt -o filenames
            [[ $value == ?*/ ]] && value=${value%%/}
            COMPREPLY+=("$value")
        elif [[ $type == 'plain' ]]; then
            COMPREPLY+=("$value")
        fi
    done

    return 0
}

%(complete_func)s_setup() {
    complete -o nosort -F %(complete_func)s %(prog_name)s
}

%(complete_func)s_setup;
"""

_ZSH = """\
#compdef %(prog_name)s

%(complete_func)s() {
    local -a completions
    local -a completions_with_descriptions
    local -a paths
    local -a response
    (( ! $+commands[%(prog_name)s] )) && return 1

    response=("${(@f)$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((CURRENT-1)) \
%(complete_var)s=zsh_complete %(prog_name)s)}")

    for type key descr in ${response}; do
        if [[ "$type" == "plain" ]]; then
            if [[ "$descr" == "_" ]]; then
                completions+=("$key")
            else
                completions_with_descriptions+=("$key":"$descr")
            fi
        elif [[ "$type" == "path" ]]; then
            [[ "$key" == ?*/ ]] && key=${key%%/}
            paths+=("$key")
        elif [[ "$type" == "dir" ]]; then
            _path_files -/
        elif [[ "$type" == "file" ]]; then
            _path_files -f
        fi
    done

    if [ -n "$completions_with_descriptions" ]; then
        _describe -V unsorted completions_with_descriptions -U
    fi

    if [ -n "$completions" ]; then
        compadd -U -V unsorted -a completions
    fi

    if [ -n "$paths" ]; then
        compadd -U -f -V unsorted -a paths
    fi
}

if [[ ${funcstack[1]} == _%(prog_name)s ]]; then
    # run as the completion function _%(prog_name)s of $fpath: at the first TAB (autoloaded) and at
    # every later one (this body is that function), complete now
    %(complete_func)s "$@"
else
    # eval/source/. command, register function for later
    compdef %(complete_func)s %(prog_name)s
fi
"""

_FISH = """\
function %(complete_func)s;
    set -l response (env %(complete_var)s=fish_complete COMP_WORDS=(commandline -cp) \
COMP_CWORD=(commandline -t) %(prog_name)s);

    for completion in $response;
        set -l metadata (string split -m 1 "," $completion);

        if test $metadata[1] = "dir";
            __fish_complete_directories $metadata[2];
        else if test $metadata[1] = "file";
            __fish_complete_path $metadata[2];
        else if test $metadata[1] = "plain"; or test $metadata[1] = "path";
            echo $metadata[2];
        end;
    end;
end;

complete --no-files --command %(prog_name)s --arguments "(%(complete_func)s)";
"""


class Bash(BashComplete):
    source_template = _BASH

    def source(self) -> str:  # the script is generated once, not per shell: no bash version check here
        return self.source_template % self.source_vars()


class Zsh(ZshComplete):
    source_template = _ZSH


class Fish(FishComplete):
    source_template = _FISH


SHELLS = {"ckptool.bash": Bash, "_ckptool": Zsh, "ckptool.fish": Fish}


def register() -> None:
    """Make ``_CKPTOOL_COMPLETE=SHELL_source`` (and the scripts' callbacks) use these classes."""
    for cls in SHELLS.values():
        add_completion_class(cls)
