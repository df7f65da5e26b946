"""Composition divergences and the low-complexity check."""

import math

import numpy as np
import pytest

from unmask.protein.metrics import (
    composition,
    dipeptide_composition,
    generation_metrics,
    jsd,
    jsd_std_error,
    low_complexity,
    per_sequence_jsd,
    row_counts,
)
from unmask.protein.tokens import AMINO_ACIDS, encode, padded_rows


def test_jsd_values():
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.0, 0.0, 1.0])
    assert jsd(p, p) == 0.0
    assert jsd(p, q) == pytest.approx(math.log(2))
    r = np.array([0.25, 0.75, 0.0])
    # by hand over the two non-zero letters
    expected = 0.5 * (0.5 * math.log(0.5 / 0.375) + 0.5 * math.log(0.5 / 0.625)) + 0.5 * (
        0.25 * math.log(0.25 / 0.375) + 0.75 * math.log(0.75 / 0.625))
    assert jsd(p, r) == pytest.approx(expected) and jsd(r, p) == pytest.approx(expected)
    assert np.allclose(jsd(np.stack([p, r]), p[None]), [0.0, expected])


def test_compositions_pool_residues_and_never_span_two_proteins():
    rows = padded_rows([encode("AAC"), encode("CD")], max_length=5)
    comp = composition(rows)
    assert comp[0] == pytest.approx(2 / 5) and comp[1] == pytest.approx(2 / 5)
    di = dipeptide_composition([encode("AC"), encode("DE")])
    idx = {a: i for i, a in enumerate("ACDEFGHIKLMNPQRSTVWY")}
    assert di.sum() == pytest.approx(1.0)
    assert di[idx["A"] * 20 + idx["C"]] == 0.5 and di[idx["D"] * 20 + idx["E"]] == 0.5
    assert np.array_equal(composition([encode("AAC"), encode("CD")]), comp)


def test_low_complexity_is_strictly_above_forty_percent():
    rows = padded_rows([encode("AAAACDEFGH"), encode("AAAAACDEFG"), encode("ACDEFGHIKL")])
    assert low_complexity(rows).tolist() == [False, True, False]


def test_row_counts_and_the_bootstrap_standard_error():
    rows = padded_rows([encode("AAC"), encode("CD")])
    counts = row_counts(rows)
    assert counts.shape == (2, 20) and counts.sum() == 5
    assert counts[0, AMINO_ACIDS.index("A")] == 2 and counts[1, AMINO_ACIDS.index("D")] == 1
    rng = np.random.default_rng(1)
    ref = rng.dirichlet(np.ones(20) * 5)

    def sample(n, p):
        return padded_rows([rng.choice(20, 80, p=p) for _ in range(n)])

    # away from 0 the JSD is smooth in the composition: its noise falls like 1/sqrt(n)
    far = rng.dirichlet(np.ones(20) * 5)
    se_small = jsd_std_error(sample(50, far), ref)
    se_large = jsd_std_error(sample(800, far), ref)
    assert 0 < se_large < 0.5 * se_small
    assert se_large == pytest.approx(se_small / 4, rel=0.5)
    small = sample(50, ref)
    assert jsd_std_error(small, ref) == jsd_std_error(small, ref)  # a function of the seed
    # identical rows leave nothing to resample
    assert jsd_std_error(padded_rows([encode("ACDE")] * 5), ref) == pytest.approx(0, abs=1e-15)


def test_generation_metrics_of_natural_sequences_are_small():
    rng = np.random.default_rng(0)
    ref = rng.dirichlet(np.ones(20) * 5)
    seqs = [rng.choice(20, 80, p=ref) for _ in range(400)]
    rows = padded_rows(seqs)
    heldout = [rng.choice(20, 300, p=ref) for _ in range(100)]
    m = generation_metrics(rows, heldout, ref)
    assert m["jsd_heldout"] < 0.003 and m["jsd_background"] < 0.003
    assert m["low_complexity"] == 0.0 and m["distinct"] == 1.0
    # a composition far from the reference shows up in every divergence
    poly = padded_rows([np.zeros(80, dtype=np.int64)] * 10)
    bad = generation_metrics(poly, heldout, ref)
    assert bad["jsd_heldout"] > 0.3 and bad["low_complexity"] == 1.0 and bad["distinct"] == 0.1
    assert per_sequence_jsd(poly, ref).shape == (10,)
