"""Bench row metrics: tokens per pass, wall per solved item, AUP (unmask.bench)."""

import math

import pytest

from unmask.bench.contract import BenchRow
from unmask.bench.rows import add_rate_metrics, aup


def _row(tpf, solved):
    return BenchRow("r", "r", solved, tokens_per_pass=tpf)


def test_aup_of_one_point_is_its_area():
    assert aup([_row(1.0, 0.8)]) == pytest.approx(80.0)


def test_aup_without_accuracy_loss_is_the_plain_area():
    assert aup([_row(3.0, 0.8), _row(1.0, 0.8)]) == pytest.approx(80.0 + 2.0 * 80.0)


def test_aup_weights_accuracy_loss():
    w = math.exp(-3.0 * (1.0 - 78.0 / 80.0))
    assert aup([_row(1.0, 0.8), _row(2.0, 0.78)]) == pytest.approx(80.0 + (78.0 * w + 80.0) / 2)


def test_aup_drops_points_more_than_five_points_below_the_first():
    kept = aup([_row(1.0, 0.8), _row(2.0, 0.78)])
    assert aup([_row(1.0, 0.8), _row(2.0, 0.78), _row(4.0, 0.70)]) == pytest.approx(kept)


def test_aup_skips_rows_without_the_fields():
    reference = BenchRow("natural", "natural", 0.5)  # decodes nothing: no tokens per pass
    assert aup([reference]) is None
    assert aup([reference, _row(1.0, 0.5), _row(2.0, None)]) == pytest.approx(50.0)


def _decoded(revealed, nfe, sequences, accuracy, n_items=10, wall_s=2.0):
    return BenchRow("r", "r", accuracy, nfe=nfe, sequences=sequences, wall_s=wall_s,
                    n_items=n_items, columns={"revealed": revealed})


def test_rate_metrics():
    rows = [_decoded(54.0, 9.0, 27.0, 0.5), _decoded(54.0, 54.0, 54.0, 0.0)]
    add_rate_metrics(rows)
    assert rows[0].tokens_per_pass == 6.0 and rows[0].sequences_per_token == 0.5
    assert rows[0].wall_per_solved == pytest.approx(0.4)
    assert rows[1].tokens_per_pass == 1.0 and rows[1].wall_per_solved is None


def test_rate_metrics_without_a_share_solved_or_a_decode():
    rows = [_decoded(3.0, 1.0, 1.0, 0.25, n_items=8, wall_s=1.0),
            _decoded(3.0, 3.0, 3.0, None, n_items=8, wall_s=1.0),
            _decoded(None, None, None, 0.9)]  # a reference row: nothing decoded
    add_rate_metrics(rows)
    assert rows[0].tokens_per_pass == 3.0 and rows[0].wall_per_solved == 0.5
    assert rows[1].tokens_per_pass == 1.0 and rows[1].wall_per_solved is None
    assert rows[2].tokens_per_pass is None and rows[2].sequences_per_token is None
    # a score that is no share of items (a closeness): no time per solved item
    add_rate_metrics(rows, per_solved=False)
    assert rows[0].tokens_per_pass == 3.0 and rows[0].wall_per_solved is None
