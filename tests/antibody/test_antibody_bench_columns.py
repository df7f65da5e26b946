"""The antibody bench's generation columns: heavy share and PLL paired against sequential
(exact values on hand-made rows), and the heavy setting's templates."""

import math

import pytest

pytest.importorskip("anarci")

from unmask.antibody.bench import (  # noqa: E402
    GENERATION,
    generation_vs_sequential,
    paired_mean,
    setting_cases,
)
from unmask.antibody.settings import HEAVY_LENGTHS  # noqa: E402
from unmask.bench.contract import BenchRow  # noqa: E402


def row(label, heavy, pll):
    return BenchRow(label, label, 0.9, columns={"heavy_each": heavy, "pll_each": pll})


def test_paired_mean_is_the_mean_difference_with_its_standard_error():
    a, b = row("eb", [1, 0, 0, 1], [-1.0, -1.2, -1.4, -1.0]), row("confidence", [1, 1, 1, 1],
                                                                  [-1.0, -1.0, -1.0, -1.0])
    mean, se = paired_mean(a, b, "heavy_each", 100.0)
    assert mean == pytest.approx(-50.0)
    assert se == pytest.approx(100 * math.sqrt(1 / 3) / 2)  # sd of (0,-1,-1,0) is sqrt(1/3)
    mean, se = paired_mean(a, b, "pll_each")
    assert mean == pytest.approx(-0.15)
    assert se == pytest.approx(math.sqrt(((0.15 ** 2) * 2 + 0.05 ** 2 + 0.25 ** 2) / 3) / 2)
    assert paired_mean(a, BenchRow("x", "x", 0.0), "pll_each") is None


def test_generation_rows_are_compared_with_the_first_sequential_row():
    rows = [row("topk k=4", [0, 0], [-2.0, -2.5]), row("confidence", [1, 1], [-1.0, -1.5]),
            row("entropy", [1, 0], [-1.0, -1.0])]
    out = generation_vs_sequential(rows)
    assert out[1] == (None, None)
    assert out[0] == ("-100 ± 0", "-1.000 ± 0.000")
    assert out[2][0] == "-50 ± 50"
    assert generation_vs_sequential([row("eb", [1], [-1.0])]) == [(None, None)]


def test_the_heavy_setting_generates_full_heavy_chain_lengths():
    assert "heavy" in GENERATION
    cases, reference = setting_cases("heavy", 40, seed=3)
    lengths = [c.length for c in cases]
    assert len(cases) == 40 and set(lengths) <= set(HEAVY_LENGTHS)
    assert len(set(lengths)) > 3 and all(c.truth is None and c.masked.all() for c in cases)
    assert cases[0].template == f"<mask:{lengths[0]}>"
    assert [c.length for c in setting_cases("heavy", 40, seed=3)[0]] == lengths
