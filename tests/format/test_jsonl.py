"""format.jsonl.top_level_numbers against json.loads: the same lines accepted, the same numbers."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.format.jsonl import top_level_numbers


def _reference(line):
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    return {k: (v if isinstance(v, (int, float)) and not isinstance(v, bool) else None) for k, v in doc.items()}


def _same(line):
    assert repr(top_level_numbers(line)) == repr(_reference(line)), line


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), JSON, max_size=5), st.booleans())
def test_objects(doc, indent):
    _same(json.dumps(doc, indent=1 if indent else None))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=4), JSON, max_size=4),
       st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from('{}[]",:0.-eE \\tnul\x01aé')), max_size=3),
       st.sampled_from("fid"))
def test_mutated(doc, edits, how):
    chars = list(json.dumps(doc))
    for pos, c in edits:
        if not chars:
            break
        i = pos % len(chars)
        if how == "f":
            chars[i] = c
        elif how == "i":
            chars.insert(i, c)
        else:
            del chars[i]
    _same("".join(chars))


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet='{}[]",:0123456789.-+eE tnruflasNIinfy\\', max_size=30))
def test_random_text(line):
    _same(line)


def test_hand_picked():
    for line in ['{"step": 1, "loss": 0.5}', '{"step": 1, "step": 2}', '{"a": [1, {"b": [2]}], "step": 3}',
                 '{"a": NaN, "b": -Infinity, "step": 1e2}', '{"a": [1, 2}', '{"a": 1} x', ' {"a":"\\u00e9"}\r',
                 '{"a": "\x01"}', '{"a": 01}', '{"a": 1.}', '{"a": -}', '{}', '[]', '5', '', '{"a": [], "b": {}}',
                 '{"a": 1,}', '{,"a": 1}', '{"a" 1}', '{"a": tru}', '\ufeff{"a": 1}', '{"a": "\\x"}',
                 '{"a": ' + "9" * 5000 + "}", '{"a": [' + "9" * 5000 + ", 1]}",
                 '{"a": [[1,2],[3]], "s": 1}', '{"a": [[{"b": [1]}]]}', '{"a": [1,2,3,]}', '{"a": [[[]]]}',
                 '{"a": [[]]]}', '{"a": [[}]]}', '{"a": [ 1 , 2 ] }', '{"a":[01,2]}', '{"a": [[[1], 2], 3]}',
                 '{"a": [true, false, null, NaN, -Infinity, 1e5, -0.5, "x", 2]}', '{"a": [[ [ ] ] ]}',
                 '{"a": [[[[[[[[[[1]]]]]]]]]], "b": 2}', '{"a": [[[[[[[[[[1]]]]]]]]]]], "b": 2}',
                 '{"a": [{"x": [[[[[[[[1]]]]]]]]}]}', '{"a": [1 2]}', '{"a": [1,,2]}', '{"a": [-, 1]}']:
        _same(line)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.lists(st.integers(-5, 5) | st.booleans() | st.none(), max_size=6),
                    lambda kids: st.lists(kids, max_size=4), max_leaves=30))
def test_arrays_of_scalars_and_arrays(value):
    _same(json.dumps({"step": 1, "a": value, "b": 2}))
    _same(json.dumps({"step": 1, "a": value}).replace("]", "]]", 1))


def test_deep_nesting_is_no_recursion():
    line = '{"step": 1, "x": ' + "[" * 100000 + "]" * 100000 + "}"
    assert top_level_numbers(line) == {"step": 1, "x": None}
