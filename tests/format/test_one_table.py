"""The rules kept in one place in format/: the float lists and safetensors codes of the dtype
table, the JSON spelling of non-finite floats, name <-> key, one byte swap and CRC check."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ckptool.errors import ChecksumError
from ckptool.format import dtypes, objkeys, safetensors_meta, tensors
from ckptool.format.bundle import Entry
from ckptool.format.coding import crc32c, mask_crc
from ckptool.format.json_numbers import json_float


def test_the_float_lists_come_from_the_table():
    for name in dtypes.FLOATS:
        assert dtypes.from_name(name).numpy.kind == "f" or name.startswith(("bfloat", "float8", "float4"))
    assert dtypes.CASTABLE == ("float16", "bfloat16", "float32", "float64")
    assert "float4_e2m1fn" not in dtypes.AVERAGED and set(dtypes.AVERAGED) < set(dtypes.FLOATS)


def test_safetensors_codes_are_one_to_one_and_sized_by_the_table():
    codes = safetensors_meta.TF_TO_ST
    assert len(set(codes.values())) == len(codes)
    assert codes["float32"] == "F32" and codes["bfloat16"] == "BF16" and codes["float8_e4m3fn"] == "F8_E4M3"
    assert "complex128" not in codes and "string" not in codes
    for tf, st in codes.items():
        assert safetensors_meta.ST_ITEMSIZE[st] == dtypes.from_name(tf).itemsize
        assert safetensors_meta.ST_TO_TF[st] == tf


def test_npy_portable_is_plain_numpy_only():
    portable = {d.name for d in dtypes.BY_VALUE.values() if d.npy_portable}
    assert {"float16", "float32", "complex128", "bool", "uint64"} <= portable
    assert not portable & {"bfloat16", "float8_e5m2", "qint8", "int4", "string", "variant", "resource"}


@pytest.mark.parametrize("x, text", [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_one_spelling_of_a_non_finite_float(x, text):
    from ckptool.cli.jsonout import dumps

    assert json_float(x) == text and json_float(np.float32(x)) == text
    assert json.loads(dumps([x], ensure_ascii=True, default=str)) == [text]
    assert json_float(1.5) == 1.5


def test_names_and_keys_round_trip_every_byte():
    key = b"a/\xff\xfeb"
    assert objkeys.key_of(objkeys.name_of(key)) == key
    assert objkeys.shown(key) == "a/\\xff\\xfeb" == objkeys.shown(objkeys.name_of(key))


def test_one_byte_swap_and_crc_check():
    a = np.array([1.5, -2.0, np.nan], dtype="<f4")
    swapped = tensors.byteswap(a, 4)
    assert swapped.tobytes() == a.astype(">f4").tobytes()
    assert tensors.byteswap(swapped, 4).tobytes() == a.tobytes()
    c = np.array([1 + 2j], dtype="<c8")
    assert tensors.byteswap(c, 8).tobytes() == c.astype(">c8").tobytes()
    e = Entry(key=b"w", dtype=dtypes.from_name("float32"), shape=(3,), shard_id=0, offset=0, size=12,
              crc32c=mask_crc(crc32c(a.tobytes())), slices=())
    tensors.check_crc(a.tobytes(), e, "f")
    tensors.check_crc_value(crc32c(a.tobytes()[8:], crc32c(a.tobytes()[:8])), e, "f", 12)  # chained
    with pytest.raises(ChecksumError, match=r"f: checksum does not match for tensor 'w'.* on 12 bytes at offset 0"):
        tensors.check_crc_value(0, e, "f", 12)
