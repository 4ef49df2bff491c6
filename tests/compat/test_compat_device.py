"""``tf.device`` / ``tf.compat.v1.device`` without TensorFlow: a scope that places nothing, checking
the device name when entered, with TF 2.21's errors (each case below was run against TF 2.21;
tests/interop/test_tf_hf_loaders.py compares the whole grid with TF itself)."""

import pytest

import ckptool.compat.tf as tf

FINE = ["/CPU:0", "/cpu:0", "/GPU:0", "/device:CPU:0", "", None, "cpu", "CPU:0", "/job:a/job:b", "/task:1", "/CPU:*",
        "/device:FOO:0", "//", "/job:w/replica:0/task:0/device:GPU:3", "/Custom:1", "/epu:0"]
BAD = {
    "bad spec": "Unknown attribute 'bad spec' is encountered while parsing the device spec: 'bad spec'.",
    5: "Expecting a string device name. Got <class 'int'>(5)",
    b"/CPU:0": "Expecting a string device name. Got <class 'bytes'>(b'/CPU:0')",
    "/CPU:0/GPU:1": "Multiple device types are not allowed while parsing the device spec: /CPU:0/GPU:1.",
    "/gpu:0/device:CPU:0": "Multiple device types are not allowed while parsing the device spec: /gpu:0/device:CPU:0.",
    "/cpu:x": "invalid literal for int() with base 10: 'x'",
    "/device:CPU:x": "invalid literal for int() with base 10: 'x'",
    "/cpu:": "invalid literal for int() with base 10: ''",
    "job:a:b": "Unknown attribute 'job' is encountered while parsing the device spec: 'job:a:b'.",
    "/replica:x": "invalid literal for int() with base 10: 'x'",
    "/replica:x/bad": "Unknown attribute 'bad' is encountered while parsing the device spec: '/replica:x/bad'.",
    "/replica:1/task:y": "invalid literal for int() with base 10: 'y'",
    "/XLA_CPU:0": "Unknown attribute 'XLA_CPU' is encountered while parsing the device spec: '/XLA_CPU:0'.",
    "/ /": "Unknown attribute ' ' is encountered while parsing the device spec: '/ /'.",
    "/device:CPU": "Unknown attribute 'device' is encountered while parsing the device spec: '/device:CPU'.",
    "/cpu:0:1": "Unknown attribute 'cpu' is encountered while parsing the device spec: '/cpu:0:1'.",
}


@pytest.mark.parametrize("device", [tf.device, tf.compat.v1.device])
def test_device_scopes_check_names_on_entry_as_tf_does(device):
    for spec in FINE:
        with device(spec) as v:
            assert v is None
    for spec, message in BAD.items():
        scope = device(spec)  # TF parses on entry, not when the scope is made
        with pytest.raises(ValueError) as e, scope:
            pass
        assert str(e.value) == message, spec


def test_device_functions_are_refused_as_tf_refuses_them():
    with pytest.raises(RuntimeError, match=r"^tf\.device does not support functions\.$"):
        tf.device(lambda op: "/CPU:0")
    with pytest.raises(RuntimeError, match="^tf.device does not support functions when eager execution is enabled.$"):
        tf.compat.v1.device(lambda op: "/CPU:0")


def test_a_conversion_script_reads_inside_a_device_scope(tmp_path):
    import numpy as np

    import ckptool

    ckptool.write(str(tmp_path / "ckpt"), {"model/wte": np.arange(6, dtype=np.float32).reshape(2, 3)})
    with tf.device("/CPU:0"):
        reader = tf.train.load_checkpoint(str(tmp_path / "ckpt"))
        assert reader.get_variable_to_shape_map() == {"model/wte": [2, 3]}
