"""The tests that kill the three mutants a review found surviving (issue 39): each is also in
bench/mutate.py, whose run shows it killed."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from lockholder import lock_held_elsewhere

import ckptool
from ckptool.errors import CorruptError
from ckptool.format import safetensors_meta as stm
from ckptool.ops.retain import prune as P
from ckptool.ops.transform.rename.rules import Renamer, parse_rule

# --------------------------------------------------------------------------- regex rules in the order given


def test_regex_rules_apply_in_the_order_given_first_match_wins():
    rules = [parse_rule(r"re:layer_(\d+)/(.*)=block_\1/\2"), parse_rule(r"re:layer_(.*)=other_\1")]
    r = Renamer(rules)
    assert r("layer_3/kernel") == "block_3/kernel"  # both match: the first given wins
    assert r("layer_x") == "other_x"  # only the second matches
    back = Renamer(list(reversed([parse_rule(r"re:layer_(\d+)/(.*)=block_\1/\2"),
                                  parse_rule(r"re:layer_(.*)=other_\1")])))
    assert back("layer_3/kernel") == "other_3/kernel"  # the order given, not the order of specificity


def test_rewrite_names_cli_keeps_the_regex_order(tmp_path):
    src = tmp_path / "src"
    ckptool.write(str(src), {"layer_1/w": np.zeros(2)})
    ckptool.rewrite_names(str(src), str(tmp_path / "a"), [r"re:layer_(.*)/w=first_\1", r"re:layer_(.*)=second_\1"],
                          allow_unused=True)
    with ckptool.open(str(tmp_path / "a")) as ck:
        assert ck.names() == ["first_1"]


# --------------------------------------------------------------------------- a gap between safetensors tensors


def _st(tensors: dict, data: bytes) -> bytes:
    head = json.dumps(tensors).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + data


def test_a_safetensors_header_with_a_gap_between_tensors_is_refused(tmp_path):
    header = {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}  # bytes 4..8 belong to nobody
    with pytest.raises(CorruptError, match="leave a gap"):
        stm.decode_header(json.dumps(header).encode(), 12, "gap.safetensors")
    f = tmp_path / "gap.safetensors"
    f.write_bytes(_st(header, bytes(12)))
    with pytest.raises(CorruptError, match="gap"):
        ckptool.convert(str(f), str(tmp_path / "out"))
    header["b"]["data_offsets"] = [4, 8]  # the same without the gap: accepted
    assert [t.name for t in stm.decode_header(json.dumps(header).encode(), 8, "ok")[0]] == ["a", "b"]


# --------------------------------------------------------------------------- --clean-temp --dry-run beside a writer


def test_clean_temp_dry_run_deletes_nothing_while_a_writer_holds_the_lock(tmp_path):
    d = tmp_path / "run"
    for step in (1, 2):
        ckptool.write(str(d / f"ckpt-{step}"), {"w": np.zeros(2)})
    old = d / "ckpt-3.data-00000-of-00001.tempstate77"
    old.write_bytes(b"x" * 100)
    now = os.stat(old).st_mtime + 7200  # two hours old
    assert [os.path.basename(p) for p in P.prune(str(d), clean_temp=True, dry_run=True, now=now, scan=True)
            .temp_deleted] == [old.name]  # with no writer: it would go
    with lock_held_elsewhere(d):
        r = P.prune(str(d), clean_temp=True, dry_run=True, now=now, scan=True)
        assert r.temp_deleted == []  # a writer holds the lock: its temporary is not said to go
    assert old.exists()
