"""``convert --to hf`` judged under real TF by transformers 4.57.6 (the TF loader or transformers' own
conversion script, as tests/tf_fixtures/generate_hf_more2.py runs it) on checkpoints written here at
test time, unlike the committed fixtures: full-size or other configs, other seeds.

Each case: the exported folder's tensors equal value for value what the 4.57 side put in the model;
4.57's ``from_pretrained`` of the folder loads with nothing missing, unexpected or mis-shaped; its
forward equals the original TF model's within float round-off.
"""

import os
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.interop

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tf_fixtures"))
import generate_hf_more2 as G  # noqa: E402

from ckptool.ops.transform.hf.export import convert_hf  # noqa: E402


def _folder(out):
    from safetensors.numpy import load_file

    got = {}
    for name in os.listdir(out):
        if name.endswith(".safetensors"):
            got.update(load_file(os.path.join(out, name)))
    return got


def _same(out, model):
    """The folder holds the 4.57 model's tensors (batch-norm counters 0); 4.57 loads it cleanly."""
    got = _folder(out)
    want = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        assert got[k].shape == w.shape and np.array_equal(got[k], w), k
    cfg = transformers.AutoConfig.from_pretrained(out)
    loaded, info = getattr(transformers, cfg.architectures[0]).from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    return loaded.eval()


@pytest.mark.parametrize("variant, width, depth, size, top", [("b0", 1.0, 1.0, 224, True),
                                                              ("b1-notop", 1.0, 1.1, 240, False),
                                                              ("small", 0.4, 0.3, 130, True)])
def test_efficientnet_keras_as_the_script_maps_it(tmp_path, variant, width, depth, size, top):
    model = G.keras_efficientnet(width, depth, size, top=top, classes=7)
    G.randomize(model.weights, 30)
    model.save_weights(str(tmp_path / "ckpt"))
    config = None
    if variant == "small":  # EfficientNet()'s arguments: the input size is not in the checkpoint
        config = str(tmp_path / "args.json")
        with open(config, "w") as f:
            f.write(f'{{"default_size": {size}, "dropout_rate": 0.2}}')
    result = convert_hf(str(tmp_path / "ckpt"), str(tmp_path / "out"), config=config)
    assert result.architecture == ("EfficientNetForImageClassification" if top else "EfficientNetModel")
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert (cfg.width_coefficient, cfg.depth_coefficient, cfg.image_size) == (width, depth, size)
    assert cfg.depthwise_padding == G.keras_dw_padding(model)
    cfg.image_size = size
    ref, outs = G.efficientnet_oracle(model, cfg, np.random.default_rng(1).random((1, 3, size, size),
                                                                                    dtype=np.float32))
    loaded = _same(tmp_path / "out", ref)
    with torch.no_grad():
        r = loaded(torch.from_numpy(outs["inputs"]))
    mine = r.logits.numpy() if top else np.transpose(r.last_hidden_state.numpy(), (0, 2, 3, 1))
    scale = np.abs(outs["tf_out"]).max()
    assert np.abs(mine - outs["tf_out"]).max() <= 1e-4 * scale
    assert np.abs(mine - outs["hf457_out"]).max() <= 1e-5 * scale  # the same weights: threads may sum apart


def test_efficientnet_keras_names(tmp_path):
    """The same model under its Keras variable names (a TF1 Saver of model.weights)."""
    model = G.keras_efficientnet(0.4, 0.3, 130, classes=3)
    G.randomize(model.weights, 31)
    G.save_named(str(tmp_path / "model.ckpt"), model.weights)
    convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"))
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    cfg.image_size = 130
    ref, _ = G.efficientnet_oracle(model, cfg, np.zeros((1, 3, 130, 130), np.float32))
    _same(tmp_path / "out", ref)


@pytest.mark.parametrize("dm, fine, labels, ema", [(0.35, True, 1001, True), (1.4, True, 0, True),
                                                   (0.5, False, 7, False)])
def test_mobilenet_v2_slim_as_the_loader_places_it(tmp_path, dm, fine, labels, ema):
    model = G.mobilenet_v2_case(str(tmp_path), dm, fine, labels, 50, size=64, ema=ema)
    result = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"))
    assert result.architecture == type(model).__name__
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert (cfg.depth_multiplier, cfg.finegrained_output) == (dm, fine or dm >= 1)
    loaded = _same(tmp_path / "out", model)
    with np.load(tmp_path / "outputs.npz") as z:
        with torch.no_grad():
            r = loaded(torch.from_numpy(z["inputs"]))
        mine = r.logits if labels else r.last_hidden_state.permute(0, 2, 3, 1)
        assert np.abs(mine.numpy() - z["hf457_out"]).max() <= 1e-5 * np.abs(z["hf457_out"]).max()


@pytest.mark.parametrize("head, cfg", [("lm", dict(G.XLNET, n_token=50, d_model=16, n_layer=4, n_head=4, d_head=4,
                                                   d_inner=24)),
                                       ("classification", dict(G.XLNET, n_layer=3, ff_activation="relu")),
                                       (None, dict(G.XLNET, d_model=12, n_head=3))])
def test_xlnet_as_the_loader_places_it(tmp_path, head, cfg):
    """The 4.57 loader (classification_TASK, which it cannot place, by the same rule as regression_TASK)."""
    model = G.xlnet_case(str(tmp_path), cfg, head, 70, task="sst-2", vocab=False)
    result = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"), config=str(tmp_path / "xlnet_config.json"))
    assert result.architecture == type(model).__name__
    loaded = _same_tied(tmp_path / "out", model)
    with np.load(tmp_path / "outputs.npz") as z:
        with torch.no_grad():
            r = loaded(input_ids=torch.from_numpy(z["in_input_ids"]), token_type_ids=torch.from_numpy(z["in_token_type_ids"]))
        mine = (r.logits if head else r.last_hidden_state).numpy()
        assert np.abs(mine - z["hf457_out"]).max() <= 1e-5 * max(1.0, np.abs(z["hf457_out"]).max())


def _same_tied(out, model):
    """As _same, without the tied LM head (save_pretrained leaves it out too)."""
    got = _folder(out)
    want = {k: v.detach().numpy() for k, v in model.state_dict().items() if k != "lm_loss.weight"}
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        assert got[k].shape == w.shape and np.array_equal(got[k], w), k
    cfg = transformers.AutoConfig.from_pretrained(out)
    loaded, info = getattr(transformers, cfg.architectures[0]).from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    return loaded.eval()


@pytest.mark.parametrize("clusters, n_ctx, n, heads, layers, head", [(32, 24, 16, 4, 3, True), (16, 16, 12, 3, 2, False)])
def test_imagegpt_as_the_loader_places_it(tmp_path, clusters, n_ctx, n, heads, layers, head):
    model = G.imagegpt_case(str(tmp_path), clusters, n_ctx, n, heads, layers, 90, head=head)
    result = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"))
    assert result.architecture == type(model).__name__
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert (cfg.vocab_size, cfg.n_head, cfg.activation_function, cfg.tie_word_embeddings) == (clusters + 1, heads,
                                                                                               "quick_gelu", False)
    loaded = _same(tmp_path / "out", model)
    with np.load(tmp_path / "outputs.npz") as z:
        with torch.no_grad():
            r = loaded(input_ids=torch.from_numpy(z["in_input_ids"]))
        mine = (r.logits if head else r.last_hidden_state).numpy()
        assert np.abs(mine - z["hf457_out"]).max() <= 1e-5 * max(1.0, np.abs(z["hf457_out"]).max())


def test_decision_transformer_gpt2_as_its_loader_places_it(tmp_path):
    model = G.decision_transformer_case(str(tmp_path), 12, 3, 3, 20, 24, 110)
    plain = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "gpt2"), dry_run=True)
    assert plain.architecture == "GPT2LMHeadModel"  # the names are GPT-2's: only --arch says otherwise
    result = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"), arch="decision-transformer",
                        config=str(tmp_path / "hparams.json"))
    assert result.architecture == "DecisionTransformerGPT2Model"
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert (cfg.hidden_size, cfg.n_head, cfg.activation_function) == (12, 3, "gelu_new")
    loaded = _same(tmp_path / "out", model)
    with np.load(tmp_path / "outputs.npz") as z:
        with torch.no_grad():
            mine = loaded(inputs_embeds=torch.from_numpy(z["in_inputs_embeds"])).last_hidden_state.numpy()
        assert np.abs(mine - z["hf457_out"]).max() <= 1e-5 * max(1.0, np.abs(z["hf457_out"]).max())


def test_efficientnet_trained_keras_checkpoint_with_its_optimizer(tmp_path):
    """A tf_keras EfficientNet trained a step (Adam's slots, its iterations, the BN statistics moved)
    and saved by tf.train.Checkpoint(model=..., optimizer=...): the optimizer is left out, the rest
    placed by layer order under the model/ prefix."""
    import tf_keras

    model = G.keras_efficientnet(0.4, 0.3, 64, classes=3)
    G.randomize(model.weights, 32)
    model.compile(optimizer=tf_keras.optimizers.Adam(1e-3),
                  loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.default_rng(2).random((4, 64, 64, 3), dtype=np.float32) * 255
    model.fit(x, np.array([0, 1, 2, 0]), epochs=1, verbose=0)
    tf.train.Checkpoint(model=model, optimizer=model.optimizer).write(str(tmp_path / "ckpt"))
    with open(tmp_path / "args.json", "w") as f:
        f.write('{"default_size": 64}')
    result = convert_hf(str(tmp_path / "ckpt"), str(tmp_path / "out"), config=str(tmp_path / "args.json"))
    assert any(why == "optimizer state" for _, why in result.dropped)
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    ref, outs = G.efficientnet_oracle(model, cfg, np.random.default_rng(3).random((1, 3, 64, 64), dtype=np.float32))
    loaded = _same(tmp_path / "out", ref)
    with torch.no_grad():
        mine = loaded(torch.from_numpy(outs["inputs"])).logits.numpy()
    assert np.abs(mine - outs["tf_out"]).max() <= 1e-4 * np.abs(outs["tf_out"]).max()


@pytest.mark.parametrize("cls_name, cfg", [("LxmertForQuestionAnswering", dict(G.LXMERT, l_layers=1, x_layers=2,
                                                                               r_layers=1, num_qa_labels=5)),
                                           ("LxmertModel", dict(G.LXMERT, hidden_size=12, num_attention_heads=3))])
def test_lxmert_as_the_loader_places_it(tmp_path, cls_name, cfg):
    model = G.lxmert_case(str(tmp_path), cfg, 130, cls_name)
    result = convert_hf(str(tmp_path / "model.ckpt"), str(tmp_path / "out"), config=str(tmp_path / "config.json"))
    assert result.architecture == cls_name
    loaded = _same(tmp_path / "out", model)
    with np.load(tmp_path / "outputs.npz") as z:
        with torch.no_grad():
            out = loaded(input_ids=torch.from_numpy(z["in_input_ids"]), visual_feats=torch.from_numpy(z["in_visual_feats"]),
                         visual_pos=torch.from_numpy(z["in_visual_pos"]))
        mine = getattr(out, str(z["field"])).numpy()
        assert np.abs(mine - z["hf457_out"]).max() <= 1e-5 * max(1.0, np.abs(z["hf457_out"]).max())
