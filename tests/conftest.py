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
