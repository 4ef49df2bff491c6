"""The real thing: transformers 4.57.6's ``load_tf_weights_in_*`` loaders and transformers' own
``convert_*_original_tf_checkpoint_to_pytorch.py`` scripts, unchanged, under real TensorFlow and
under ``python -m ckptool.shim`` (whose finder answers ``import tensorflow`` even where TF is
installed): identical state_dicts, identical failures.

The loaders come from the installed transformers (4.57.6, with torch); the conversion scripts,
which its wheel no longer ships, from the transformers 4.46.3 wheel, fetched with ``pip download``
at test time (byte-identical to their last upstream version; nothing of theirs is in this repo).
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
PROBE = os.path.join(HERE, "hf_loaders_probe.py")


def _run(shim, cwd, *args, check=True):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""), TF_CPP_MIN_LOG_LEVEL="3",
               TRANSFORMERS_VERBOSITY="info", HF_HUB_OFFLINE="1")
    cmd = [sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [str(a) for a in args]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check:
        assert p.returncode == 0, p.stderr[-3000:]
    return p


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("hf")
    _run(False, d, PROBE, "write", d / "ckpts")
    return d


def test_every_loader_gives_tfs_state_dict(written):
    assert transformers.__version__ == "4.57.6"
    d = written
    _run(False, d, PROBE, "load", d / "ckpts", d / "tf")
    _run(True, d, PROBE, "load", d / "ckpts", d / "shim")
    theirs, ours = (json.loads((d / f"{n}.json").read_text()) for n in ("tf", "shim"))
    assert ours == theirs  # per loader: the same keys and coverage, or the same exception and message
    with np.load(d / "tf.npz") as a, np.load(d / "shim.npz") as b:
        assert sorted(a.files) == sorted(b.files) and len(a.files) > 500
        for k in a.files:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
    # the checkpoints reach the loaders' real code paths: most load weights, GPT-Neo's through tf.dtypes.cast
    loaded = {k for k, r in theirs.items() if r.get("coverage")}
    assert len(theirs) >= 27 and len(loaded) >= 15, theirs
    assert {"bert", "t5", "mt5", "gpt2", "electra", "mobilenet_v1", "mobilenet_v2", "big_bird", "tapas"} <= loaded
    assert "keys" in theirs["gpt_neo"]


SCRIPTS = {  # model dir -> (script, model written by hf_loaders_probe, its arguments)
    "bert": ("convert_bert_original_tf_checkpoint_to_pytorch.py",
             ["--tf_checkpoint_path", "{ckpt}", "--bert_config_file", "{config}", "--pytorch_dump_path", "{out}"]),
    "electra": ("convert_electra_original_tf_checkpoint_to_pytorch.py",
                ["--tf_checkpoint_path", "{ckpt}", "--config_file", "{config}", "--pytorch_dump_path", "{out}",
                 "--discriminator_or_generator", "discriminator"]),
    "t5": ("convert_t5_original_tf_checkpoint_to_pytorch.py",
           ["--tf_checkpoint_path", "{ckpt}", "--config_file", "{config}", "--pytorch_dump_path", "{out}"]),
    "gpt2": ("convert_gpt2_original_tf_checkpoint_to_pytorch.py",
             ["--gpt2_checkpoint_path", "{ckpt}", "--gpt2_config_file", "{config}", "--pytorch_dump_folder_path",
              "{out}"]),
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "transformers==4.46.3", "-d", str(d)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.fail(f"pip download transformers==4.46.3 failed: {p.stderr[-2000:]}")
    (wheel,) = d.glob("transformers-4.46.3-*.whl")
    out = {}
    with zipfile.ZipFile(wheel) as z:
        for model, (name, _) in SCRIPTS.items():
            target = d / model / name
            target.parent.mkdir()
            target.write_bytes(z.read(f"transformers/models/{model}/{name}"))
            out[model] = target
    return out


@pytest.mark.parametrize("model", sorted(SCRIPTS))
def test_conversion_scripts_write_what_they_write_under_tf(written, scripts, model, tmp_path):
    ckpt = written / "ckpts" / model / "model.ckpt"
    sys.path.insert(0, HERE)
    try:
        import hf_loaders_probe
        _, config, _, _ = hf_loaders_probe._build(model, 0)
    finally:
        sys.path.remove(HERE)
    config.to_json_file(str(tmp_path / "config.json"))
    outs = {}
    for shim in (False, True):
        out = tmp_path / ("shim" if shim else "tf")
        if model == "gpt2":
            out.mkdir()  # its script writes into a folder that must exist
        args = [a.format(ckpt=ckpt, config=tmp_path / "config.json", out=out) for a in SCRIPTS[model][1]]
        _run(shim, tmp_path, scripts[model], *args)
        if (out / "model.safetensors").exists():  # save_pretrained (T5's script)
            from safetensors.torch import load_file
            outs[shim] = load_file(out / "model.safetensors")
        else:
            outs[shim] = torch.load(out / "pytorch_model.bin" if out.is_dir() else out, map_location="cpu",
                                    weights_only=True)
    assert list(outs[True]) == list(outs[False]) and len(outs[False]) > 10
    for k, v in outs[False].items():
        w = outs[True][k]
        assert v.dtype == w.dtype and v.shape == w.shape and v.numpy().tobytes() == w.numpy().tobytes(), k
