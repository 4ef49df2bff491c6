"""``tf.device`` and ``tf.compat.v1.device`` on a grid of device names (the scope GPT-SAN's conversion
script reads inside): what each call and ``with`` does, printed; run under TF and under the shim by
tests/interop/test_tf_hf_loaders.py, which compares the two outputs."""

import tensorflow as tf

SPECS = ["/CPU:0", "/cpu:0", "/GPU:0", "/device:CPU:0", "", None, "cpu", "bad spec", 5, b"/CPU:0", "/CPU:0/GPU:1",
         "CPU:0", "/cpu:x", "/device:CPU:x", "job:a:b", "/job:a/job:b", "/replica:x", "/replica:x/bad", "/task:1",
         "/XLA_CPU:0", "/CPU:*", "/device:FOO:0", "//", "/ /", "/cpu:", "/device:CPU", "/replica:1/task:y",
         "/job:w/replica:0/task:0/device:GPU:3", "/gpu:0/device:CPU:0", "/Custom:1", "/epu:0", 1.5, ["x"], "/cpu:0:1"]
for mod, fn in (("v2", tf.device), ("v1", tf.compat.v1.device)):
    for spec in SPECS + [lambda op: "/CPU:0"]:
        shown = "<fn>" if callable(spec) else repr(spec)
        try:
            cm = fn(spec)
        except Exception as e:
            print(mod, shown, "call", type(e).__name__, e)
            continue
        try:
            with cm as v:
                print(mod, shown, "ok", v)
        except Exception as e:
            print(mod, shown, "enter", type(e).__name__, e)
