"""Architecture rules, enforced: layers, no TensorFlow, no assert on input."""

import ast
import pathlib
import subprocess
import sys

PKG = pathlib.Path(__file__).parent.parent / "ckptool"


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node
        elif isinstance(node, ast.ImportFrom):
            yield ("." * node.level) + (node.module or ""), node


def _modules(sub=""):
    return [p for p in (PKG / sub).rglob("*.py") if "protos" not in p.parts]


def test_click_and_rich_only_in_cli():
    for path in _modules():
        if "cli" in path.relative_to(PKG).parts:
            continue
        for name, _ in _imports(path):
            root = name.lstrip(".").split(".")[0]
            assert root not in ("click", "rich"), f"{path} imports {name}"


def test_format_layer_is_pure():
    """ckptool/format imports nothing of the layers above it, nor the OS."""
    for path in _modules("format"):
        for name, _node in _imports(path):
            if name.startswith(".."):
                assert name in ("..errors",), f"{path} imports {name}"
            assert name.split(".")[0] not in ("os", "click", "rich", "fsspec"), f"{path} imports {name}"


def test_environment_read_only_in_cli():
    for path in _modules():
        if "cli" in path.relative_to(PKG).parts:
            continue
        assert "os.environ" not in path.read_text() or path.name in ("remote_files.py", "_faults.py"), path  # botocore's endpoint variables


def test_no_assert_statements():
    for path in _modules():
        tree = ast.parse(path.read_text())
        asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
        assert not asserts, f"{path} uses assert at lines {asserts}"


def test_never_imports_tensorflow(tmp_path):
    """Using ckptool (open, list, read, write, the CLI) loads no TensorFlow module."""
    code = f"""
import sys, numpy as np
import ckptool
from ckptool.cli.main import cli
ckptool.write({str(tmp_path / 'c')!r}, {{"a": np.arange(3, dtype=np.float32)}})
with ckptool.open({str(tmp_path / 'c')!r}) as ck:
    ck.variables(); ck.read("a")
bad = [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "tensorboard", "keras", "jax", "torch")]
print(bad)
sys.exit(1 if bad else 0)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def _cli_modules(args, heavy):
    """Run ``ckptool ARGS`` in a fresh interpreter; its output, and which of the modules
    ``heavy`` it imported (printed on stderr's last line)."""
    code = (f"import sys\nsys.argv=['ckptool', *{list(args)!r}]\n"
            "from ckptool.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            f"print([m for m in {tuple(heavy)!r} if m in sys.modules], file=sys.stderr)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr.strip().splitlines()[-1]


def test_version_imports_nothing_heavy():
    _, loaded = _cli_modules(["--version"], ("numpy", "google.protobuf", "rich", "crc32c"))
    assert loaded == "[]"


def test_listing_imports_neither_numpy_nor_importlib_metadata():
    """`ckptool list-variables` starts fast: listing needs no arrays (numpy is imported where
    arrays are made) and the crc32c extension is loaded without its package's
    importlib.metadata (~50 ms each of a start-up)."""
    prefix = str(pathlib.Path(__file__).parent / "data" / "dtypes" / "dtypes")
    stdout, loaded = _cli_modules(["list-variables", prefix], ("numpy", "importlib.metadata", "rich"))
    assert loaded == "[]"
    assert "float32" in stdout
