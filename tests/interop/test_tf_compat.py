"""ckptool.compat.tf against TensorFlow 2.21: one probe script (compat_probe.py) run under real
TF and under ``python -m ckptool.shim`` on every fixture, compared field by field (types, values
bit-exact, dtype maps, debug strings, error classes and messages, state); and a BERT-shaped TF1
checkpoint read the way transformers' load_tf_weights_in_bert reads it."""

import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.interop

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(REPO, "tests", "interop", "compat_probe.py")
V1 = ["tests/data/v1/single/v1ckpt", "tests/data/v1/sharded/v1sharded-?????-of-00003"]


def _targets():
    prefixes = sorted(p[: -len(".index")] for root in ("tests/data", "examples")
                      for p in glob.glob(os.path.join(root, "**", "*.index"), recursive=True, root_dir=REPO))
    dirs = sorted({os.path.dirname(p) for p in prefixes + V1} | {"tests/data/savedmodel/model"})
    return ([f"prefix:{p}" for p in prefixes + V1] + [f"dir:{d}" for d in dirs]
            + [f"prefix:{os.path.join(REPO, prefixes[0])}", f"dir:{os.path.join(REPO, dirs[0])}"])


def _env():
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def _run(shim, cwd, script, *args):
    cmd = [sys.executable] + (["-m", "ckptool.shim"] if shim else []) + [script, *map(str, args)]
    p = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _differences(a, b, where=""):
    """Every path at which two JSON documents differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only in {'TF' if k in a else 'ckptool'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _differences(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: TF {json.dumps(a)[:300]} != ckptool {json.dumps(b)[:300]}"]


def _v1_debug_lines_sorted(doc):
    # A sharded V1 checkpoint: TF fills its tensor map shard by shard in the order the
    # directory lists the files (readdir), ckptool in the shards' order: the same lines and
    # names, compared as sets. (Everywhere else the orders are compared as they are.)
    for target, rec in doc.items():
        if target.startswith("prefix:") and "?????" in target and "debug_string" in rec:
            rec["debug_string"]["lines"].sort()
            rec["map_order"] = {k: sorted(v) for k, v in rec["map_order"].items()}
    return doc


def test_probe_answers_equal_tensorflows_on_every_fixture(tmp_path):
    targets = _targets()
    assert len(targets) > 30
    _run(False, REPO, PROBE, tmp_path / "tf.json", *targets)
    shim = _run(True, REPO, PROBE, tmp_path / "shim.json", *targets)
    assert shim.stderr.count("ckptool.shim: 'import tensorflow' gives ckptool.compat.tf") == 1
    theirs = _v1_debug_lines_sorted(json.loads((tmp_path / "tf.json").read_text()))
    ours = _v1_debug_lines_sorted(json.loads((tmp_path / "shim.json").read_text()))
    diff = _differences(theirs, ours)
    assert not diff, f"{len(diff)} differences:\n" + "\n".join(diff[:60])
    # the probe saw what it claims to: values, errors, state
    assert sum(len(r.get("values", {})) for r in theirs.values()) > 100
    assert theirs["dir:examples/keras_adam"]["latest_checkpoint"] == {"ok": "examples/keras_adam/ckpt-5"}
    assert theirs["prefix:tests/data/keras_adam/ckpt-1"]["missing_key"]["str"] == "Key nope not found in checkpoint"


def test_probe_on_moved_and_edited_directories(tmp_path):
    # state files with relative, absolute and stale paths, a missing latest, a state file that
    # does not parse, an empty one: get_checkpoint_state / latest_checkpoint / load_checkpoint
    work = tmp_path / "w"
    base = shutil.copytree(os.path.join(REPO, "examples", "keras_adam"), work / "rel")
    ab = shutil.copytree(base, work / "abs")
    (ab / "checkpoint").write_text(f'model_checkpoint_path: "{ab}/ckpt-4"\nall_model_checkpoint_paths: "{ab}/ckpt-4"\n')
    gone = shutil.copytree(base, work / "gone")
    for f in gone.glob("ckpt-5.*"):
        f.unlink()
    bad = shutil.copytree(base, work / "bad")
    (bad / "checkpoint").write_text("this is { not a state\n")
    none = shutil.copytree(base, work / "none")
    (none / "checkpoint").write_text('all_model_checkpoint_paths: "ckpt-3"\n')
    targets = [f"dir:{d}" for d in ("rel", "abs", "gone", "bad")] + ["prefix:rel/ckpt-3", "prefix:abs/ckpt-*"]
    _run(False, work, PROBE, tmp_path / "tf.json", *targets)
    _run(True, work, PROBE, tmp_path / "shim.json", *targets)
    theirs, ours = (json.loads((tmp_path / n).read_text()) for n in ("tf.json", "shim.json"))
    diff = _differences(theirs, ours)
    assert not diff, "\n".join(diff[:60])
    for d, raised in ((none, "ValueError"),):
        script = tmp_path / "state.py"
        script.write_text("import sys, tensorflow as tf\ntry:\n    tf.train.get_checkpoint_state(sys.argv[1])\n"
                          "except Exception as e:\n    print(type(e).__name__, e)\n")
        outs = [_run(s, tmp_path, script, d).stdout for s in (False, True)]
        assert outs[0] == outs[1] and outs[0].startswith(raised), outs


LOAD_LIKE_TRANSFORMERS = textwrap.dedent("""\
    # Written the way transformers 4.x load_tf_weights_in_bert reads a TF1 checkpoint.
    import os
    import sys

    import numpy as np
    import tensorflow as tf

    tf_path = os.path.abspath(sys.argv[1])
    init_vars = tf.train.list_variables(tf_path)
    names = []
    arrays = []
    for name, shape in init_vars:
        array = tf.train.load_variable(tf_path, name)
        assert list(array.shape) == shape, (name, array.shape, shape)
        names.append(name)
        arrays.append(array)
    out = {}
    for name, array in zip(names, arrays):
        parts = name.split("/")
        if any(n in ["adam_v", "adam_m", "AdamWeightDecayOptimizer", "AdamWeightDecayOptimizer_1", "global_step"]
               for n in parts):
            continue
        if parts[-1] == "kernel":
            array = np.transpose(array)
        out[name] = array
    np.savez(sys.argv[2], **out)
    print(tf.__name__, len(init_vars), len(out))
""")


def _write_bert(prefix, layers=2, hidden=8, vocab=30, seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"bert/embeddings/word_embeddings": [vocab, hidden], "bert/embeddings/position_embeddings": [16, hidden],
              "bert/embeddings/token_type_embeddings": [2, hidden], "bert/embeddings/LayerNorm/gamma": [hidden],
              "bert/embeddings/LayerNorm/beta": [hidden], "bert/pooler/dense/kernel": [hidden, hidden],
              "bert/pooler/dense/bias": [hidden], "cls/predictions/output_bias": [vocab],
              "cls/predictions/transform/dense/kernel": [hidden, hidden],
              "cls/seq_relationship/output_weights": [2, hidden]}
    for i in range(layers):
        lp = f"bert/encoder/layer_{i}"
        for m in ("attention/self/query", "attention/self/key", "attention/self/value", "attention/output/dense"):
            shapes[f"{lp}/{m}/kernel"] = [hidden, hidden]
            shapes[f"{lp}/{m}/bias"] = [hidden]
        shapes[f"{lp}/intermediate/dense/kernel"] = [hidden, 4 * hidden]
        shapes[f"{lp}/output/dense/kernel"] = [4 * hidden, hidden]
        shapes[f"{lp}/output/LayerNorm/gamma"] = [hidden]
    g = tf.Graph()
    with g.as_default():
        variables = []
        for name, shape in shapes.items():
            init = rng.standard_normal(shape).astype(np.float32)
            variables.append(tf.compat.v1.get_variable(name, initializer=init, use_resource=False))
            for slot in ("adam_m", "adam_v"):
                variables.append(tf.compat.v1.get_variable(f"{name}/{slot}", initializer=np.abs(init) * 1e-3,
                                                           use_resource=False))
        variables.append(tf.compat.v1.train.get_or_create_global_step())
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            return saver.save(s, prefix, global_step=1000), len(shapes)


def test_bert_tf1_checkpoint_read_as_transformers_reads_it(tmp_path):
    prefix, n = _write_bert(str(tmp_path / "bert" / "bert_model.ckpt"))
    script = tmp_path / "load_tf_weights.py"
    script.write_text(LOAD_LIKE_TRANSFORMERS)
    real = _run(False, tmp_path, script, prefix, tmp_path / "tf.npz")
    shim = _run(True, tmp_path, script, prefix, tmp_path / "shim.npz")
    assert real.stdout.split()[1:] == shim.stdout.split()[1:] == [str(3 * n + 1), str(n)]
    assert shim.stdout.split()[0] == "ckptool.compat.tf" and real.stdout.split()[0] == "tensorflow"
    with np.load(tmp_path / "tf.npz") as a, np.load(tmp_path / "shim.npz") as b:
        assert sorted(a.files) == sorted(b.files) and len(a.files) == n
        for k in a.files:
            assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
            assert a[k].tobytes() == b[k].tobytes(), k
    # the directory form transformers users also pass: latest_checkpoint through the state file
    out = _run(True, tmp_path, script, tmp_path / "bert", tmp_path / "dir.npz")
    assert out.stdout.split()[1:] == [str(3 * n + 1), str(n)]


def _write_v1(prefix, n, partitioned=False, dtypes=("float32",)):
    from tensorflow.core.protobuf import saver_pb2

    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        for i in range(n):
            dt = dtypes[i % len(dtypes)]
            tf.compat.v1.get_variable(f"s{(i * 7919) % 97}/v{i}", initializer=np.arange(i % 5 + 1).astype(dt),
                                      use_resource=False)
        if partitioned:
            tf.compat.v1.get_variable("emb", shape=[10, 4], partitioner=tf.compat.v1.fixed_size_partitioner(3),
                                      use_resource=False)
        saver = tf.compat.v1.train.Saver(write_version=saver_pb2.SaverDef.V1)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            return saver.save(s, prefix)


def test_probe_on_tf1_v1_checkpoints(tmp_path):
    # V1 (Saver write_version=V1): its maps and debug_string in TF's hash order, exactly, from
    # a handful of tensors to several rehashes; a partitioned variable; dtypes TF's V1 reader refuses
    prefixes = [_write_v1(str(tmp_path / "small" / "m"), 5, partitioned=True),
                _write_v1(str(tmp_path / "mid" / "m"), 40, dtypes=("float32", "float16", "int64", "complex64")),
                _write_v1(str(tmp_path / "big" / "m"), 300)]
    targets = [f"prefix:{p}" for p in prefixes] + [f"dir:{os.path.dirname(p)}" for p in prefixes]
    _run(False, tmp_path, PROBE, tmp_path / "tf.json", *targets)
    _run(True, tmp_path, PROBE, tmp_path / "shim.json", *targets)
    theirs, ours = (json.loads((tmp_path / n).read_text()) for n in ("tf.json", "shim.json"))
    diff = _differences(theirs, ours)
    assert not diff, "\n".join(diff[:60])
    assert any("UnimplementedError" == v.get("raised") for v in theirs[targets[1]]["values"].values())
    assert theirs[targets[0]]["debug_string"]["lines"] != sorted(theirs[targets[0]]["debug_string"]["lines"])
