"""``convert --to hf`` of a BERT-large-sized checkpoint vs a durable user-space copy of the same bytes
(``dd bs=8M conv=fsync``), and the export's peak RSS (issue 51's speed and memory targets: at most
2x dd, at most twice the largest tensor plus 150 MB).

    PYTHONPATH=. python bench/hf_export.py [--repeat N] [--keep DIR]

The checkpoint is synthetic, written by ckptool's own writer with google-research/bert's names and
shapes for BERT-large uncased (24 layers, hidden 1024, 16 heads, intermediate 4096, vocabulary
30,522, 512 positions, the pretraining heads): 1.34 GB of float32 in one data file. Each repeat runs
dd and the export (a fresh process each), interleaved; the minima and medians are printed, with
the load average before and after (the machine may be shared). Like with like: dd writes a new
file (its copy is removed between runs, untimed), so the export writes a new folder (the previous
one removed, untimed; ``--overwrite`` times it ``--force``-d over the previous export instead,
which adds the unlinking of the old 1.3 GB file); the page cache holds the data file for both
(each reads it right after the other); and the export runs from compiled bytecode, as an
installed package does (``PYTHONPYCACHEPREFIX`` in the checkpoint's directory, filled by one
untimed export first: a run with ``PYTHONDONTWRITEBYTECODE`` set compiles ~90 modules, ~0.2 s).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LARGE = {"vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
         "intermediate_size": 4096, "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu",
         "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}


def shapes(c):
    h, ff = c["hidden_size"], c["intermediate_size"]
    out = {"bert/embeddings/word_embeddings": (c["vocab_size"], h),
           "bert/embeddings/position_embeddings": (c["max_position_embeddings"], h),
           "bert/embeddings/token_type_embeddings": (c["type_vocab_size"], h),
           "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,)}
    for i in range(c["num_hidden_layers"]):
        p = f"bert/encoder/layer_{i}"
        for m in ("query", "key", "value"):
            out[f"{p}/attention/self/{m}/kernel"], out[f"{p}/attention/self/{m}/bias"] = (h, h), (h,)
        for d, (a, b) in {"attention/output/dense": (h, h), "intermediate/dense": (h, ff),
                          "output/dense": (ff, h)}.items():
            out[f"{p}/{d}/kernel"], out[f"{p}/{d}/bias"] = (a, b), (b,)
        for n in ("attention/output/LayerNorm", "output/LayerNorm"):
            out[f"{p}/{n}/gamma"], out[f"{p}/{n}/beta"] = (h,), (h,)
    out.update({"bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
                "cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
                "cls/predictions/transform/LayerNorm/gamma": (h,), "cls/predictions/transform/LayerNorm/beta": (h,),
                "cls/predictions/output_bias": (c["vocab_size"],), "cls/seq_relationship/output_weights": (2, h),
                "cls/seq_relationship/output_bias": (2,)})
    return out


def make(d):
    sys.path.insert(0, ROOT)
    import ckptool

    rng = np.random.default_rng(0)
    values = {k: rng.standard_normal(s, dtype=np.float32) * 0.02 for k, s in shapes(LARGE).items()}
    ckptool.write(os.path.join(d, "model.ckpt"), values)
    with open(os.path.join(d, "bert_config.json"), "w") as f:
        json.dump(LARGE, f)


def timed(cmd, env=None):
    """(seconds, peak RSS in bytes, CPU seconds: user + system) of a child process."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    took = time.perf_counter() - t
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]}... failed: {err}")
    return took, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="a directory to keep the checkpoint in (made once, reused)")
    ap.add_argument("--overwrite", action="store_true", help="export over the previous export (--force)")
    ap.add_argument("--make", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.make:
        make(a.make)
        return
    d = a.keep or tempfile.mkdtemp(prefix="ckpt-bench-hf-", dir=os.environ.get("TMPDIR", "/var/tmp"))
    os.makedirs(d, exist_ok=True)
    try:
        if not os.path.exists(os.path.join(d, "model.ckpt.index")):  # in a child: this process stays small,
            subprocess.run([sys.executable, __file__, "--make", d], check=True)  # its RSS not the exports' start
        s = shapes(LARGE)
        largest, total = max(4 * int(np.prod(v)) for v in s.values()), sum(4 * int(np.prod(v)) for v in s.values())
        data = os.path.join(d, "model.ckpt.data-00000-of-00001")
        env_py = [sys.executable, "-m", "ckptool", "convert", os.path.join(d, "model.ckpt"), os.path.join(d, "out"),
                  "--to", "hf", "--config", os.path.join(d, "bert_config.json"), "--force"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = os.path.join(d, "pycache")
        out = os.path.join(d, "out")
        subprocess.run(env_py, check=True, env=env, stdout=subprocess.DEVNULL,  # bytecode compiled, untimed
                       stderr=subprocess.DEVNULL)
        load0 = os.getloadavg()[0]
        dd, ck, rss, dd_cpu, ck_cpu = [], [], [], [], []
        for _ in range(a.repeat):
            t, _, c = timed(["dd", f"if={data}", f"of={os.path.join(d, 'dd.copy')}", "bs=8M", "conv=fsync",
                             "status=none"])
            dd.append(t)
            dd_cpu.append(c)
            os.remove(os.path.join(d, "dd.copy"))
            if not a.overwrite:
                shutil.rmtree(out)
            t, r, c = timed(env_py, env)
            ck.append(t)
            rss.append(r)
            ck_cpu.append(c)
        load1 = os.getloadavg()[0]
        md, mc, mr = statistics.median(dd), statistics.median(ck), max(rss)
        pairs = [round(c / x, 2) for c, x in zip(ck, dd)]
        target_rss = 2 * largest + 150e6
        print(json.dumps({"bytes": total, "largest_tensor": largest, "dd_s": [round(x, 2) for x in dd],
                          "export_s": [round(x, 2) for x in ck], "export_peak_rss": rss,
                          "dd_cpu_s": [round(x, 2) for x in dd_cpu], "export_cpu_s": [round(x, 2) for x in ck_cpu],
                          "dd_min_median": [round(min(dd), 2), round(md, 2)],
                          "export_min_median": [round(min(ck), 2), round(mc, 2)],
                          "ratio": round(mc / md, 3), "ratio_of_minima": round(min(ck) / min(dd), 3),
                          "pairwise": pairs, "ratio_met": mc <= 2 * md, "overwrite": a.overwrite,
                          "rss_target": int(target_rss), "rss_met": mr <= target_rss,
                          "load_before_after": [load0, load1], "cpus": os.cpu_count()}, indent=1))
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
