"""python -m ckptool.shim: a script's `import tensorflow` gives ckptool.compat.tf, and the script
runs as `python SCRIPT` / `python -m MODULE` runs it (what Python itself does is the judge here:
each case runs both ways and compares)."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""\
    import sys
    import tensorflow as tf
    import tensorflow.compat.v1 as v1
    from tensorflow import train
    from tensorflow.compat.v1.train import NewCheckpointReader
    names = [n for n, _ in train.list_variables(sys.argv[1])]
    print(tf.__name__, __name__, v1.train is tf.compat.v1.train, len(names), sys.argv[2:])
    import tensorflow
    import tensorflow.io.gfile
    import tensorflow.compat.v1.logging
    print(NewCheckpointReader is tensorflow.compat.v1.train.NewCheckpointReader, tf.__version__)
    sys.exit(int(sys.argv[2]))
""")

# What a script sees of how it was started, printed the same way under python and the shim.
SEES = textwrap.dedent("""\
    import os, sys
    main = sys.modules["__main__"]
    print(__file__, sys.argv, sys.path[0], __name__, __spec__ and __spec__.name, main.__file__ == __file__,
          os.getcwd() in sys.path, globals().get("__cached__") is not None, __package__)
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    def inner():
        raise ValueError("boom\\nsecond line")
    if what == "raise":
        inner()
    if what == "chain":
        try:
            1 / 0
        except ZeroDivisionError as e:
            raise RuntimeError("wrapped") from e
    if what == "exit":
        sys.exit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])
    if what == "hook":
        sys.excepthook = lambda t, v, tb: print("hooked", t.__name__, tb.tb_frame.f_code.co_filename)
        raise KeyError("k")
    if what == "syntax":
        compile("def (", "<x>", "exec")
    if what == "sigint":
        raise KeyboardInterrupt
""")


def _env():
    return dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _both(cwd, *args):
    """(python's, the shim's) CompletedProcess for the same command line, run from ``cwd``."""
    plain = subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, env=_env())
    shim = subprocess.run([sys.executable, "-m", "ckptool.shim", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=_env())
    return plain, shim


def _run(tmp_path, source, *args):
    script = tmp_path / "script.py"
    script.write_text(source)
    return subprocess.run([sys.executable, "-m", "ckptool.shim", str(script), *map(str, args)],
                          capture_output=True, text=True, env=_env())


def test_script_runs_with_tensorflow_resolved(tmp_path, data_dir):
    p = _run(tmp_path, SCRIPT, data_dir / "keras_adam", 3)
    assert p.returncode == 3, p.stderr
    assert p.stdout.splitlines() == ["ckptool.compat.tf __main__ True 16 ['3']", "True 2.21.0"]
    assert p.stderr.count("ckptool.shim:") == 1 and "ckptool.compat.tf" in p.stderr


@pytest.mark.parametrize("args", [["a", "b"], ["raise"], ["chain"], ["exit", "3"], ["exit", "a message"], ["hook"],
                                  ["syntax"]])
@pytest.mark.parametrize("how", ["plain", "dotted", "from_parent"])
def test_a_script_runs_as_python_runs_it(tmp_path, args, how):
    d = tmp_path / "dir"
    d.mkdir()
    (d / "sees.py").write_text(SEES)
    cwd, name = {"plain": (d, "sees.py"), "dotted": (d, "./sees.py"), "from_parent": (tmp_path, "dir/sees.py")}[how]
    plain, shim = _both(cwd, name, *args)
    assert (shim.returncode, shim.stdout) == (plain.returncode, plain.stdout)
    assert shim.stderr == plain.stderr  # the traceback, frame for frame; sys.exit's message
    if args[0] in ("raise", "chain"):
        assert shim.stderr.startswith("Traceback (most recent call last):\n  File \"" + str(d))  # absolute


def test_dash_m_runs_a_module_as_python_does(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(SEES)
    (pkg / "__main__.py").write_text("import sys\nprint('main of', __name__, sys.argv)\n")
    for args in (["-m", "pkg.mod", "x", "y"], ["-m", "pkg.mod", "raise"], ["-m", "pkg", "z"], ["-m", "nope"]):
        plain, shim = _both(tmp_path, *args)
        assert (shim.returncode, shim.stdout) == (plain.returncode, plain.stdout), args
        assert shim.stderr == plain.stderr, args


def test_keyboard_interrupt_ends_by_sigint_as_python_does(tmp_path):
    (tmp_path / "sees.py").write_text(SEES)
    plain, shim = _both(tmp_path, "sees.py", "sigint")
    assert plain.returncode == shim.returncode == -signal.SIGINT
    assert shim.stderr == plain.stderr and shim.stderr.endswith("KeyboardInterrupt\n")


def test_what_is_not_offered_fails_by_name(tmp_path, data_dir):
    p = _run(tmp_path, "import tensorflow as tf\ntf.train.load_variable(__import__('sys').argv[1], 'nope')\n",
             data_dir / "keras_adam")
    assert p.returncode == 1 and p.stderr.splitlines()[-1] == (
        "ckptool.compat.errors.NotFoundError: Key nope not found in checkpoint")
    p = _run(tmp_path, "import tensorflow.keras\n")
    assert p.returncode == 1 and "ModuleNotFoundError: tensorflow.keras is not offered" in p.stderr
    assert "Traceback" in p.stderr and "script.py" in p.stderr


def test_usage(tmp_path):
    p = subprocess.run([sys.executable, "-m", "ckptool.shim"], capture_output=True, text=True, env=_env())
    assert p.returncode == 2 and "usage:" in p.stderr
    plain, shim = _both(tmp_path, "none.py")
    assert shim.returncode == plain.returncode == 2 and shim.stderr == plain.stderr
