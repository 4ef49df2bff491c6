"""The real thing: transformers 4.57.6's ``load_tf_weights_in_*`` loaders and transformers' own
``convert_*_tf_checkpoint_to_pytorch.py`` scripts, unchanged, under real TensorFlow and under
``python -m ckptool.shim`` (whose finder answers ``import tensorflow`` even where TF is installed),
on checkpoints TF writes with the variable names each model's real TF release uses
(hf_release_names.py): under TF each loader fills every weight its release holds, and the shim
gives the same state_dicts, bit for bit; where TF fails, the shim fails the same way.

The loaders come from the installed transformers (4.57.6, with torch); the conversion scripts,
which its wheel no longer ships, from the transformers 4.46.3 wheel, fetched with ``pip download``
at test time (byte-identical to their last upstream version; nothing of theirs is in this repo).
GPT-SAN's script (no loader: it maps Mesh-TF names itself) reads a run directory through
``tf.train.load_checkpoint`` inside ``tf.device("/CPU:0")``. QDQBERT's model needs NVIDIA's pytorch-quantization, whose only PyPI wheel is 2.1.3 (2.2.x is an
sdist that refuses to build off NVIDIA's index): the test installs it and scipy (which it imports)
into a temporary directory.

Not run, and why: ``load_tf_weights_in_openai_gpt`` reads OpenAI's numpy files, not TF; CANINE's
script hard-wires the full-size ``CanineConfig()`` (a ~500 MB checkpoint), the MobileNet scripts
fetch label files from the Hub and an image from COCO, Pegasus's and BigBird-Pegasus's fix the
full-size configs (and Pegasus a Hub tokenizer), ImageGPT's the 76M-parameter ``small`` size, and
LXMERT's imports ``load_tf_weights_in_lxmert`` from ``transformers``, which 4.57 no longer exports.
"""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
pytestmark = pytest.mark.interop

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LOADERS_PROBE = os.path.join(HERE, "hf_loaders_probe.py")
SCRIPTS_PROBE = os.path.join(HERE, "hf_scripts_probe.py")

# What each release does not hold, so its loader leaves it as the fresh model has it (all others,
# every floating-point weight of the model, must hold the values written):
UNFILLED = {
    "imagegpt": [f"transformer.h.0.{m}.bias" for m in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")],
    # RoCBERT's loader is a copy of BERT's, which finds a table only by an ``_embeddings`` suffix:
    "roc_bert": ["roc_bert.embeddings.pronunciation_embed.weight", "roc_bert.embeddings.shape_embed.weight"],
    "roformer": ["roformer.encoder.embed_positions.weight"],  # sinusoidal, computed
    "trajectory_transformer": ["tok_emb.weight"],  # (as RoCBERT's)
    "transfo_xl": ["transformer.pos_emb.inv_freq"],  # computed
}
# Loaders that cannot succeed under TF (evidence: the exception TF's run raises; the shim's is the same):
RAISES = {
    # it builds a tensorflow_hub Module (TF1 hub format) and imports tensorflow_text: not a checkpoint reader
    "bert_generation": ("ModuleNotFoundError", "No module named 'tensorflow_hub'"),
    # transformers bug: NEZHA-TensorFlow (a Google BERT fork) names its variables bert/..., which this
    # BERT-copied loader does not rename to the model's nezha scope; nezha_scoped (nezha/...) loads
    "nezha": ("AttributeError", "'NezhaForPreTraining' object has no attribute 'bias'"),
}


def _env(extra_path=""):
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, extra_path, os.environ.get("PYTHONPATH", "")) if p),
                TF_CPP_MIN_LOG_LEVEL="3", TRANSFORMERS_VERBOSITY="info", HF_HUB_OFFLINE="1")


def _run(shim, cwd, extra_path, *args):
    cmd = [sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [str(a) for a in args]
    p = subprocess.run(cmd, cwd=cwd, env=_env(extra_path), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]


def _pip(*args):
    p = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} failed: {p.stderr[-2000:]}")


@pytest.fixture(scope="module")
def quantization(tmp_path_factory):
    d = tmp_path_factory.mktemp("pq")
    _pip("install", "-q", "--no-deps", "--target", str(d), "pytorch-quantization==2.1.3", "scipy==1.17.1")
    return str(d)


@pytest.fixture(scope="module")
def written(tmp_path_factory, quantization):
    d = tmp_path_factory.mktemp("hf")
    _run(False, d, quantization, LOADERS_PROBE, "write", d / "ckpts")
    _run(False, d, quantization, SCRIPTS_PROBE, "configs", d / "ckpts")
    return d


def _same_arrays(a_path, b_path):
    with np.load(a_path) as a, np.load(b_path) as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
        return len(a.files)


def test_every_loader_fills_its_release_and_the_shim_gives_tfs_state_dict(written, quantization):
    assert transformers.__version__ == "4.57.6"
    d = written
    _run(False, d, quantization, LOADERS_PROBE, "load", d / "ckpts", d / "tf")
    _run(True, d, quantization, LOADERS_PROBE, "load", d / "ckpts", d / "shim")
    theirs, ours = (json.loads((d / f"{n}.json").read_text()) for n in ("tf", "shim"))
    assert ours == theirs  # per loader: the same keys and missing weights, or the same exception and message
    assert _same_arrays(d / "tf.npz", d / "shim.npz") > 1000
    sys.path.insert(0, HERE)
    try:
        import hf_loaders_probe
        loaders = {k for k, spec in hf_loaders_probe.LOADERS.items() if spec[6] != "tf2"}
    finally:
        sys.path.remove(HERE)
    assert set(theirs) == loaders and len(loaders) == 31  # transformers' 29 (without openai's) + 2 variants
    for key, result in theirs.items():
        if key in RAISES:
            assert (result.get("raised"), result.get("str")) == RAISES[key], key
        else:  # under TF the loader filled every weight the release holds
            assert result.get("missing") == UNFILLED.get(key, []), (key, result)


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheel")
    _pip("download", "-q", "--no-deps", "transformers==4.46.3", "-d", str(d))
    (wheel,) = d.glob("transformers-4.46.3-*.whl")
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if "/convert_" in name and name.startswith("transformers/models/"):
                target = d / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
    return d


@pytest.fixture(scope="module")
def converted(written, scripts, quantization):
    d = written
    _run(False, d, quantization, SCRIPTS_PROBE, scripts, d / "ckpts", d / "scripts-tf")
    _run(True, d, quantization, SCRIPTS_PROBE, scripts, d / "ckpts", d / "scripts-shim")
    return tuple(json.loads((d / f"scripts-{n}.json").read_text()) for n in ("tf", "shim"))


def test_conversion_scripts_write_under_the_shim_what_they_write_under_tf(written, converted):
    theirs, ours = converted
    # ConvBERT's script converts to TF2 Keras as well, importing TFConvBertModel at its top: under the
    # shim that import fails, saying what the shim offers (TF's run writes both)
    convbert = ours.pop("convbert")
    assert convbert["error"].startswith("ModuleNotFoundError: Could not import module 'TFConvBertModel'")
    assert "tensorflow.python is not offered by ckptool.compat.tf" in convbert["traceback"]
    assert theirs.pop("convbert")["error"] is None
    assert ours == theirs
    with np.load(written / "scripts-tf.npz") as a, np.load(written / "scripts-shim.npz") as b:
        shared = [k for k in a.files if not k.startswith("convbert|")]
        assert sorted(shared) == sorted(b.files) and len(shared) > 500
        for k in shared:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
    unfilled = {"roformer": UNFILLED["roformer"], "transfo_xl": UNFILLED["transfo_xl"]}
    for name, result in theirs.items():
        if name == "tapas":  # the weights are saved; its tokenizer then wants pandas, if not installed
            assert result["error"] in (None, "ImportError: Pandas is required for the TAPAS tokenizer."), result
        else:
            assert result["error"] is None, (name, result["traceback"])
        assert result.get("missing", []) == unfilled.get(name, []) and len(result["keys"]) > 10, (name, result)
    assert len(theirs) == 19
    # GPT-SAN's script reads inside tf.device("/CPU:0") and writes its tensors in the order TF's
    # get_variable_to_shape_map iterates (a C++ unordered_map's): the same order under the shim
    gptsan = theirs["gptsan"]["keys"]
    assert len(gptsan) == 63 and gptsan != sorted(gptsan)


def test_device_scopes_behave_as_tfs(tmp_path):
    probe = os.path.join(HERE, "hf_device_probe.py")
    outs = [subprocess.run([sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [probe], cwd=tmp_path,
                           env=_env(), capture_output=True, text=True) for shim in (False, True)]
    assert [p.returncode for p in outs] == [0, 0], outs[1].stderr[-2000:]
    assert outs[1].stdout == outs[0].stdout and outs[0].stdout.count("\n") == 70
    assert "v2 '/CPU:0' ok None" in outs[0].stdout and "enter ValueError Multiple device types" in outs[0].stdout
