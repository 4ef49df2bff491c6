"""Races: a writer saving continuously while readers poll and prune runs again and again.

Bounded in time (about 3 s of writing per test); marked slow.
"""

import os
import subprocess
import sys
import textwrap

import pytest

import ckptool
from ckptool.errors import CkptError
from ckptool.io.control.state import read_state, resolve

pytestmark = pytest.mark.slow
RACES = {"polls": 0, "prunes": 0, "saves": 0}

WRITER = textwrap.dedent("""
    import sys, time, numpy as np, ckptool
    from ckptool.io.control.state import CheckpointState, write_state
    d, seconds = sys.argv[1], float(sys.argv[2])
    end = time.monotonic() + seconds
    step, paths = 0, []
    while time.monotonic() < end:
        step += 1
        ckptool.write(f"{d}/ckpt-{step}", {"w": np.full(64, step, np.float32)}, sync=False)
        paths.append(f"ckpt-{step}")
        write_state(d, CheckpointState(paths[-1], paths[-5:]))
    print(step)
""")


def _start_writer(d, seconds):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(d), str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_reader_always_finds_a_state_file_that_parses(tmp_path):
    p = _start_writer(tmp_path, 3.0)
    seen_latest = set()
    while p.poll() is None:
        try:
            st = read_state(str(tmp_path))
        except CkptError as exc:  # a torn state file would land here
            raise AssertionError(f"state file did not parse mid-write: {exc}") from exc
        RACES["polls"] += 1
        if st is None:
            continue
        latest = resolve(str(tmp_path), st.model_checkpoint_path)
        with ckptool.open(latest) as ck:  # the state names only complete checkpoints
            assert all(e is None for _, e in ck.verify())
        seen_latest.add(latest)
    out, err = p.communicate()
    assert p.returncode == 0, err
    RACES["saves"] += int(out)
    assert len(seen_latest) > 1 and RACES["polls"] > 10


def test_prune_again_and_again_while_a_writer_saves(tmp_path):
    p = _start_writer(tmp_path, 3.0)
    while p.poll() is None:
        r = subprocess.run([sys.executable, "-m", "ckptool", "prune", str(tmp_path), "--max-to-keep", "3"],
                           capture_output=True, text=True)
        RACES["prunes"] += 1
        assert r.returncode in (0, 1), r.stderr
        assert "Traceback" not in r.stderr
        st = read_state(str(tmp_path))
        if st is not None:
            latest = resolve(str(tmp_path), st.model_checkpoint_path)
            assert os.path.isfile(latest + ".index"), f"prune deleted the latest checkpoint {latest}"
    out, _ = p.communicate()
    last = int(out)
    # The newest checkpoint survives every prune, and nothing saved after the last prune is lost.
    assert (tmp_path / f"ckpt-{last}.index").exists()
    with ckptool.open(str(tmp_path)) as ck:
        assert ck.read("w")[0] == last
