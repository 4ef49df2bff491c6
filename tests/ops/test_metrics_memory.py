"""keep-best reads event files and JSON Lines in memory bounded by a small multiple of one record."""

import json
import os
import struct
import subprocess
import sys

import pytest

from ckptool.format.events import encode_record
from ckptool.format.protos.event_pb2 import Event

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1 << 20

# Resident memory of the child itself (VmHWM, not ru_maxrss: see tests/ops/test_transforms.py),
# as growth over what it held before reading.
_PEAK = """
import sys
from ckptool.ops.retain.history import event_series, read_history
def status(key):
    with open("/proc/self/status") as f:
        return next(int(ln.split()[1]) for ln in f if ln.startswith(key + ":")) // 1024
before = status("VmRSS")
path = sys.argv[1]
series = read_history(path) if path.endswith(".jsonl") else event_series(".", files=[path])
print(status("VmHWM") - before, sorted((k, sorted(v.items())) for k, v in series.items()))
"""


def _peak(path):
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), timeout=600)
    grown, series = out.stdout.split(" ", 1)
    return int(grown), series.strip()


def _key(num, wire):
    tag = num << 3 | wire
    return bytes([tag]) if tag < 0x80 else bytes([tag & 0x7F | 0x80, tag >> 7])


def _varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(num, body):
    return _key(num, 2) + _varint(len(body)) + body


def _event_file(path, big):
    ok = Event(step=7, wall_time=2.0)
    ok.summary.value.add(tag="loss", simple_value=0.25)
    head = _key(1, 1) + struct.pack("<d", 1.0) + _key(2, 0) + b"\x05"
    path.write_bytes(encode_record(head + big) + encode_record(ok.SerializeToString()))
    return path


def _int_val_record(n):  # a tensor summary holding n one-byte varints: protobuf objects of 4+ bytes each
    tensor = _key(1, 0) + b"\x03" + _ld(2, _ld(2, _key(1, 0) + _varint(n))) + _ld(7, b"\x01" * n)
    return _ld(5, _ld(1, _ld(1, b"t") + _ld(8, tensor)))


def _many_values_record(n):  # n summary values: a million message objects
    value = _ld(1, _ld(1, b"x") + _key(2, 5) + struct.pack("<f", 1.5))
    return _ld(5, value * n)


def _unknown_field_record(n):  # an image-like field the schema does not know
    return _ld(5, _ld(1, _ld(1, b"img") + _ld(4, b"\x89" * n)))


@pytest.mark.parametrize("make, size", [(_int_val_record, 20 * MB), (_unknown_field_record, 20 * MB),
                                        (_many_values_record, 120_000)], ids=["int_val", "unknown", "values"])
def test_event_record_memory(tmp_path, make, size):
    record = make(size)
    path = _event_file(tmp_path / "events.out.tfevents.1.host", record)
    grown, series = _peak(path)
    assert grown < 3 * len(record) / MB + 8, (grown, len(record))
    assert "('loss', [(7, 0.25)])" in series


@pytest.mark.parametrize("big", ["numbers", "string", "nested"])
def test_jsonl_line_memory(tmp_path, big):
    n = 24 * MB if big != "numbers" else 8 * MB  # json.loads made 0.7 GB of a 24 MB line; 8 MB is as telling
    value = {"numbers": "[" + "1," * (n // 2 - 1) + "1]", "string": json.dumps("a" * n),
             "nested": "[" * (n // 4) + "]" * (n // 4)}[big]
    path = tmp_path / "m.jsonl"
    with open(path, "w") as f:
        f.write('{"step": 1, "loss": 0.5}\n')
        f.write('{"step": 2, "loss": 0.25, "x": ' + value + "}\n")
        f.write("\n")
        f.write('{"step": 3, "loss": 0.125}\n')
    grown, series = _peak(path)
    assert grown < 3 * n / MB + 8, grown
    assert series == "[('loss', [(1, 0.5), (2, 0.25), (3, 0.125)])]"
