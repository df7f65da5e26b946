"""Bench row metrics: tokens per pass, wall per solved item, AUP (unmask.bench)."""

import math

import pytest

from unmask.bench import add_rate_metrics, aup


def _row(tpf, solved):
    return {"tokens_per_pass": tpf, "solved": solved}


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
    assert aup([{"solved": 0.5}]) is None
    assert aup([{"solved": 0.5}, _row(1.0, 0.5)]) == pytest.approx(50.0)


def test_rate_metrics():
    rows = [{"revealed": 54.0, "nfe": 9.0, "sequences": 27.0, "solved": 0.5, "n_items": 10,
             "wall_s": 2.0},
            {"revealed": 54.0, "nfe": 54.0, "sequences": 54.0, "solved": 0.0, "n_items": 10,
             "wall_s": 2.0}]
    add_rate_metrics(rows)
    assert rows[0]["tokens_per_pass"] == 6.0 and rows[0]["sequences_per_token"] == 0.5
    assert rows[0]["wall_per_solved"] == pytest.approx(0.4)
    assert rows[1]["tokens_per_pass"] == 1.0 and rows[1]["wall_per_solved"] is None


def test_rate_metrics_read_a_named_accuracy_key():
    rows = [{"revealed": 3.0, "nfe": 1.0, "sequences": 1.0, "accuracy": 0.25, "n_items": 8,
             "wall_s": 1.0},
            {"revealed": 3.0, "nfe": 3.0, "sequences": 3.0, "n_items": 8, "wall_s": 1.0}]
    add_rate_metrics(rows, solved="accuracy")
    assert rows[0]["tokens_per_pass"] == 3.0 and rows[0]["wall_per_solved"] == 0.5
    assert rows[1]["tokens_per_pass"] == 1.0 and rows[1]["wall_per_solved"] is None
