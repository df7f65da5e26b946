"""Every case of ``training_cases`` trains exactly as the fixture recorded: the same steps and
the same final weights (per-tensor sums within float tolerance; ``record_trainings.py
--check`` compares the weights' bytes on one machine)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from training_cases import CASES, run_case

FIXTURE = json.loads((Path(__file__).parent / "trainings.json").read_text())

#: a few dozen optimiser steps carry the kernel sets' last-bit differences of each step into
#: the weights: relative to a tensor's abs sum they stay below this
REL_TOL = 1e-4
#: a tensor whose gradient is zero in exact arithmetic (an attention key's bias) holds float
#: noise only: its sums are compared to this absolute floor
FLOOR = 1e-2

pytestmark = pytest.mark.kernels


def test_fixture_covers_every_case():
    assert set(FIXTURE) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_training_matches_fixture(name):
    got, want = run_case(name), FIXTURE[name]
    assert got.get("step") == want.get("step")
    assert set(got["sums"]) == set(want["sums"])
    for key, (total, size) in want["sums"].items():
        g_total, g_size = got["sums"][key]
        scale = max(size, FLOOR)
        assert math.isclose(g_size, size, rel_tol=REL_TOL, abs_tol=REL_TOL * FLOOR), key
        assert abs(g_total - total) <= REL_TOL * scale, (key, g_total, total)
