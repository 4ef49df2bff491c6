"""``emit_json_rows`` (``inspect --stats --json`` written as the rows come) prints exactly what
``emit_json`` prints for the whole list: any count of rows (the batches' edges included),
names that are not ASCII or not UTF-8 (kept as surrogate escapes), non-finite floats, and a
spool that outgrows memory."""

import json

import pytest

from ckptool.cli import common


def _rows(n, name=lambda i: f"model/v{i}"):
    return [{"name": name(i), "dtype": "float32", "shape": [i % 3, 2], "count": i, "min": -1.5 * i,
             "max": float("inf") if i == 7 else 2.0, "mean": float("nan") if i == 3 else 0.25, "std": None,
             "nan": 0, "inf": i == 7, "zeros": 0} for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 2, 511, 512, 513, 1025])
@pytest.mark.parametrize("name", [lambda i: f"model/v{i}", lambda i: f"модель/v{i}",
                                  lambda i: f"bad\udcff/v{i}" if i == 1 else f"v{i}"],
                         ids=["ascii", "utf8", "surrogate"])
def test_rows_print_as_the_whole_document(capsys, n, name):
    rows = _rows(n, name)
    common.emit_json(rows)
    whole = capsys.readouterr().out
    common.emit_json_rows(iter(rows), [r["name"] for r in rows])
    assert capsys.readouterr().out == whole
    if n and name(0).isascii() and name(1).isascii():
        assert json.loads(whole)[-1]["name"] == name(n - 1)


def test_a_spool_past_memory_prints_the_same(capsys):
    rows = _rows(30_000)  # several MB of text: the spool goes to a temporary file
    common.emit_json(rows)
    whole = capsys.readouterr().out
    common.emit_json_rows(iter(rows), [r["name"] for r in rows])
    assert capsys.readouterr().out == whole


def test_an_error_on_the_way_prints_nothing(capsys):
    def rows():
        yield from _rows(600)
        raise RuntimeError("tensor 601 is damaged")

    with pytest.raises(RuntimeError):
        common.emit_json_rows(rows())
    assert capsys.readouterr().out == ""
