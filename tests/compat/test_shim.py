"""python -m ckptool.shim: a script's `import tensorflow` gives ckptool.compat.tf."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""\
    import sys
    import tensorflow as tf
    import tensorflow.compat.v1 as v1
    from tensorflow import train
    from tensorflow.compat.v1.train import NewCheckpointReader
    names = [n for n, _ in train.list_variables(sys.argv[1])]
    print(tf.__name__, __name__, v1.train is tf.compat.v1.train, len(names), sys.argv[2:])
    import tensorflow
    print(NewCheckpointReader is tensorflow.compat.v1.train.NewCheckpointReader)
    sys.exit(int(sys.argv[2]))
""")


def _run(tmp_path, source, *args):
    script = tmp_path / "script.py"
    script.write_text(source)
    return subprocess.run([sys.executable, "-m", "ckptool.shim", str(script), *map(str, args)],
                          capture_output=True, text=True)


def test_script_runs_with_tensorflow_resolved(tmp_path, data_dir):
    p = _run(tmp_path, SCRIPT, data_dir / "keras_adam", 3)
    assert p.returncode == 3, p.stderr
    assert p.stdout.splitlines() == ["ckptool.compat.tf __main__ True 16 ['3']", "True"]
    assert p.stderr.count("ckptool.shim:") == 1 and "ckptool.compat.tf" in p.stderr


def test_errors_are_one_line(tmp_path, data_dir):
    p = _run(tmp_path, "import tensorflow as tf\ntf.train.load_variable(__import__('sys').argv[1], 'nope')\n",
             data_dir / "keras_adam")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.splitlines()[-1].endswith("NotFoundError: Key nope not found in checkpoint")
    p = _run(tmp_path, "import tensorflow.keras\n")
    assert p.returncode == 1 and "tensorflow.keras is not offered" in p.stderr and len(p.stderr.splitlines()) == 2


def test_usage(tmp_path):
    p = subprocess.run([sys.executable, "-m", "ckptool.shim"], capture_output=True, text=True)
    assert p.returncode == 2 and "usage:" in p.stderr
    p = subprocess.run([sys.executable, "-m", "ckptool.shim", str(tmp_path / "none.py")], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "no such file" in p.stderr
