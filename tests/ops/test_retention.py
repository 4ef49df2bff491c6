"""The pure retention engine (ckptool.ops.retain.retention): TF CheckpointManager's decisions, then ckptool's rules."""

import pytest

from ckptool.ops.retain import retention as R

H = 3600.0


def entries(*ts, steps=None):
    steps = steps or list(range(1, len(ts) + 1))
    return [R.Entry(f"ckpt-{s}", t, s) for s, t in zip(steps, ts)]


def names(es):
    return [e.name for e in es]


def test_sweep_keeps_the_newest_max_to_keep():
    d = R.sweep(entries(1, 2, 3, 4, 5), 2, None, 0.0)
    assert names(d.kept) == ["ckpt-4", "ckpt-5"] and names(d.deleted) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert d.preserved == [] and d.last_preserved_timestamp == 0.0


@pytest.mark.parametrize("k", [None, 0])
def test_max_to_keep_none_or_zero_keeps_everything(k):
    d = R.sweep(entries(1, 2, 3), k, 1.0, 5.0)
    assert names(d.kept) == ["ckpt-1", "ckpt-2", "ckpt-3"] and not d.deleted
    assert d.last_preserved_timestamp == 5.0  # unchanged, as TF's _sweep returns early


def test_every_n_hours_preserves_and_counts_from_the_last_preserved():
    # lp = 0 + 1 h: ckpt-1 at 1 h is exactly N hours later (>=: preserved), ckpt-2 at 1.5 h is not,
    # ckpt-3 at 2 h is 1 h after ckpt-1 (preserved).
    d = R.sweep(entries(2 * H, 2.5 * H, 3 * H, 9 * H), 1, 1.0, 1 * H)
    assert names(d.preserved) == ["ckpt-1", "ckpt-3"] and names(d.deleted) == ["ckpt-2"]
    assert names(d.kept) == ["ckpt-4"] and d.last_preserved_timestamp == 3 * H
    assert d.reasons["ckpt-1"] == [R.EVERY_N_HOURS] and d.reasons["ckpt-4"] == [R.MAX_TO_KEEP]


def test_recover_as_checkpoint_manager_init():
    rec = R.recover(["a", "b", "c"], [10.0, 20.0, 30.0], 15.0, now=100.0)
    assert names(rec.managed) == ["b", "c"] and names(rec.unmanaged) == ["a"]
    # No timestamps (Checkpoint.save / TF1 Saver): [lp] * n, none managed.
    rec = R.recover(["a", "b"], [], 0.0, now=100.0)
    assert rec.managed == [] and names(rec.unmanaged) == ["a", "b"]
    # No state file: lp = now - 1.
    assert R.recover([], None, None, now=100.0).last_preserved_timestamp == 99.0


def test_recover_clamps_future_timestamps_and_a_clock_gone_back():
    rec = R.recover(["a", "b"], [50.0, 500.0], 40.0, now=100.0)
    assert [e.timestamp for e in rec.managed] == [50.0, 100.0]
    rec = R.recover(["a"], [500.0], 400.0, now=100.0)
    assert rec.clock_went_back and rec.last_preserved_timestamp == 100.0 and rec.managed == []


def test_recover_duplicate_names_keep_first_position_last_timestamp():
    rec = R.recover(["a", "b", "a"], [10.0, 20.0, 30.0], 0.0, now=100.0)
    assert [(e.name, e.timestamp) for e in rec.managed] == [("a", 30.0), ("b", 20.0)]


def test_continuing_manager_manages_every_listed_entry():
    rec = R.recover(["a", "b"], [10.0, 20.0], 20.0, now=100.0, continuing=True)
    assert names(rec.managed) == ["a", "b"]


def test_record_moves_a_resaved_checkpoint_last():
    es = R.record(entries(1, 2, 3), R.Entry("ckpt-1", 9.0, 1))
    assert names(es) == ["ckpt-2", "ckpt-3", "ckpt-1"]


def test_plan_without_extra_rules_is_sweep():
    es = entries(1 * H, 2 * H, 3 * H, 4 * H, 5 * H)
    p = R.plan(es, R.Policy(2, 1.0), 0.0, now=6 * H)
    s = R.sweep(es, 2, 1.0, 0.0)
    assert (names(p.kept), names(p.preserved), names(p.deleted)) == (names(s.kept), names(s.preserved),
                                                                     names(s.deleted))
    assert p.reasons["ckpt-5"] == [R.MAX_TO_KEEP, R.LATEST]


def test_plan_extra_rules_keep_in_the_state():
    es = entries(*[i * H for i in range(1, 11)], steps=[100 * i for i in range(1, 11)])
    p = R.plan(es, R.Policy(2, None, keep_steps_every=500, min_age=2.5 * H, pinned=frozenset({"ckpt-100"})),
               0.0, now=10 * H)
    assert names(p.kept) == ["ckpt-100", "ckpt-500", "ckpt-800", "ckpt-900", "ckpt-1000"]
    assert p.reasons["ckpt-100"] == [R.PINNED] and p.reasons["ckpt-500"] == [R.STEPS_EVERY]
    assert p.reasons["ckpt-800"] == [R.MIN_AGE]
    assert names(p.deleted) == ["ckpt-200", "ckpt-300", "ckpt-400", "ckpt-600", "ckpt-700"]


def test_plan_never_deletes_the_latest_named():
    p = R.plan(entries(1, 2, 3), R.Policy(1), 0.0, now=10, latest="ckpt-1")
    assert names(p.kept) == ["ckpt-1", "ckpt-3"] and p.reasons["ckpt-1"] == [R.LATEST]


def test_rethin_restarts_every_n_hours_from_the_oldest():
    t0 = 1.8e9
    es = entries(*(t0 + x for x in (1, 1 * H, 2 * H, 2.5 * H, 4 * H, 5 * H)))
    d = R.rethin(es, R.Policy(1, 1.0), now=t0 + 6 * H)
    assert names(d.preserved) == ["ckpt-1", "ckpt-3", "ckpt-5"] and names(d.kept) == ["ckpt-6"]
    assert names(d.deleted) == ["ckpt-2", "ckpt-4"]


@pytest.mark.parametrize("text,seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800),
                                          ("2.5h", 9000), ("15", 15), ("1w", 604800)])
def test_parse_duration(text, seconds):
    assert R.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "-1h", "1y", "nanh", "infd"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        R.parse_duration(text)


# ---- issue 36: damaged checkpoints are not counted; TF1 Saver's every-N-hours


def health_of(damaged=(), gone=()):
    return lambda name: R.BROKEN if name in damaged else R.GONE if name in gone else R.INTACT


def test_a_damaged_checkpoint_is_not_counted_as_one_of_max_to_keep():
    es = entries(1, 2, 3, 4, 5)
    d = R.sweep(es, 1, None, 0.0, health_of({"ckpt-5"}))
    assert names(d.kept) == ["ckpt-4", "ckpt-5"] and names(d.deleted) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    assert d.reasons["ckpt-4"] == [R.LAST_INTACT] and d.reasons["ckpt-5"] == [R.MAX_TO_KEEP]
    d = R.sweep(es, 2, None, 0.0, health_of({"ckpt-4"}))  # damaged inside the window: one more intact kept
    assert names(d.kept) == ["ckpt-3", "ckpt-4", "ckpt-5"] and d.reasons["ckpt-3"] == [R.LAST_INTACT]
    d = R.sweep(es, 1, None, 0.0, health_of({"ckpt-2", "ckpt-5"}))  # one older than the window goes
    assert names(d.kept) == ["ckpt-4", "ckpt-5"] and names(d.deleted) == ["ckpt-1", "ckpt-2", "ckpt-3"]
    d = R.sweep(es, 1, None, 0.0, health_of({"ckpt-4", "ckpt-5"}))  # both newest damaged
    assert names(d.kept) == ["ckpt-3", "ckpt-4", "ckpt-5"] and d.reasons["ckpt-4"] == [R.DAMAGED]
    d = R.sweep(es, 2, None, 0.0, health_of(set(names(es))))  # nothing intact: nothing goes
    assert names(d.kept) == names(es) and not d.deleted
    d = R.sweep(es, 2, None, 0.0, health_of())  # none damaged: TF's sweep exactly
    assert names(d.kept) == ["ckpt-4", "ckpt-5"] and d.reasons["ckpt-4"] == [R.MAX_TO_KEEP]


def test_a_damaged_checkpoint_is_never_preserved_by_every_n_hours():
    d = R.sweep(entries(1 * H, 2 * H, 5 * H, 6 * H, 7 * H), 1, 1.0, 0.0, health_of({"ckpt-2", "ckpt-5"}))
    # ckpt-1 (1 h) is preserved; ckpt-2 (2 h) would be, but it is damaged: deleted; ckpt-3 (5 h) is;
    # the window is the newest intact (ckpt-4) and the damaged latest
    assert names(d.preserved) == ["ckpt-1", "ckpt-3"] and names(d.deleted) == ["ckpt-2"]
    assert names(d.kept) == ["ckpt-4", "ckpt-5"] and d.last_preserved_timestamp == 5 * H


def test_the_newest_intact_is_never_deleted_even_when_the_latest_is_gone():
    es = entries(1, 2, 3)
    p = R.plan(es, R.Policy(1), 0.0, now=10, health=health_of(gone={"ckpt-3"}))
    # a gone entry counts as TF counts it (nothing of it to delete); the newest intact stays
    assert names(p.kept) == ["ckpt-2", "ckpt-3"] and names(p.deleted) == ["ckpt-1"]
    assert p.reasons["ckpt-2"] == [R.LAST_INTACT]
    p = R.plan(es, R.Policy(1), 0.0, now=10, health=health_of(gone={"ckpt-2"}))
    assert names(p.kept) == ["ckpt-3"] and names(p.deleted) == ["ckpt-1", "ckpt-2"]


def test_tf1_saver_preserves_strictly_after_the_next_keep_time_which_advances_by_n_hours():
    # Saver._MaybeDeleteOldCheckpoints: next = start + N h; preserved when t > next; next += N h
    es = entries(0, 1 * H, 2 * H, 3 * H, 4 * H, 5 * H, 6 * H)
    d = R.sweep(es, 1, 2.0, 0.0, tf1=True)
    # next = 2 h: 0, 1 h, 2 h (not strictly after) go; 3 h is kept (next 4 h); 4 h goes; 5 h kept
    assert names(d.preserved) == ["ckpt-4", "ckpt-6"] and names(d.deleted) == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-5"]
    assert d.last_preserved_timestamp == 4 * H  # the next keep time (6 h) less N hours
    tf2 = R.sweep(es, 1, 2.0, 0.0)  # CheckpointManager's rule differs: >= and from the preserved one's time
    assert names(tf2.preserved) != names(d.preserved)


def test_tf1_seconds_apart_preserve_nothing():
    es = entries(*[float(i) for i in range(8)])
    d = R.sweep(es, 2, 2.0, 0.0, tf1=True)
    assert not d.preserved and names(d.kept) == ["ckpt-7", "ckpt-8"]
