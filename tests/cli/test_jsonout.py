"""``cli/jsonout.dumps``: the text of ``json.dumps(doc, indent=2)``, faster, without recursion."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.cli.jsonout import INDENT_DEPTH, dumps

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
docs = st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids,
                                                                                         max_size=4), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(docs, st.booleans())
def test_same_text_as_the_standard_library(doc, ascii_only):
    assert dumps(doc, ensure_ascii=ascii_only, default=str) == json.dumps(doc, indent=2, ensure_ascii=ascii_only)


def test_keys_scalars_and_non_finite_floats():
    doc = {"a": [1, 2.5, None, True, "é\n\x01"], 1: {2.5: [], None: {}, True: [[]]},
           "x": [float("nan"), float("inf"), -float("inf")], "t": (1, (2, 3))}
    got = json.loads(dumps(doc, ensure_ascii=True, default=str))
    assert got["x"] == ["NaN", "Infinity", "-Infinity"]
    assert got["1"] == {"2.5": [], "null": {}, "true": [[]]} and got["t"] == [1, [2, 3]]
    assert got["a"] == [1, 2.5, None, True, "é\n\x01"]


def test_deep_documents_come_out_on_one_line():
    for depth in (INDENT_DEPTH, INDENT_DEPTH + 1, 900):  # (json.loads recurses too)
        doc: list = []
        inner = doc
        for _ in range(depth - 1):
            inner.append([])
            inner = inner[-1]
        inner.append(1)
        text = dumps(doc, ensure_ascii=True, default=str)
        assert json.loads(text) == doc
        assert ("\n" in text) == (depth <= INDENT_DEPTH)
    row = {"shape": [1, 2]}
    for _ in range(INDENT_DEPTH - 1):  # a flat row at the last indented level: still one line
        row = {"k": row}
    assert "\n" not in dumps(row, ensure_ascii=True, default=str)
    assert dumps(row["k"], ensure_ascii=True, default=str) == json.dumps(row["k"], indent=2)
