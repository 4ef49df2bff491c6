"""transformers' ``convert_*_tf_checkpoint_to_pytorch.py`` scripts, unchanged, on the checkpoints
hf_loaders_probe.py wrote: each run as ``python -m transformers.models.MODEL.SCRIPT ARGS``
runs it (``__main__``, its package set, ``sys.argv``), all in one process so torch and transformers load once; under real TensorFlow or
under ``python -m ckptool.shim`` (tests/interop/test_tf_hf_loaders.py compares the two).

    python hf_scripts_probe.py SCRIPTS_DIR CKPTS OUT    # OUT.json (per script: tensors or error), OUT.npz

SCRIPTS_DIR holds the scripts as ``transformers/models/MODEL/NAME.py`` (the 4.46.3 wheel,
unpacked); CKPTS is hf_loaders_probe's output, whose models' configs are written beside.
"""

import builtins
import json
import os
import sys
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_loaders_probe as lp  # noqa: E402

CKPT, CONFIG, OUT = "{ckpt}", "{config}", "{out}"
# name: (script under transformers/models/, checkpoint written by hf_loaders_probe, arguments)
SCRIPTS = {
    "albert": ("albert/convert_albert_original_tf_checkpoint_to_pytorch.py", "albert",
               ["--tf_checkpoint_path", CKPT, "--albert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "bert": ("bert/convert_bert_original_tf_checkpoint_to_pytorch.py", "bert",
             ["--tf_checkpoint_path", CKPT, "--bert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "bert_tf2": ("bert/convert_bert_original_tf2_checkpoint_to_pytorch.py", "bert_tf2",
                 ["--tf_checkpoint_path", CKPT, "--bert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "big_bird": ("big_bird/convert_bigbird_original_tf_checkpoint_to_pytorch.py", "big_bird",
                 ["--tf_checkpoint_path", CKPT, "--big_bird_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "byt5": ("byt5/convert_byt5_original_tf_checkpoint_to_pytorch.py", "t5",
             ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "convbert": ("convbert/convert_convbert_original_tf1_checkpoint_to_pytorch_and_tf2.py", "convbert",
                 ["--tf_checkpoint_path", CKPT, "--convbert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "electra": ("electra/convert_electra_original_tf_checkpoint_to_pytorch.py", "electra",
                ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT,
                 "--discriminator_or_generator", "discriminator"]),
    "electra_generator": ("electra/convert_electra_original_tf_checkpoint_to_pytorch.py", "electra_generator",
                          ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT,
                           "--discriminator_or_generator", "generator"]),
    "funnel": ("funnel/convert_funnel_original_tf_checkpoint_to_pytorch.py", "funnel",
               ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "gpt2": ("gpt2/convert_gpt2_original_tf_checkpoint_to_pytorch.py", "gpt2",
             ["--gpt2_checkpoint_path", CKPT, "--gpt2_config_file", CONFIG, "--pytorch_dump_folder_path", OUT]),
    "gptsan": ("deprecated/gptsan_japanese/convert_gptsan_tf_checkpoint_to_pytorch.py", "gptsan",
               ["--tf_model_dir", "{dir}", "--output", OUT + ".pt"]),
    "gpt_neo": ("gpt_neo/convert_gpt_neo_mesh_tf_to_pytorch.py", "gpt_neo",
                ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "mobilebert": ("mobilebert/convert_mobilebert_original_tf_checkpoint_to_pytorch.py", "mobilebert",
                   ["--tf_checkpoint_path", CKPT, "--mobilebert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "myt5": ("myt5/convert_myt5_original_tf_checkpoint_to_pytorch.py", "mt5",
             ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "rembert": ("rembert/convert_rembert_tf_checkpoint_to_pytorch.py", "rembert",
                ["--tf_checkpoint_path", CKPT, "--rembert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "roformer": ("roformer/convert_roformer_original_tf_checkpoint_to_pytorch.py", "roformer",
                 ["--tf_checkpoint_path", CKPT, "--bert_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "t5": ("t5/convert_t5_original_tf_checkpoint_to_pytorch.py", "t5",
           ["--tf_checkpoint_path", CKPT, "--config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "tapas": ("tapas/convert_tapas_original_tf_checkpoint_to_pytorch.py", "tapas",
              ["--task", "MLM", "--tf_checkpoint_path", CKPT, "--tapas_config_file", CONFIG, "--pytorch_dump_path", OUT]),
    "transfo_xl": ("deprecated/transfo_xl/convert_transfo_xl_original_tf_checkpoint_to_pytorch.py", "transfo_xl",
                   ["--pytorch_dump_folder_path", OUT, "--tf_checkpoint_path", CKPT, "--transfo_xl_config_file", CONFIG]),
    "xlnet": ("xlnet/convert_xlnet_original_tf_checkpoint_to_pytorch.py", "xlnet",
              ["--tf_checkpoint_path", CKPT, "--xlnet_config_file", CONFIG, "--pytorch_dump_folder_path", OUT]),
}
FOLDERS = {"gpt2", "transfo_xl", "xlnet"}  # scripts that write into a folder that must exist


def write_gptsan(directory):
    """A Mesh-TF GPT-SAN run directory (no loader in transformers: its script maps the names itself):
    parameters.json, the ``checkpoint`` state file, dense and switch (16 experts) layers, ``pasts/``."""
    import tensorflow as tf

    rng = np.random.default_rng(3)
    d, f = 8, 16
    shapes = {"model/wte": (24, d), "model/wpe": (32, d), "model/ete": (32, d), "model/wob": (24,),
              "model/dense/kernel": (d, d), "model/dense_1/bias": (d,), "pasts/mlp0/kernel": (d, d),
              "pasts/out/kernel": (d, d), "global_step": ()}
    for i in (0, 1):
        shapes.update({f"model/att{i}/qkv/kernel": (d, 3, 2, 4), f"model/att{i}/o/kernel": (2, 4, d),
                       f"model/an{i}/g": (d,), f"model/an{i}/b": (d,), f"model/ln{i}/g": (d,), f"model/ln{i}/b": (d,)})
    shapes.update({"model/mlp0/p1/kernel": (d, f), "model/mlp0/p1/bias": (f,), "model/mlp0/p2/kernel": (f, d),
                   "model/mlp0/p2/bias": (d,), "model/moe1/switch_gating/kernel": (d, 16),
                   "model/moe1/softmlp/kernel": (d, d), "model/moe1/expert/wi/kernel": (16, d, f),
                   "model/moe1/expert/wo/kernel": (16, f, d), "model/wte/adam_m": (24, d)})
    os.makedirs(directory)
    names = list(shapes)
    tf.raw_ops.SaveV2(prefix=os.path.join(directory, "model.ckpt-1000"), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(rng.standard_normal(shapes[n]).astype(np.float32)) for n in names])
    with open(os.path.join(directory, "checkpoint"), "w") as fh:
        fh.write('model_checkpoint_path: "model.ckpt-1000"\nall_model_checkpoint_paths: "model.ckpt-1000"\n')
    with open(os.path.join(directory, "parameters.json"), "w") as fh:
        json.dump({"n_vocab": 24, "n_ctx": 32, "d_model": d, "num_switch_layers": 1, "num_ext_layers": 0}, fh)


def write_configs(ckpts):
    """Each model's config beside its checkpoint, as the script reads it (GPT-Neo's: Mesh-TF's json);
    GPT-SAN's run directory."""
    write_gptsan(os.path.join(ckpts, "gptsan"))
    for _, ckpt, _ in SCRIPTS.values():
        if ckpt == "gptsan":
            continue
        spec = lp.LOADERS[ckpt]
        if ckpt == "gpt_neo":
            c = spec[3]
            config = dict(n_embd=c["hidden_size"], n_layer=c["num_layers"], n_head=c["num_heads"], n_vocab=c["vocab_size"],
                          attention_types=c["attention_types"], n_positions=c["max_position_embeddings"],
                          res_dropout=0.0, embed_dropout=0.0, attn_dropout=0.0)
            with open(os.path.join(ckpts, ckpt, "config.json"), "w") as f:
                json.dump(config, f)
        else:
            lp._build(ckpt, 1)[1].to_json_file(os.path.join(ckpts, ckpt, "config.json"))
    with open(os.path.join(ckpts, "tapas", "vocab.txt"), "w") as f:  # TAPAS's script saves a tokenizer from it
        f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[EMPTY]"] + [f"w{i}" for i in range(18)]) + "\n")


def _tensors(out):
    if os.path.exists(out + ".pt"):  # GPT-SAN's
        out += ".pt"
    elif os.path.isdir(out):
        if os.path.exists(os.path.join(out, "model.safetensors")):
            from safetensors.torch import load_file
            return load_file(os.path.join(out, "model.safetensors"))
        out = os.path.join(out, "pytorch_model.bin")
    return torch.load(out, map_location="cpu", weights_only=True)


def main(scripts_dir, ckpts, out):
    results, arrays = {}, {}
    for name, (script, ckpt, args) in SCRIPTS.items():
        path = os.path.join(scripts_dir, "transformers", "models", script)
        dump = os.path.join(out + "-out", name)
        if name in FOLDERS:
            os.makedirs(dump)
        os.makedirs(os.path.dirname(dump), exist_ok=True)
        argv = [a.format(ckpt=os.path.join(ckpts, ckpt, "model.ckpt"), config=os.path.join(ckpts, ckpt, "config.json"),
                         dir=os.path.join(ckpts, ckpt), out=dump) for a in args]
        saved = sys.argv
        sys.argv = [path] + argv
        try:  # as `python -m transformers.models.MODEL.SCRIPT` runs it: ALBERT's imports are relative
            with open(path) as f:
                code = compile(f.read(), path, "exec")
            package = "transformers.models." + os.path.dirname(script).replace("/", ".")
            exec(code, {"__name__": "__main__", "__file__": path, "__package__": package, "__builtins__": builtins})
            error = None
        except BaseException as exc:  # the script's own failure, compared with TF's
            error = f"{type(exc).__name__}: {exc}".replace(ckpts, "<D>").replace(out, "<O>")
            tb = traceback.format_exc()
        finally:
            sys.argv = saved
        record = {"error": error, "traceback": tb[-1500:] if error else None}
        try:
            state = _tensors(dump)
            record["keys"] = list(state)
            if ckpt in lp.LOADERS:  # the values written: which did the script not carry over?
                source = lp._build(ckpt, 0)[2].state_dict()
                record["missing"] = sorted(k for k, v in state.items() if k in source
                                           and source[k].dtype.is_floating_point and not torch.equal(v, source[k]))
            for k, v in state.items():
                arrays[f"{name}|{k}"] = v.numpy()
        except Exception as exc:  # nothing written
            record["keys"] = f"{type(exc).__name__}"
        results[name] = record
    np.savez(out + ".npz", **arrays)
    with open(out + ".json", "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    if sys.argv[1] == "configs":
        write_configs(os.path.abspath(sys.argv[2]))
    else:
        main(*(os.path.abspath(a) for a in sys.argv[1:4]))
