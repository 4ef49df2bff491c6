"""Usage errors and the help of a bare ``ckptool``: click's text as it is, on real lines (issue 32)."""

from clirun import completed


def test_bare_ckptool_prints_the_help_on_lines_not_escaped():
    out = completed()
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines[0] == "Usage: ckptool [OPTIONS] COMMAND [ARGS]..."
    assert "\\n" not in out.stderr
    assert any(ln.strip().startswith("inspect ") for ln in lines) and len(lines) > 20


def test_unknown_command_is_a_usage_error_on_its_own_lines():
    out = completed("nosuch")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["Usage: ckptool [OPTIONS] COMMAND [ARGS]...",
                                       "Try 'ckptool --help' for help.", "",
                                       "Error: No such command 'nosuch'."]


def test_missing_argument_names_it():
    out = completed("prune")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["Usage: ckptool prune [OPTIONS] DIR", "Try 'ckptool prune --help' for help.",
                                       "", "Error: Missing argument 'DIR'."]


def test_a_newline_given_on_the_command_line_stays_escaped():
    out = completed("bad\nname")
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1] == "Error: No such command 'bad\\nname'."
