"""The README's library section runs as written: its ```python blocks, in order, in one
namespace, in a directory holding a copy of examples/keras_adam as runs/."""

import pathlib
import re
import shutil

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _library_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Library\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_library_section_runs_as_written(tmp_path, monkeypatch, capsys):
    blocks = _library_blocks()
    assert len(blocks) >= 3 and "ckptool.open" in blocks[0]
    shutil.copytree(ROOT / "examples" / "keras_adam", tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    # what its comments promise
    assert "optimizer/_trainable_variables/0/.ATTRIBUTES/VARIABLE_VALUE float32 (8, 16)" in out
    assert "16 (8, 16) True" in out and "True ['runs/ckpt-3'] ['runs/ckpt-3']" in out
    assert namespace["step"] == 5 and namespace["value"].dtype.name in ("int64", "float32")
    assert (tmp_path / "out" / "ckpt-1.index").is_file() and (tmp_path / "saved" / "ckpt-7.index").is_file()
    assert (tmp_path / "avg" / "ckpt.index").is_file() and not (tmp_path / "runs" / "ckpt-3.index").exists()
    import ckptool.compat.tf as tf

    assert tf.train.load_variable("runs/", "save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 5
