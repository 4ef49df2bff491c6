"""Usage errors and the help of a bare ``ckptool``: click's text as it is, on real lines (issue 32)."""

from clirun import completed


def test_bare_ckptool_prints_the_help_on_lines_not_escaped():
    out = completed()
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0] == "Usage: ckptool [OPTIONS] COMMAND [ARGS]..."
    assert "\\n" not in out.stderr
    assert any(ln.strip().startswith("inspect ") for ln in lines) and len(lines) > 20


def test_unknown_command_is_one_error_line_naming_the_nearest_command():
    # issue 40: as every error, one `ckptool: error:` line (the man page's promise), exit 2
    out = completed("inpsect", "runs/")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == ["ckptool: error: no command 'inpsect'; did you mean 'inspect'?"]
    out = completed("list", "runs/")  # the start of one command's name
    assert out.stderr.splitlines() == ["ckptool: error: no command 'list'; did you mean 'list-variables'?"]
    out = completed("-q", "prnue", "runs/")  # -q too: errors are always shown
    assert out.returncode == 2 and out.stderr.splitlines() == ["ckptool: error: no command 'prnue'; did you mean 'prune'?"]
    out = completed("nosuch")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["ckptool: error: no command 'nosuch'; 'ckptool --help' lists them"]


def test_a_misspelt_option_keeps_clicks_suggestion():
    out = completed("prune", "--dyr-run", "x")
    assert out.returncode == 2 and "Did you mean '--dry-run'?" in out.stderr


def test_missing_argument_names_it():
    out = completed("prune")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["Usage: ckptool prune [OPTIONS] DIR", "Try 'ckptool prune --help' for help.",
                                       "", "Error: Missing argument 'DIR'."]


def test_a_newline_given_on_the_command_line_stays_escaped():
    out = completed("bad\nname")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["ckptool: error: no command 'bad\\nname'; 'ckptool --help' lists them"]
