import os
import pathlib

import pytest
from hypothesis import HealthCheck, settings

DATA = pathlib.Path(__file__).parent / "data"

settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def data_dir():
    return DATA


# --------------------------------------------------------------------------- a tier that cannot go green empty
#
# CI runs each tier with CKPTOOL_REQUIRE naming it (.ci/run): "interop" (every test marked interop:
# TensorFlow must import), "remote" (tests/io/test_remote*.py: moto's S3 server and the GCS emulator
# must start), "hf" (every test marked hf: transformers 5, torch and sentencepiece must import) and
# "kerastorch" (tests/kerastorch: Keras 3 on torch, no TensorFlow). There, a test of the tier that skips,
# or a module of it skipped whole at import, is a failure that says why, and a tier that ran none of its
# tests fails the session.

TIERS = {"interop": "tests/interop/", "remote": "tests/io/test_remote", "hf": "tests/hf/",
         "kerastorch": "tests/kerastorch/"}


def _required() -> list[str]:
    wanted = [t.strip() for t in os.environ.get("CKPTOOL_REQUIRE", "").split(",") if t.strip()]
    unknown = [t for t in wanted if t not in TIERS]
    if unknown:
        raise pytest.UsageError(f"CKPTOOL_REQUIRE: unknown tier(s) {unknown}; known: {sorted(TIERS)}")
    return wanted


def _tier_of(nodeid: str, keywords=()) -> str | None:
    for tier in _required():
        if nodeid.startswith(TIERS[tier]) or tier in keywords:
            return tier
    return None


_ran: dict[str, int] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    tier = _tier_of(item.nodeid, item.keywords)
    if tier is None:
        return
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CKPTOOL_REQUIRE={tier}: this tier's test skipped, which CI counts as a failure: {reason}"
    elif report.when == "call" and report.passed:
        _ran[tier] = _ran.get(tier, 0) + 1


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    tier = _tier_of(report.nodeid) if report.skipped else None
    if tier is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"CKPTOOL_REQUIRE={tier}: this tier's module was skipped whole: {reason}"


def pytest_sessionfinish(session, exitstatus):
    if session.config.option.collectonly:
        return
    empty = [t for t in _required() if not _ran.get(t)]
    if empty and exitstatus == 0:
        print(f"\nCKPTOOL_REQUIRE: no test of tier(s) {', '.join(empty)} passed: the tier ran empty", flush=True)
        session.exitstatus = 1
