"""Forward passes in transformers 5 of the exported folders whose fixture holds ``outputs.npz``
(tests/tf_fixtures/generate_hf_more2.py): the outputs equal, within float round-off, those of the
4.57 model the TF loader (or transformers' conversion script) filled, and of the original TF model."""


import numpy as np
import pytest
from test_export import CASES, DATA, export

pytestmark = pytest.mark.hf

torch = pytest.importorskip("torch")  # CKPTOOL_REQUIRE=hf (the hf tier): a skip is a failure
transformers = pytest.importorskip("transformers")

WITH_OUTPUTS = [c for c in CASES if (DATA / c / "outputs.npz").is_file()]


def test_the_new_families_have_outputs():
    assert {"efficientnet", "efficientnet_features", "mobilenet_v2", "mobilenet_v2_features", "xlnet",
            "xlnet_regression", "imagegpt", "decision_transformer", "lxmert"} <= set(WITH_OUTPUTS)


def _forward(model, inputs, field=None):
    """The output outputs.npz holds for this model: its ``field``, logits, or the last hidden state
    (channels last for an image model, as Keras gives it)."""
    with torch.no_grad():
        out = model(**{k.removeprefix("in_"): torch.from_numpy(v) for k, v in inputs.items()})
    if field is not None:
        return getattr(out, field).float().numpy()
    if getattr(out, "logits", None) is not None:
        return out.logits.float().numpy()
    h = out.last_hidden_state.float().numpy()
    return np.transpose(h, (0, 2, 3, 1)) if h.ndim == 4 else h


@pytest.mark.parametrize("name", WITH_OUTPUTS)
def test_forward_equals_the_457_models(name, tmp_path):
    out = tmp_path / "out"
    assert export(name, out).returncode == 0
    config = transformers.AutoConfig.from_pretrained(out)
    model, info = getattr(transformers, config.architectures[0]).from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    model.eval()
    with np.load(DATA / name / "outputs.npz") as z:
        inputs = {k: z[k] for k in z.files if k.startswith("in")}
        if "inputs" in inputs:
            inputs["pixel_values"] = inputs.pop("inputs")
        want, tf_out = z["hf457_out"], z["tf_out"] if "tf_out" in z.files else None
        field = str(z["field"]) if "field" in z.files else None
    got = _forward(model, inputs, field)
    scale = max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-5 * scale
    if tf_out is not None:  # the original TF model's, where the generator could run it
        assert np.abs(got - tf_out).max() <= 1e-4 * scale


def test_xlnet_activation_and_tokenizer(tmp_path):
    """xlnet's ``gelu`` is the tanh approximation (transformers' gelu_new); its spiece.model loads as
    XLNetTokenizer: the pieces SentencePiece gives, then <sep> <cls>."""
    out = tmp_path / "out"
    assert export("xlnet", out).returncode == 0
    config = transformers.AutoConfig.from_pretrained(out)
    assert (config.ff_activation, config.untie_r, config.layer_norm_eps) == ("gelu_new", True, 1e-12)
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert type(tok).__name__.startswith("XLNetTokenizer") and tok.padding_side == "left"
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(DATA / "xlnet" / "spiece.model"))
    ids = tok("the quick fox")["input_ids"]
    assert ids == sp.encode("the quick fox") + [sp.piece_to_id("<sep>"), sp.piece_to_id("<cls>")]
