"""Lookup layers' vocabularies from the constants ``saved_model.pb`` initializes their tables from
(ckptool.ops.transform.convert.keras.whole.vocab), on SavedModel directories written field by field
(tests/savedmodel_wire.py); the interop tier converts tf_keras's own and lets Keras 3 judge."""

import pytest
from savedmodel_wire import f, int64s, keras_metadata, saved_model, strings, tensor

from ckptool.errors import RefusedError
from ckptool.ops.transform.convert.keras.whole.vocab import fill_vocabularies


def _dir(tmp_path, keys, values, cls="StringLookup", name="sl", layer="layer-0"):
    (tmp_path / "saved_model.pb").write_bytes(saved_model(keys, values, layer=layer))
    (tmp_path / "keras_metadata.pb").write_bytes(keras_metadata(("root", "Functional", "model"),
                                                                (f"root.{layer}", cls, name)))
    return str(tmp_path)


def _doc(cls="StringLookup", name="sl", **cfg):
    base = {"name": name, "vocabulary": None, "vocabulary_size": 4, "has_input_vocabulary": True,
            "num_oov_indices": 1, "mask_token": None}
    return {"class_name": "Functional", "config": {"layers": [{"class_name": cls, "config": {**base, **cfg}}]}}


def _vocab(doc):
    return doc["config"]["layers"][0]["config"]["vocabulary"]


def test_tokens_in_index_order(tmp_path):
    d = _dir(tmp_path, strings(["c", "a", "\u00e9"]), int64s([3, 1, 2]))
    doc = _doc()
    notes = fill_vocabularies(doc, "sm", d)
    assert _vocab(doc) == ["a", "\u00e9", "c"] and "saved_model.pb" in notes[0]
    assert "vocabulary_size" not in doc["config"]["layers"][0]["config"]


def test_inverted_and_integer_and_text_vectorization(tmp_path):
    doc = _doc(invert=True)
    fill_vocabularies(doc, "sm", _dir(tmp_path / "a", int64s([1, 2, 3]), strings(["x", "y", "z"])))
    assert _vocab(doc) == ["x", "y", "z"]
    doc = _doc("IntegerLookup", "il")
    fill_vocabularies(doc, "sm", _dir(tmp_path / "b", int64s([7, -3, 9]), int64s([1, 2, 3]), "IntegerLookup", "il"))
    assert _vocab(doc) == [7, -3, 9]
    doc = _doc("TextVectorization", "tv", vocabulary_size=5)  # int mode: mask and OOV before the tokens
    fill_vocabularies(doc, "sm", _dir(tmp_path / "c", strings(["the", "cat", "sat"]), int64s([2, 3, 4]),
                                      "TextVectorization", "tv"))
    assert _vocab(doc) == ["the", "cat", "sat"]


@pytest.fixture(autouse=True)
def _dirs(tmp_path):
    for sub in "abc":
        (tmp_path / sub).mkdir()


@pytest.mark.parametrize("values,size,cfg,what", [
    ([1, 2, 5], 4, {}, "indices are not 1..3"),
    ([1, 2, 3], 9, {}, "(9 with the OOV and mask indices)"),
    ([1, 2, 3], 4, {"output_mode": "tf_idf"}, "idf_weights"),
])
def test_what_is_not_the_described_vocabulary_is_refused(tmp_path, values, size, cfg, what):
    d = _dir(tmp_path, strings(["a", "b", "c"]), int64s(values))
    with pytest.raises(RefusedError, match=r"layer 'sl' \(StringLookup\)") as e:
        fill_vocabularies(_doc(vocabulary_size=size, **cfg), "sm", d)
    assert what in str(e.value)


def test_no_constants_or_no_saved_model_pb_is_refused_never_empty(tmp_path):
    d = _dir(tmp_path, strings(["a"]), tensor(1, [1], f(5, 0)))  # a float: not a vocabulary
    with pytest.raises(RefusedError, match="among the constants saved_model.pb"):
        fill_vocabularies(_doc(vocabulary_size=2), "sm", d)
    (tmp_path / "saved_model.pb").unlink()
    with pytest.raises(RefusedError, match="none beside keras_metadata.pb"):
        fill_vocabularies(_doc(vocabulary_size=2), "sm", d)
