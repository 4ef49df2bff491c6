"""The families of issue 51 in transformers 5: each exported folder's model, loaded by
``from_pretrained`` (nothing missing, unexpected or mis-shaped: test_transformers5.py), gives the
outputs transformers 4.57.6's model gave with the weights its TF loader set (``forward.npz``,
written by tests/tf_fixtures/generate_hf_more.py), within float round-off."""


import numpy as np
import pytest
from test_export import CASES, DATA, export

pytestmark = pytest.mark.hf

torch = pytest.importorskip("torch")  # CKPTOOL_REQUIRE=hf (the hf tier): a skip is a failure
transformers = pytest.importorskip("transformers")

FORWARD = [n for n in CASES if (DATA / n / "forward.npz").is_file()]


def test_the_families_have_forward_outputs():
    assert {"roformer", "megatron_bert", "roc_bert"} <= set(FORWARD)


@pytest.mark.parametrize("name", FORWARD)
def test_forward_equals_the_457_models(name, tmp_path):
    out = tmp_path / "out"
    r = export(name, out)
    assert r.returncode == 0, r.stderr
    config = transformers.AutoConfig.from_pretrained(out)
    model, info = getattr(transformers, config.architectures[0]).from_pretrained(out, output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    model.eval()
    with np.load(DATA / name / "forward.npz") as f:
        inputs = {k[3:]: torch.from_numpy(f[k]) for k in f.files if k.startswith("in:")}
        want = {k[4:]: f[k] for k in f.files if k.startswith("out:")}
    with torch.no_grad():
        got = model(**inputs)
    assert want
    for k, w in want.items():
        g = got[k].numpy()
        assert g.shape == w.shape, k
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{name}: {k}")
