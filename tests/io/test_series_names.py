"""The ModelCheckpoint template (ckptool.io.layout.series_names) and the series found in names
(ckptool.io.layout.series_discover): names match exactly, by each field's own format (issue 43)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ckptool.errors import UsageError
from ckptool.io.layout.series_discover import discover, hint
from ckptool.io.layout.series_names import (
    H5,
    KERAS,
    SHARDED,
    TF_PREFIX,
    WEIGHTS_H5,
    parse_template,
    part_index,
    sharded_base,
)


def test_the_example_of_the_issue():
    t = parse_template("model-{epoch:02d}-{val_loss:.2f}.keras")
    assert t.kind == KERAS and t.fields == ["epoch", "val_loss"] and t.counters == ["epoch"]
    assert t.match("model-03-0.41.keras") == {"epoch": 3, "val_loss": 0.41}
    assert t.match("model-123-1.00.keras") == {"epoch": 123, "val_loss": 1.0}
    assert t.match("model-03--0.41.keras") == {"epoch": 3, "val_loss": -0.41}
    for name in ("model-3-0.41.keras",  # {epoch:02d} writes 03
                 "model-03-0.410.keras",  # .2f writes two places
                 "model-03-0.41.keras.bak", "xmodel-03-0.41.keras", "model-03-0.41.KERAS",
                 "model-03-0.41.weights.h5", "model-+3-0.41.keras", "model-03-.41.keras", "model-03-0.41"):
        assert t.match(name) is None, name


@pytest.mark.parametrize("template, kind", [
    ("m-{epoch}.keras", KERAS), ("w-{epoch}.weights.h5", WEIGHTS_H5), ("w-{epoch}.weights.json", SHARDED),
    ("m-{epoch}.h5", H5), ("m-{epoch}.hdf5", H5), ("ckpt-{epoch}", TF_PREFIX), ("m.{epoch}.ckpt", TF_PREFIX)])
def test_the_kind_of_a_member_is_the_template_s_ending(template, kind):
    assert parse_template(template).kind == kind


def test_literal_text_is_literal_never_a_pattern():
    t = parse_template("ck[a]*?(x)-{epoch}.keras")
    assert t.match("ck[a]*?(x)-7.keras") == {"epoch": 7}
    for name in ("cka-7.keras", "ck[a]xx(x)-7.keras", "ck[a]*?x-7.keras"):
        assert t.match(name) is None
    assert parse_template("a{{b}}-{epoch}.keras").match("a{b}-2.keras") == {"epoch": 2}


def test_each_format_spec_is_matched_by_its_own_round_trip():
    assert parse_template("m{epoch:>4}x{acc:.1%}.h5").match("m   7x95.3%.h5") == {"epoch": 7, "acc": 0.953}
    assert parse_template("m-{epoch:#x}.keras").match("m-0x1f.keras") == {"epoch": 31}
    assert parse_template("m-{step:,}.keras").match("m-1,234,567.keras") == {"step": 1234567}
    assert parse_template("m-{loss:.3e}.keras").match("m-1.235e-05.keras") == {"loss": 1.235e-05}
    assert parse_template("m-{loss}.keras").match("m-0.4562312364578247.keras") == {"loss": 0.4562312364578247}
    assert parse_template("m-{loss!r}.keras").match("m-0.5.keras") == {"loss": 0.5}
    nan = parse_template("m-{epoch}-{loss:.2f}.keras").match("m-2-nan.keras")
    assert nan is not None and nan["loss"] != nan["loss"]
    # an integer metric is read as Keras wrote it (3, not 3.0)
    assert parse_template("m-{lr_step}.keras").match("m-3.keras") == {"lr_step": 3}
    assert parse_template("m-{epoch}.keras").match("m-3.0.keras") is None  # epochs are whole numbers


def test_a_name_that_reads_two_ways_is_no_member():
    t = parse_template("{epoch}{batch}.weights.h5")
    assert t.match("123.weights.h5") is None and len(t.readings("123.weights.h5")) == 2
    fixed = parse_template("w-{epoch:02d}{batch:03d}.weights.h5")
    assert fixed.match("w-01005.weights.h5") == {"epoch": 1, "batch": 5}
    assert fixed.match("w-100005.weights.h5") == {"epoch": 100, "batch": 5}
    same = parse_template("m-{epoch}-{epoch}.keras")
    assert same.match("m-4-4.keras") == {"epoch": 4} and same.match("m-4-5.keras") is None


@pytest.mark.parametrize("bad", ["{}", "{0}.keras", "m-{a.b}.keras", "m-{a[0]}.keras", "x{e:{w}}.keras", "model.keras",
                                 "a/{epoch}/m.keras", "{epoch:s}.keras", "{x!q}.keras", "m}.keras", "", "a\0{epoch}"])
def test_templates_keras_could_not_have_filled_are_refused(bad):
    with pytest.raises(UsageError):
        parse_template(bad)


def test_a_directory_part_is_kept_apart():
    t = parse_template("ckpt/run1/model-{epoch:02d}.keras")
    assert t.directory == "ckpt/run1" and t.match("model-04.keras") == {"epoch": 4}
    assert parse_template("/abs/m-{epoch}.keras").directory == "/abs"


def test_sharded_parts_are_named_as_keras_names_them():
    assert sharded_base("w-03.weights.json") == "w-03"
    assert part_index("w-03.weights.json", "w-03_00000.weights.h5") == 0
    assert part_index("w-03.weights.json", "w-03_00012.weights.h5") == 12
    assert part_index("w-03.weights.json", "w-03_123456.weights.h5") == 123456
    for other in ("w-03_0.weights.h5", "w-03_000001.weights.h5", "w-030_00000.weights.h5", "w-03_00000.h5",
                  "w-03.weights.h5", "w-03_0000x.weights.h5"):
        assert part_index("w-03.weights.json", other) is None


_SPECS = {"epoch": ["", "02d", "03", ">4", "d"], "batch": ["", "03d"], "val_loss": ["", ".2f", ".4f", ".3e", "g"],
          "acc": [".1%", ".3f"]}


@st.composite
def _templates(draw):
    names = draw(st.lists(st.sampled_from(sorted(_SPECS)), min_size=1, max_size=3, unique=True))
    text = draw(st.sampled_from(["m-", "ckpt_", "", "x[1]-"]))
    for i, n in enumerate(names):
        spec = draw(st.sampled_from(_SPECS[n]))
        text += "{" + n + (":" + spec if spec else "") + "}"
        text += draw(st.sampled_from(["-", "_", ".e", "--"])) if i < len(names) - 1 else ""
    return text + draw(st.sampled_from([".keras", ".weights.h5", ".h5", ""]))


@settings(max_examples=300, deadline=None)
@given(_templates(), st.integers(1, 20000), st.integers(1, 999),
       st.floats(-1e6, 1e6, allow_nan=False, width=32), st.floats(0, 1))
def test_what_keras_writes_reads_back_and_only_that(text, epoch, batch, loss, acc):
    t = parse_template(text)
    values = {"epoch": epoch, "batch": batch, "val_loss": float(loss), "acc": acc}
    name = text.format(**values)  # exactly what ModelCheckpoint writes
    got = t.readings(name)
    assert got, (text, name)
    for reading in got:  # sound: every reading formats back to the very name
        assert t.format(**reading) == name
    if len(got) == 1:
        assert all(t.format(**{**values, k: v}) == name for k, v in got[0].items())


@settings(max_examples=300, deadline=None)
@given(_templates(), st.text(alphabet="m-_.0123456789ekrasw[]x", max_size=30))
def test_no_name_reads_unless_it_formats_back(text, name):
    t = parse_template(text)
    for reading in t.readings(name):
        assert t.format(**reading) == name


def test_discover_names_the_series_a_directory_holds():
    names = [f"model-{e:02d}-{v:.2f}.keras" for e, v in [(1, 0.9), (2, 0.5), (3, 0.71), (12, 0.4)]]
    names += ["notes.txt", "model.keras", "w_00000.weights.h5", "w.weights.json", "events.out.tfevents.1.x"]
    found = discover(names)
    assert [f.template for f in found] == ["model-{epoch:02d}-{metric:.2f}.keras"]
    assert found[0].names == sorted(names[:4])
    assert "--series 'model-{epoch:02d}-{metric:.2f}.keras'" in hint(names)
    assert discover([f"w-{e}.weights.h5" for e in range(1, 12)])[0].template == "w-{epoch}.weights.h5"
    assert discover(["a.keras", "b-1.keras"]) == [] and hint(["ckpt-1.index"]) == ""
