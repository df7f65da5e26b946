"""Composition divergences and the low-complexity check."""

import math

import numpy as np
import pytest

from unmask.protein.metrics import (
    composition,
    dipeptide_composition,
    generation_metrics,
    jsd,
    low_complexity,
    per_sequence_jsd,
)
from unmask.protein.tokens import encode, padded_rows


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
